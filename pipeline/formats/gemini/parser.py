"""Gemini -> canonical: request bodies (contents and roles, systemInstruction, tools, parameters), bare
`contents` lists and response objects (the first candidate); their parts are read in `reader`."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from ...conversation import Conversation, Media, Message, Meta, Reasoning, Text, ToolCall
from ...errors import ConfigError, ParseError, ShapeError
from ..base import SHAPES
from .detection import detect
from .parts import CAMEL, NAME, _bad, unset
from .reader import PartReader
from .tools import parse_tools

_ROLES = {"user": "user", "model": "assistant", "function": "tool", "tool": "tool"}
_ABSENT = object()


def parse(obj: Any, shape: str | None = None, strict: bool = False) -> Conversation:
    if shape is None:
        found = detect(obj)
        if found is None:
            raise ShapeError("not a Gemini request, contents list or response")
        shape = found.shape
    reader = PartReader(strict)
    match shape:
        case "request":
            conv = _parse_request(obj, reader)
        case "messages":
            if not isinstance(obj, list):
                raise _bad(obj, "a contents list must be an array", "$")
            conv = Conversation(messages=_contents(obj, "$", reader))
        case "response":
            conv = _parse_response(obj, reader)
        case _:
            raise ConfigError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", code="unknown_shape")
    notes = reader.notes
    if reader.by_order:
        notes = [f"{reader.by_order} tool result(s) paired with their call by name and order (no ids)", *notes]
    meta = replace(conv.meta, provider=NAME, shape=shape, notes=tuple(notes)) if notes else \
        replace(conv.meta, provider=NAME, shape=shape)
    return replace(conv, meta=meta)


def _parse_request(obj: Any, reader: PartReader) -> Conversation:
    if not isinstance(obj, dict):
        raise _bad(obj, "a request body must be an object", "$")
    contents = system = tools = _ABSENT
    extras: dict[str, Any] = {}
    form: dict[str, Any] = {}
    obj, nulls = unset(obj)
    if nulls:
        form["nulls"] = nulls
    for key, value in obj.items():
        name = CAMEL.get(key, key)
        if name == "contents":
            contents = value
        elif name == "systemInstruction":
            system = value
            if key != name:
                form["system_key"] = key
        elif name == "tools":
            tools = value
        else:
            extras[key] = value
    if contents is _ABSENT:
        raise ParseError("missing required field 'contents'", path="$")
    if not isinstance(contents, list):
        raise _bad(contents, "'contents' must be an array", "$.contents")
    messages = _contents(contents, "$.contents", reader)
    system_blocks: tuple = ()
    if system is not _ABSENT:
        key = form.get("system_key", "systemInstruction")
        system_blocks, layout = _parse_system(system, f"$.{key}", reader.strict)
        if layout is None:
            extras[key] = system  # not representable as instructions: kept whole
        else:
            form["system"] = layout
    tool_defs: tuple = ()
    if tools is not _ABSENT:
        tool_defs, form["tools"] = parse_tools(tools)
        if isinstance(tools, dict):
            form["tools_object"] = True
    model = extras.get("model")
    return Conversation(messages=messages, system=system_blocks, tools=tool_defs,
                        meta=Meta(model=model if isinstance(model, str) else None),
                        extras={NAME: extras} if extras else {}, form={NAME: form} if form else {})


def _contents(items: list, base: str, reader: PartReader) -> tuple[Message, ...]:
    return tuple(_content(item, f"{base}[{i}]", reader) for i, item in enumerate(items))


def _content(obj: Any, path: str, reader: PartReader, candidate: bool = False) -> Message:
    if not isinstance(obj, dict):
        raise _bad(obj, "a content must be an object", path)
    role: Any = _ABSENT
    parts: Any = _ABSENT
    extras = None
    obj, nulls = unset(obj)
    for key, value in obj.items():
        if key == "role":
            role = value
        elif key == "parts":
            parts = value
        else:
            extras = extras or {}
            extras[key] = value
    form: dict[str, Any] = {"nulls": nulls} if nulls else {}
    if role is _ABSENT:
        canonical = "assistant" if candidate else "user"
        form["no_role"] = True
    else:
        if not isinstance(role, str):
            raise _bad(role, "'role' must be a string", f"{path}.role")
        canonical = "assistant" if candidate else _ROLES.get(role)
        if canonical is None:
            raise ParseError(f"role must be 'user' or 'model', got '{role}'", path=f"{path}.role")
        if canonical == "tool" or (candidate and role != "model"):
            form["role"] = role
    if parts is _ABSENT:
        if not candidate:
            raise ParseError("missing required field 'parts'", path=path)
        form["no_parts"] = True
        blocks: tuple = ()
    elif not isinstance(parts, list):
        raise _bad(parts, "'parts' must be an array", f"{path}.parts")
    else:
        part = reader.part
        blocks = tuple(part(p, f"{path}.parts[{i}]") for i, p in enumerate(parts))
    if role is _ABSENT and any(isinstance(b, (ToolCall, Reasoning)) for b in blocks):
        canonical = "assistant"  # no role given, but only the model calls functions and thinks
    return Message(role=canonical, blocks=blocks, extras={NAME: extras} if extras else {},
                   form={NAME: form} if form else {})


def _parse_system(value: Any, path: str, strict: bool) -> tuple[tuple, dict | None]:
    """Instructions as Text/Media blocks and their layout; (), None when they hold anything else
    (the caller then keeps them whole in extras)."""
    if isinstance(value, str):
        return (Text(value),), {"string": True}
    if not isinstance(value, dict):
        raise _bad(value, "'systemInstruction' must be an object or a string", path)
    value, nulls = unset(value)
    layout: dict[str, Any] = {"nulls": nulls} if nulls else {}
    parts: Any = _ABSENT
    for key, item in value.items():
        if key == "parts":
            parts = item
        elif key == "role":
            layout["role"] = item
        else:
            return (), None
    if parts is _ABSENT:
        layout["no_parts"] = True
        return (), layout
    if not isinstance(parts, list):
        raise _bad(parts, "'parts' must be an array", f"{path}.parts")
    reader = PartReader(strict)  # its own: nothing in instructions pairs with the conversation's calls
    blocks = tuple(reader.part(p, f"{path}.parts[{i}]") for i, p in enumerate(parts))
    if not all(isinstance(b, (Text, Media)) for b in blocks):
        if strict:
            raise ParseError("systemInstruction holds a part that is neither text nor media", path=path,
                             code="unknown_block")
        return (), None
    return blocks, layout


def _parse_response(obj: Any, reader: PartReader) -> Conversation:
    if not isinstance(obj, dict):
        raise _bad(obj, "a response must be an object", "$")
    extras: dict[str, Any] = {}
    form: dict[str, Any] = {}
    snake: list[str] = []
    candidates: Any = _ABSENT
    meta: dict[str, Any] = {}
    obj, nulls = unset(obj)
    if nulls:
        form["nulls"] = nulls
    for key, value in obj.items():
        name = CAMEL.get(key, key)
        if name != key:
            snake.append(name)
        match name:
            case "candidates":
                candidates = value
            case "usageMetadata":
                meta["usage"] = value
            case "modelVersion" | "responseId" | "createTime" if isinstance(value, str):
                meta[{"modelVersion": "model", "responseId": "response_id", "createTime": "created"}[name]] = value
            case _:
                extras[key] = value
    if snake:
        form["snake"] = snake
    messages: tuple = ()
    if candidates is _ABSENT:
        form["no_candidates"] = True
    elif not isinstance(candidates, list):
        raise _bad(candidates, "'candidates' must be an array", "$.candidates")
    elif candidates:
        message, stop = _candidate(candidates[0], "$.candidates[0]", reader)
        messages = (message,)
        if stop is not None:
            meta["stop_reason"] = stop
        if len(candidates) > 1:
            extras["candidates"] = candidates[1:]  # only the first becomes the assistant turn
            reader.notes.append(f"$.candidates: {len(candidates)} candidates (candidateCount); the first is "
                                "the assistant turn")
    if not messages:
        feedback = extras.get("promptFeedback", extras.get("prompt_feedback"))
        reason = feedback.get("blockReason", feedback.get("block_reason")) if isinstance(feedback, dict) else None
        if reason is not None:  # said where the record lands, since an exchange keeps no response field
            reader.notes.append(f"$.promptFeedback: the prompt was blocked ({reason}): the response holds no turn")
    return Conversation(messages=messages, meta=Meta(**meta), extras={NAME: extras} if extras else {},
                        form={NAME: form} if form else {})


def _candidate(obj: Any, path: str, reader: PartReader) -> tuple[Message, str | None]:
    if not isinstance(obj, dict):
        raise _bad(obj, "a candidate must be an object", path)
    content: Any = _ABSENT
    stop = None
    extras: dict[str, Any] = {}
    snake = []
    obj, nulls = unset(obj)
    for key, value in obj.items():
        name = CAMEL.get(key, key)
        if name == "content":
            content = value
        elif name == "finishReason" and isinstance(value, str):
            stop = value
            if name != key:
                snake.append(name)
        else:
            extras[key] = value
    if content is _ABSENT:
        # e.g. MALFORMED_FUNCTION_CALL: the model produced nothing usable; an empty assistant turn.
        message = Message(role="assistant", form={NAME: {"no_content": True}})
    else:
        message = _content(content, f"{path}.content", reader, candidate=True)
    if extras or snake or nulls:
        form = dict(message.form.get(NAME) or {})
        if snake:
            form["snake"] = snake
        if nulls:
            form["candidate_nulls"] = nulls
        if extras:
            # Candidate fields share the message's extras with the content's own unknown keys; which
            # are which decides where they are written back (and that a request has no place for them).
            form["candidate"] = list(extras)
        message = replace(message, extras={NAME: {**(message.extras.get(NAME) or {}), **extras}} if extras else
                          message.extras, form={NAME: form})
    return message, stop
