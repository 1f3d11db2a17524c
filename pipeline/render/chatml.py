"""ChatML as Qwen2.5-Instruct uses it: the family's facts and the parser from its token stream back to
a canonical Conversation.

The format (what `templates/chatml.jinja` writes):
    <|im_start|>system\nSYSTEM[\n\n# Tools ... <tools>\nTOOL_JSON...\n</tools> ...]<|im_end|>\n
    <|im_start|>user\nTEXT<|im_end|>\n
    <|im_start|>assistant\nTEXT[\n]<tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>...<|im_end|>\n
    <|im_start|>user\n<tool_response>\nRESULT\n</tool_response>[\n<tool_response>...]<|im_end|>\n
Results carry no call id: they answer the calls of the latest assistant turn by position.
"""

from __future__ import annotations

import json
import re
from typing import Callable

from ..conversation import Conversation, Message, Meta, Text, Tool, ToolCall, ToolResult
from ..errors import RenderError
from ..ids import CallIds
from ._inputs import InputPolicy
from .templates import Family

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
TOOLS_HEADER = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_FOOTER = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                "\"arguments\": <args-json-object>}\n</tool_call>")

POLICY = InputPolicy(target="chatml", reasoning="drop", developer="system", default_system=DEFAULT_SYSTEM,
                     text_joiner="\n", bad_name=re.compile(r'["\\\x00-\x1f]'))

_CALL = re.compile(r'<tool_call>\n\{"name": "([^"]*)", "arguments": (.*)\}\n</tool_call>', re.DOTALL)
_RESULT_OPEN, _RESULT_CLOSE = "<tool_response>\n", "\n</tool_response>"


def parse_back(text: str) -> Conversation:
    """The conversation a ChatML token stream holds. Raises RenderError on text ChatML cannot produce."""
    return parse_turns(text, _system, _assistant, "chatml")


def parse_turns(text: str, read_system: Callable[[str], tuple[tuple[Text, ...], tuple[Tool, ...]]],
                read_assistant: Callable[[str, CallIds, int], tuple[Message, list[ToolCall]]],
                family: str, prompts: tuple[str, ...] = ("",)) -> Conversation:
    """The turns of a ChatML-shaped stream (ChatML, Qwen3), the family's own readers for the leading
    system turn and for assistant bodies; `prompts` are what a generation prompt may hold after its header."""
    system: tuple[Text, ...] = ()
    tools: tuple[Tool, ...] = ()
    messages: list[Message] = []
    ids = CallIds()
    pending: list[ToolCall] = []  # calls of the latest assistant turn, in order
    answered = 0
    if text and not text.startswith("<|im_start|>"):
        raise RenderError(f"text before the first turn: {text[:60]!r}", path="$", code="parse_back")
    turns = text.split("<|im_start|>")[1:]
    for index, turn in enumerate(turns):
        role, newline, rest = turn.partition("\n")
        if role not in ("system", "user", "assistant") or not newline:
            raise RenderError(f"not a ChatML turn header: {turn[:40]!r}", path=f"$.turn[{index}]", code="parse_back")
        if not rest.endswith("<|im_end|>\n") or "<|im_end|>" in rest[:-11]:
            if role == "assistant" and rest in prompts and index == len(turns) - 1:
                break  # a generation prompt
            raise RenderError("a turn must end with one <|im_end|> and a newline", path=f"$.turn[{index}]",
                              code="parse_back")
        body = rest[:-11]
        if index == 0 and role == "system":
            system, tools = read_system(body)
        elif role == "assistant":
            message, pending = read_assistant(body, ids, index)
            answered = 0
            messages.append(message)
        elif role == "user" and body.startswith(_RESULT_OPEN) and body.endswith(_RESULT_CLOSE):
            for content in body[len(_RESULT_OPEN):-len(_RESULT_CLOSE)].split(_RESULT_CLOSE + "\n" + _RESULT_OPEN):
                call = pending[answered] if answered < len(pending) else None
                answered += 1
                result = ToolResult(call_id=call.id if call else None, name=call.name if call else None,
                                    content=(Text(content),) if content else ())
                messages.append(Message(role="tool", blocks=(result,)))
        else:
            messages.append(Message(role=role, blocks=(Text(body),) if body else ()))
    return Conversation(messages=tuple(messages), system=system, tools=tools,
                        meta=Meta(notes=(f"parsed back from {family}; results paired with calls by position",)))


