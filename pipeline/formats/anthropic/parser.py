"""Anthropic -> canonical: request bodies (system, tools, request parameters), bare message lists and
response objects; their blocks and messages are read in `reader`."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ...conversation import Conversation, Message, Meta, Text, Tool
from ...errors import ParseError, ShapeError
from ..base import RESPONSE_FIELD, SHAPES, expect, require
from .blocks import CLIENT_TOOL, NAME
from .detection import detect
from .reader import BlockReader, read_message

_TOOL_KEYS = frozenset({"name", "description", "input_schema"})
_REQUEST_KEYS = frozenset({"messages", "system", "tools"})
# A response object's fields with a canonical home (in Meta); the rest stays on the message.
_RESPONSE_META = ("id", "model", "stop_reason", "usage")
_RESPONSE_KEYS = frozenset({"type", "role", "content"})


def parse(obj: Any, shape: str | None = None, strict: bool = False) -> Conversation:
    if shape is None:
        found = detect(obj)
        if found is None:
            raise ShapeError("not an anthropic request body, message list or response object")
        shape = found.shape
    reader = BlockReader(strict)
    match shape:
        case "request":
            return _parse_request(obj, reader)
        case "messages":
            expect(obj, list, "$", "a message list")
            messages = tuple(read_message(m, f"$[{i}]", reader) for i, m in enumerate(obj))
            return Conversation(messages=messages, meta=Meta(provider=NAME, shape="messages"))
        case "response":
            return _parse_response(obj, reader)
        case _:
            raise ShapeError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}")


def _parse_request(obj: Any, reader: BlockReader) -> Conversation:
    expect(obj, dict, "$", "a request body")
    raw_messages = require(obj, "messages", list, "$")
    form: dict[str, str] = {}
    system: tuple = ()
    if "system" in obj:
        raw_system = obj["system"]
        if isinstance(raw_system, str):
            system = (Text(raw_system),)
            form["system"] = "str"
        else:
            expect(raw_system, list, "$.system", "'system'")
            system = tuple(_system_block(b, f"$.system[{i}]", reader) for i, b in enumerate(raw_system))
            if not system:
                form["system"] = "list"
    tools: tuple = ()
    if "tools" in obj:
        raw_tools = expect(obj["tools"], list, "$.tools", "'tools'")
        tools = tuple(_tool(t, f"$.tools[{i}]") for i, t in enumerate(raw_tools))
        if not tools:
            form["tools"] = "list"
    messages = tuple(read_message(m, f"$.messages[{i}]", reader) for i, m in enumerate(raw_messages))
    params = {k: v for k, v in obj.items() if k not in _REQUEST_KEYS}
    model = params.get("model")
    return Conversation(messages=messages, system=system, tools=tools,
                        meta=Meta(provider=NAME, shape="request", model=model if isinstance(model, str) else None),
                        extras={NAME: params} if params else {}, form={NAME: form} if form else {})


def _system_block(b: Any, path: str, reader: BlockReader) -> Text:
    expect(b, dict, path, "system block")
    btype = require(b, "type", str, path)
    if btype != "text":
        raise ParseError(f"system blocks must be of type 'text', got '{btype}'", path=f"{path}.type")
    return reader.text(b, path)


def _tool(t: Any, path: str) -> Tool:
    expect(t, dict, path, "tool")
    ttype = t.get("type")
    if ttype is None or ttype == "custom" or "input_schema" in t:
        name = require(t, "name", str, path)
        parameters = require(t, "input_schema", dict, path)
        description = t.get("description")
        if description is not None:
            expect(description, str, f"{path}.description", "'description'")
        rest = {k: v for k, v in t.items() if k not in _TOOL_KEYS}
        form = {"description": "null"} if "description" in t and description is None else {}
        return Tool(name=name, description=description, parameters=parameters,
                    extras={NAME: rest} if rest else {}, form={NAME: form} if form else {})
    expect(ttype, str, f"{path}.type", "'type'")
    if CLIENT_TOOL.fullmatch(ttype):
        # Anthropic-defined but run by the client (bash, text editor, computer, memory): the model calls it
        # with tool_use and the client answers with tool_result, as for any function tool; its schema is
        # built into the API, so the log has none.
        return Tool(name=require(t, "name", str, path), extras={NAME: {k: v for k, v in t.items() if k != "name"}},
                    form={NAME: {"input_schema": "builtin"}})
    # Hosted (server) tool: its type names it; everything but the name is configuration.
    name = t.get("name")
    if name is not None:
        expect(name, str, f"{path}.name", "'name'")
    return Tool(name=name if name is not None else ttype, kind="hosted",
                extras={NAME: {k: v for k, v in t.items() if k != "name"}},
                form={} if name is not None else {NAME: {"name": "absent"}})


def _parse_response(obj: Any, reader: BlockReader) -> Conversation:
    expect(obj, dict, "$", "a response object")
    if obj.get("type") != "message":
        raise ParseError("a response object has type 'message'", path="$.type")
    if obj.get("role") != "assistant":
        raise ParseError("a response message has role 'assistant'", path="$.role")
    content = require(obj, "content", list, "$")
    blocks = tuple(reader.block(b, f"$.content[{i}]") for i, b in enumerate(content))
    meta: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in obj.items():
        if key in _RESPONSE_KEYS:
            continue
        if (key == "usage" and isinstance(value, dict)) or (key in _RESPONSE_META and isinstance(value, str)):
            meta[key] = value
        else:  # null stop_reason, stop_sequence, container, context_management...
            rest[RESPONSE_FIELD + key] = value
    form = {} if "stop_sequence" in obj else {NAME: {"stop_sequence": "absent"}}
    message = Message(role="assistant", blocks=blocks, extras={NAME: rest} if rest else {}, form=form)
    return Conversation(messages=(message,), meta=Meta(
        provider=NAME, shape="response", model=meta.get("model"), response_id=meta.get("id"),
        stop_reason=meta.get("stop_reason"), usage=meta.get("usage", UNSET)))
