"""The older GenAI event form (semantic conventions up to v1.36, docs/gen-ai/gen-ai-events.md): one span
event per message, its fields as event attributes (or as a JSON body string): `gen_ai.system.message`
and `gen_ai.user.message` (`content`), `gen_ai.assistant.message` (`content`, `tool_calls` as
`[{"id", "type": "function", "function": {"name", "arguments"}}]`), `gen_ai.tool.message` (`content`,
`id`), `gen_ai.choice` (`index`, `finish_reason`, `message`: `{"role", "content", "tool_calls"}`)."""

from __future__ import annotations

from typing import Any

import orjson

from ... import jsonpolicy
from ...conversation import Message, Opaque, Text
from ...errors import ParseError
from ..blocks import Calls
from .otlp import SpanRecord

EVENT_NAMES = frozenset({"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message",
                         "gen_ai.tool.message", "gen_ai.choice"})
_ROLE = {"gen_ai.system.message": "system", "gen_ai.user.message": "user", "gen_ai.assistant.message": "assistant",
         "gen_ai.tool.message": "tool"}


def messages_from_events(record: SpanRecord, calls: Calls) -> tuple[tuple, list[Message]]:
    system: list = []
    messages: list[Message] = []
    choices = 0
    for i, (name, attrs) in enumerate(record.events):
        if name not in EVENT_NAMES:
            continue
        path = record.event_paths[i] if record.event_paths else f"{record.path}.events[{i}].attributes"
        fields = _fields(attrs, path)
        if name == "gen_ai.choice":
            choices += 1
            if choices > 1:
                continue  # n > 1: the first choice is the assistant turn
            fields = _decoded(fields.get("message"), f"{path}.message") or {}
            if not isinstance(fields, dict):
                raise ParseError("a gen_ai.choice 'message' must be an object", path=f"{path}.message")
            role = "assistant"
        else:
            role = _ROLE[name]
        blocks = _content(fields.get("content"), f"{path}.content")
        if role == "system" and not messages:
            system.extend(blocks)
            continue
        if role == "assistant":
            blocks += _tool_calls(_decoded(fields.get("tool_calls"), f"{path}.tool_calls"), calls, f"{path}.tool_calls")
        elif role == "tool":
            call_id = fields.get("id") if isinstance(fields.get("id"), str) else None
            blocks = [calls.result(call_id, blocks)]
        messages.append(Message(role, tuple(blocks)))  # type: ignore[arg-type]
    return tuple(b for b in system if isinstance(b, Text)), messages


def _fields(attrs: dict, path: str) -> dict:
    """An event's fields: its attributes, or the JSON object some exporters put in a `body` attribute."""
    body = attrs.get("body") if "content" not in attrs and "message" not in attrs else None
    decoded = _decoded(body, f"{path}.body") if body is not None else None
    return decoded if isinstance(decoded, dict) else attrs


def _decoded(value: Any, path: str) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return jsonpolicy.loads(value)
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"event field is not valid JSON: {exc}", path=path, code="invalid_attribute_json") from None
    return value


def _content(value: Any, path: str) -> list:
    value = _decoded(value, path)
    if value is None:
        return []
    if isinstance(value, str):
        return [Text(value)] if value else []
    if isinstance(value, list):
        out: list = []
        for item in value:
            if isinstance(item, str):
                out.append(Text(item))
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                out.append(Text(item["text"]))
            else:  # provider content the convention does not model (images, tool blocks): kept as it was
                out.append(Opaque("otel-genai", str(item.get("type") if isinstance(item, dict) else "content"), item))
        return out
    raise ParseError("message content must be a string or an array", path=path)


def _tool_calls(value: Any, calls: Calls, path: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ParseError("tool_calls must be an array", path=path)
    out = []
    for j, item in enumerate(value):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ParseError("a tool call needs 'function.name'", path=f"{path}[{j}]")
        out.append(calls.call(function["name"], function.get("arguments"),
                              item.get("id") if isinstance(item.get("id"), str) else None))
    return out
