"""Llama 3.x parse-back: the stream's tokens and headers, and the parser from a rendered token stream back to
a canonical Conversation (the format is described in `llama3`)."""

from __future__ import annotations

import json
import re
from typing import Any

from ..conversation import Conversation, Message, Meta, Text, Tool, ToolCall, ToolResult
from ..errors import RenderError
from ..ids import CallIds

BOS, EOT = "<|begin_of_text|>", "<|eot_id|>"
HEADER_START, HEADER_END = "<|start_header_id|>", "<|end_header_id|>\n\n"
_PREAMBLE = re.compile(r"(Environment: ipython\n)?Cutting Knowledge Date: December 2023\nToday Date: ([^\n]*)\n\n")
CALL_FORMAT = ('Respond in the format {"name": function name, "parameters": dictionary of argument name and its '
               'value}.Do not use variables.\n\n')
USER_TOOLS_HEADER = ("Given the following functions, please respond with a JSON for a function call with its proper "
                     "arguments that best answers the given prompt.\n\n" + CALL_FORMAT)
SYSTEM_TOOLS_HEADER = ("You have access to the following functions. To call a function, please respond with JSON for "
                       "a function call." + CALL_FORMAT)
_CALL = re.compile(r'\{"name": "([^"\\\x00-\x1f]*)", "parameters": (.*)\}', re.DOTALL)


def _parse_call(body: str) -> tuple[str, Any] | None:
    match = _CALL.fullmatch(body)
    if match is None:
        return None
    try:
        arguments = json.loads(match.group(2))
    except ValueError:
        return None
    return (match.group(1), arguments) if isinstance(arguments, dict) else None


def _tools(body: str, at: str) -> tuple[tuple[Tool, ...], str]:
    """The tool definitions at the start of `body` (each `tojson(indent=4)` and a blank line), and the rest."""
    tools: list[Tool] = []
    decoder = json.JSONDecoder()
    while body.startswith("{"):
        try:
            spec, end = decoder.raw_decode(body)
        except ValueError:
            break
        if body[end:end + 2] != "\n\n" or json.dumps(spec, indent=4, ensure_ascii=False) != body[:end]:
            break
        function = spec.get("function") if isinstance(spec, dict) and spec.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RenderError(f"tool definition is not a JSON function: {body[:60]!r}", path=f"{at}.tools[{len(tools)}]",
                              code="parse_back")
        kwargs = {"description": function["description"]} if "description" in function else {}
        if "parameters" in function:
            kwargs["parameters"] = function["parameters"]
        tools.append(Tool(name=function["name"], **kwargs))
        body = body[end + 2:]
    return tuple(tools), body


def parse_back(text: str) -> Conversation:
    """The conversation a Llama 3.x token stream holds. Raises RenderError on text the template cannot produce."""
    if not text.startswith(BOS + HEADER_START):
        raise RenderError(f"not a Llama 3 stream (it opens with {text[:40]!r})", path="$", code="parse_back")
    turns = text[len(BOS) + len(HEADER_START):].split(HEADER_START)
    system: tuple[Text, ...] = ()
    tools: tuple[Tool, ...] = ()
    messages: list[Message] = []
    ids = CallIds()
    pending: ToolCall | None = None  # the call of the latest assistant turn
    answered = 0
    tools_in_user = False
    for index, turn in enumerate(turns):
        at = f"$.turn[{index}]"
        role, sep, rest = turn.partition(HEADER_END)
        if role not in ("system", "user", "assistant", "ipython") or not sep:
            raise RenderError(f"not a Llama 3 turn header: {turn[:40]!r}", path=at, code="parse_back")
        if not rest.endswith(EOT) or EOT in rest[:-len(EOT)]:
            if role == "assistant" and not rest and index == len(turns) - 1 and index > 0:
                break  # a generation prompt
            raise RenderError("a turn must end with one <|eot_id|>", path=at, code="parse_back")
        body = rest[:-len(EOT)]
        if index == 0:
            if role != "system" or (preamble := _PREAMBLE.match(body)) is None:
                raise RenderError("the first turn must be the system turn with the dated preamble", path=at,
                                  code="parse_back")
            body = body[preamble.end():]
            if preamble.group(1):  # tools are defined
                if body.startswith(SYSTEM_TOOLS_HEADER):
                    tools, body = _tools(body[len(SYSTEM_TOOLS_HEADER):], at)
                else:
                    tools_in_user = True
            system = (Text(body),) if body else ()
            continue
        if tools_in_user:
            if role != "user" or not body.startswith(USER_TOOLS_HEADER):
                raise RenderError("the tool list must open the first user turn", path=at, code="parse_back")
            tools, body = _tools(body[len(USER_TOOLS_HEADER):], at)
            tools_in_user = False
        if role == "assistant":
            call = _parse_call(body)
            if call is not None:
                pending = ToolCall(id=ids.new(call[0], call[1]), name=call[0], arguments=call[1])
                messages.append(Message(role="assistant", blocks=(pending,)))
            else:
                pending = None
                messages.append(Message(role="assistant", blocks=(Text(body),) if body else ()))
            answered = 0
        elif role == "ipython":
            try:
                value = json.loads(body)
            except ValueError:
                raise RenderError(f"a tool result that is not JSON: {body[:60]!r}", path=at, code="parse_back") from None
            call = pending if answered == 0 else None
            answered += 1
            result = ToolResult(call_id=call.id if call else None, name=call.name if call else None,
                                **({"content": (Text(value),) if value else ()} if isinstance(value, str)
                                   else {"output": value}))
            messages.append(Message(role="tool", blocks=(result,)))
        else:
            messages.append(Message(role=role, blocks=(Text(body),) if body else ()))
    if tools_in_user:
        raise RenderError("tools are announced but no user turn lists them", path="$", code="parse_back")
    return Conversation(messages=tuple(messages), system=system, tools=tools,
                        meta=Meta(notes=("parsed back from llama3; a result answers the call of the turn before it",)))
