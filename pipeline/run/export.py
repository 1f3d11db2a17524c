"""The conversational export trainers take: `messages` + `tools` in the shape TRL's SFTTrainer and
Hugging Face chat templates read (tool_calls with arguments as objects, `tool` role results with their
call id, `reasoning_content` for reasoning). What it cannot hold goes to the ledger."""

from __future__ import annotations

from typing import Any, assert_never

from msgspec import UNSET

from .. import jsonpolicy
from ..conversation import Conversation, Media, Opaque, Reasoning, Text, Tool, ToolCall, ToolResult
from ..ledger import Ledger

TARGET = "messages export"


def to_messages(conv: Conversation, ledger: Ledger) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    messages: list[dict[str, Any]] = []
    for role, blocks, name in (("system", conv.system, "system"), ("developer", conv.developer, "developer")):
        if blocks:
            messages.append({"role": role, "content": _text(blocks, ledger, f"$.{name}")})
    for mi, message in enumerate(conv.messages):
        path = f"$.messages[{mi}]"
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for bi, block in enumerate(message.blocks):
            where = f"{path}.blocks[{bi}]"
            match block:
                case Text():
                    text.append(block.text)
                case Reasoning():
                    if block.text or block.summary:
                        reasoning.append(block.text or "\n".join(block.summary))
                    if block.signature or block.encrypted or block.redacted:
                        ledger.add("dropped", where, "opaque reasoning state has no field in chat messages")
                case ToolCall():
                    arguments = block.arguments if block.arguments_valid else block.raw_arguments
                    if not block.arguments_valid:
                        ledger.add("folded", where, "arguments are not valid JSON: exported as the raw string")
                    calls.append({"id": block.provider_id or block.id, "type": "function",
                                  "function": {"name": block.name, "arguments": arguments}})
                case ToolResult():
                    results.append(_result(block, ledger, where))
                case Media():
                    ledger.add("dropped", where, f"{block.kind} has no place in text chat messages")
                case Opaque():
                    ledger.add("dropped", where, f"provider item '{block.item_type}' has no place in chat messages")
                case _:
                    assert_never(block)
        messages.extend(results)
        if text or calls or reasoning or not results:
            out: dict[str, Any] = {"role": "user" if message.role == "tool" else message.role,
                                   "content": "".join(text)}
            if reasoning:
                out["reasoning_content"] = "\n".join(reasoning)
            if calls:
                out["tool_calls"] = calls
            if message.weight is not None:
                out["weight"] = message.weight
            messages.append(out)
    return messages, [tool_schema(t) for t in conv.tools]


def tool_schema(tool: Tool) -> dict[str, Any]:
    parameters = tool.parameters if tool.parameters is not UNSET else {"type": "object", "properties": {}}
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    function["parameters"] = parameters
    return {"type": "function", "function": function}


def _result(block: ToolResult, ledger: Ledger, where: str) -> dict[str, Any]:
    content = _text(block.content, ledger, where)
    if block.output is not UNSET:
        content = content or jsonpolicy.dumps(block.output).decode()
    if block.is_error:
        ledger.add("folded", where, "is_error has no field in chat messages: folded as an 'Error: ' prefix")
        content = f"Error: {content}"
    out: dict[str, Any] = {"role": "tool", "content": content}
    if block.provider_id or block.call_id:
        out["tool_call_id"] = block.provider_id or block.call_id
    if block.name:
        out["name"] = block.name
    return out


def _text(blocks, ledger: Ledger, path: str) -> str:
    parts = []
    for i, block in enumerate(blocks):
        if isinstance(block, Text):
            parts.append(block.text)
        else:
            ledger.add("dropped", f"{path}[{i}]", f"{block.kind} has no place in text chat messages")
    return "".join(parts)
