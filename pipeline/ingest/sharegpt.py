"""ShareGPT-style conversation files (as LLaMA-Factory and many SFT sets keep them):

    {"conversations": [{"from": "human", "value": ...}, {"from": "function_call", "value": "{\"name\": ...,
      \"arguments\": {...}}"}, {"from": "observation", "value": ...}, {"from": "gpt", "value": ...}],
     "system": "...", "tools": "[{...}]"}

Input only: there is no ShareGPT wire format to write back to. Calls carry no ids, so results pair with
calls by order, and the pairing is recorded.
"""

from __future__ import annotations

from typing import Any


from .. import jsonpolicy
from ..conversation import Conversation, Message, Meta, Text, Tool, ToolCall, ToolResult
from ..errors import ParseError
from ..ids import CallIds
from ..formats.base import expect, require

NAME = "sharegpt"
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "model": "assistant",
          "system": "system", "function_call": "call", "tool_call": "call", "observation": "result",
          "tool": "result", "function": "result", "function_response": "result"}


def is_sharegpt(value: Any) -> bool:
    turns = value.get("conversations") if isinstance(value, dict) else None
    return (isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict)
            and "from" in turns[0] and "value" in turns[0])


def parse(value: dict, *, strict: bool = False) -> Conversation:
    turns = require(value, "conversations", list, "$")
    ids = CallIds()
    pending: list[ToolCall] = []
    messages: list[Message] = []
    system: tuple[Text, ...] = ()
    if isinstance(value.get("system"), str) and value["system"]:
        system = (Text(value["system"]),)
    for i, turn in enumerate(turns):
        path = f"$.conversations[{i}]"
        expect(turn, dict, path, "a turn")
        speaker = require(turn, "from", str, path)
        text = require(turn, "value", str, path)
        role = _ROLES.get(speaker)
        if role is None:
            raise ParseError(f"unknown speaker '{speaker}'; known: {', '.join(_ROLES)}", path=f"{path}.from")
        if role == "system" and i == 0 and not system:
            system = (Text(text),)
        elif role == "call":
            calls = _calls(text, ids, f"{path}.value")
            pending.extend(calls)
            if messages and messages[-1].role == "assistant":
                # "gpt" text then "function_call" is one assistant turn: text, then its calls.
                messages[-1] = Message("assistant", messages[-1].blocks + tuple(calls))
            else:
                messages.append(Message("assistant", tuple(calls)))
        elif role == "result":
            if not pending:
                result = ToolResult(call_id=None, content=(Text(text),))
            else:
                call = pending.pop(0)
                result = ToolResult(call_id=call.id, name=call.name, content=(Text(text),), matched_by="name_order")
            if messages and messages[-1].role == "tool":
                messages[-1] = Message("tool", messages[-1].blocks + (result,))
            else:
                messages.append(Message("tool", (result,)))
        else:
            messages.append(Message(role, (Text(text),)))
    paired = any(isinstance(b, ToolResult) for m in messages for b in m.blocks)
    notes = ("calls and observations paired by order (ShareGPT has no call ids)",) if paired else ()
    return Conversation(messages=tuple(messages), system=system, tools=_tools(value.get("tools")),
                        meta=Meta(provider=NAME, shape="sharegpt", notes=notes))


def _calls(text: str, ids: CallIds, path: str) -> list[ToolCall]:
    try:
        payload = jsonpolicy.loads(text)
    except jsonpolicy.JsonPolicyError:
        raise ParseError("a function_call turn must hold JSON {\"name\", \"arguments\"}", path=path) from None
    out = []
    for j, item in enumerate(payload if isinstance(payload, list) else [payload]):
        where = f"{path}[{j}]" if isinstance(payload, list) else path
        expect(item, dict, where, "a function call")
        name = require(item, "name", str, where)
        arguments = item.get("arguments", item.get("parameters", {}))
        raw = None
        if isinstance(arguments, str):
            raw = arguments
            try:
                arguments = jsonpolicy.loads(arguments)
            except jsonpolicy.JsonPolicyError:
                out.append(ToolCall(id=ids.new(name, raw_arguments=raw), name=name, raw_arguments=raw,
                                    arguments_valid=False))
                continue
        out.append(ToolCall(id=ids.new(name, arguments), name=name, arguments=arguments, raw_arguments=raw))
    return out


def _tools(value: Any) -> tuple[Tool, ...]:
    if isinstance(value, str) and value.strip():
        try:
            value = jsonpolicy.loads(value)
        except jsonpolicy.JsonPolicyError:
            raise ParseError("'tools' must be a JSON array (or a string holding one)", path="$.tools") from None
    if not isinstance(value, list):
        return ()
    tools = []
    for i, item in enumerate(value):
        spec = item.get("function", item) if isinstance(item, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ParseError("a tool needs a 'name'", path=f"$.tools[{i}]")
        tools.append(Tool(name=spec["name"], description=spec.get("description"),
                          parameters=spec.get("parameters", {"type": "object", "properties": {}})))
    return tuple(tools)