def _system(body: str, default_system: str | None = DEFAULT_SYSTEM) -> tuple[tuple[Text, ...], tuple[Tool, ...]]:
    tools: list[Tool] = []
    at = body.find(TOOLS_HEADER)
    if at != -1 and body.endswith(TOOLS_FOOTER):
        listing = body[at + len(TOOLS_HEADER):len(body) - len(TOOLS_FOOTER)]
        for i, line in enumerate(listing.split("\n")[1:] if listing else ()):
            tools.append(_tool(line, i))
        body = body[:at]
    system = () if body == default_system else (Text(body),)
    return system, tuple(tools)


def _tool(line: str, i: int) -> Tool:
    try:
        spec = json.loads(line)
        function = spec["function"] if spec.get("type") == "function" and "function" in spec else spec
        kwargs = {"description": function["description"]} if "description" in function else {}
        if "parameters" in function:
            kwargs["parameters"] = function["parameters"]
        return Tool(name=function["name"], **kwargs)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise RenderError(f"tool definition is not a JSON function: {line[:60]!r}", path=f"$.tools[{i}]",
                          code="parse_back") from None


def _assistant(body: str, ids: CallIds, turn: int) -> tuple[Message, list[ToolCall]]:
    at = body.find("<tool_call>")
    if at == -1:
        return Message(role="assistant", blocks=(Text(body),) if body else ()), []
    if at > 0 and body[at - 1] != "\n":
        raise RenderError("a <tool_call> not on its own line", path=f"$.turn[{turn}]", code="parse_back")
    content = body[:at - 1] if at > 0 else ""
    calls: list[ToolCall] = []
    pieces = body[at:].split("</tool_call>")
    if pieces[-1] != "":
        raise RenderError(f"text after the tool calls: {pieces[-1][:60]!r}", path=f"$.turn[{turn}]", code="parse_back")
    for k, piece in enumerate(pieces[:-1]):
        if k > 0:
            if not piece.startswith("\n"):
                raise RenderError("tool calls must be separated by a newline", path=f"$.turn[{turn}].calls[{k}]",
                                  code="parse_back")
            piece = piece[1:]
        match = _CALL.fullmatch(piece + "</tool_call>")
        if match is None:
            raise RenderError(f"not a ChatML tool call: {piece[:80]!r}", path=f"$.turn[{turn}].calls[{k}]",
                              code="parse_back")
        name, raw = match.group(1), match.group(2)
        try:
            arguments = json.loads(raw)
        except ValueError:
            raise RenderError(f"tool-call arguments are not JSON: {raw[:60]!r}", path=f"$.turn[{turn}].calls[{k}]",
                              code="parse_back") from None
        calls.append(ToolCall(id=ids.new(name, arguments), name=name, arguments=arguments))
    blocks = ((Text(content),) if content else ()) + tuple(calls)
    return Message(role="assistant", blocks=blocks), calls


CARRIES = (("text beside calls", "kept, written before the calls"), ("parallel calls", "all, in one turn"),
           ("reasoning", "dropped (ledgered)"), ("call ids", "none: results answer calls by position"),
           ("tool results", "text"), ("system", "kept; Qwen's default prompt when there is none"),
           ("developer", "folded into the system message"), ("media", "dropped; text documents as text"))

FAMILY = Family(name="chatml", policy=POLICY, template_file="chatml.jinja", eot_tokens=("<|im_end|>",),
                required_tokens=("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"),
                parse_back=parse_back, default_tokenizer="qwen2.5", carries=CARRIES)
