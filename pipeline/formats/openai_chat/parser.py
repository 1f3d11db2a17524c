"""OpenAI Chat Completions -> canonical Conversation: request bodies, bare message lists and
`chat.completion` responses (the messages themselves are read by `messages.Parser`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec
from msgspec import UNSET

from ...conversation import Conversation, Meta, Text, Tool
from ...errors import ShapeError
from ..base import SHAPES
from . import blocks
from .blocks import NAME, item_paths, missing, req_dict, rest, wrong
from .detection import detect
from .messages import Parser
from .tools import parse_tool

def parse(obj: Any, shape: str | None = None, strict: bool = False) -> Conversation:
    if shape is None:
        found = detect(obj)
        if found is None:
            raise ShapeError("not an OpenAI Chat Completions request, message list or response", path="$")
        shape = found.shape
    if shape == "request":
        return _parse_request(obj, strict)
    if shape == "messages":
        if type(obj) is not list:
            raise wrong("$", "a message list", "an array", obj)
        return _parse_messages(obj, "$", strict, {}, Meta(provider=NAME, shape="messages"))
    if shape == "response":
        return _parse_response(obj, strict)
    raise ShapeError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", path="$")


_REQUEST_KEYS = frozenset(("messages", "tools", "functions"))


def _parse_request(obj: Any, strict: bool) -> Conversation:
    if type(obj) is not dict:
        raise wrong("$", "a request body", "an object", obj)
    messages = obj.get("messages", UNSET)
    if messages is UNSET:
        raise missing("$", "messages")
    if type(messages) is not list:
        raise wrong("$.messages", "'messages'", "an array", messages)
    tools: list[Tool] = []
    form: dict[str, Any] = {}
    for key, legacy in (("tools", False), ("functions", True)):
        value = obj.get(key, UNSET)
        if value is UNSET:
            continue
        if value is None:
            form.setdefault("null", []).append(key)
        elif type(value) is list:
            paths = item_paths(f"$.{key}", len(value))
            tools += [parse_tool(t, paths[i], legacy) for i, t in enumerate(value)]
            if not value:
                form.setdefault("empty", []).append(key)
        else:
            raise wrong(f"$.{key}", f"'{key}'", "an array", value)
    params = rest(obj, _REQUEST_KEYS)
    model = params.get("model")
    meta = Meta(provider=NAME, shape="request", model=model if type(model) is str else None)
    return _parse_messages(messages, "$.messages", strict, form, meta, params, tuple(tools))


def _parse_messages(messages: list, base: str, strict: bool, form: dict, meta: Meta,
                    params: dict | None = None, tools: tuple = ()) -> Conversation:
    parser = Parser(strict)
    system: list = []
    developer: list = []
    lead: list = []
    start = 0
    paths = item_paths(base, len(messages))
    # Leading plain instruction messages become conv.system / conv.developer; one with a name or
    # unknown keys stays a message, and so does everything after it.
    for m in messages:
        if type(m) is not dict or (m.get("role") != "system" and m.get("role") != "developer") \
                or not m.keys() <= {"role", "content"}:
            break
        found, mode = parser.required_content(m, m["role"], paths[start])
        if any(type(b) is not Text for b in found):
            break
        (system if m["role"] == "system" else developer).extend(found)
        lead.append([m["role"], len(found), mode])
        start += 1
    if lead != blocks.default_lead(tuple(system), tuple(developer)):
        form["lead"] = lead
    out = [parser.message(m, paths[i]) for i, m in enumerate(messages[start:], start)]
    if parser.notes:
        meta = msgspec.structs.replace(meta, notes=tuple(parser.notes))
    return Conversation(messages=tuple(out), system=tuple(system), developer=tuple(developer), tools=tools,
                        meta=meta, extras={NAME: params} if params else {}, form={NAME: form} if form else {})


def _parse_response(obj: Any, strict: bool) -> Conversation:
    if type(obj) is not dict:
        raise wrong("$", "a response", "an object", obj)
    choices = obj.get("choices", UNSET)
    if choices is UNSET:
        raise missing("$", "choices")
    if type(choices) is not list:
        raise wrong("$.choices", "'choices'", "an array", choices)
    response = rest(obj, frozenset(("choices",)))
    extras: dict[str, Any] = {"$response": response}
    messages: tuple = ()
    stop_reason = None
    notes: tuple = ()
    if choices:
        choice = choices[0]
        if type(choice) is not dict:
            raise wrong("$.choices[0]", "a choice", "an object", choice)
        message = req_dict(choice, "message", "$.choices[0]")
        parser = Parser(strict)
        messages = (parser.assistant(message, "$.choices[0].message"),)
        notes = tuple(parser.notes)
        extras["$choice"] = rest(choice, frozenset(("message",)))
        reason = choice.get("finish_reason")
        stop_reason = reason if type(reason) is str else None
        if len(choices) > 1:
            extras["$more_choices"] = list(choices[1:])
            notes += (f"{len(choices) - 1} more choice(s) (n > 1) kept in extras, not in the conversation: "
                      "it holds choices[0]",)
    model, rid, usage = obj.get("model"), obj.get("id"), obj.get("usage", UNSET)
    meta = Meta(provider=NAME, shape="response", model=model if type(model) is str else None,
                response_id=rid if type(rid) is str else None, created=_iso(obj.get("created")),
                stop_reason=stop_reason, usage=usage if usage is not None else UNSET, notes=notes)
    return Conversation(messages=messages, meta=meta, extras={NAME: extras})


def _iso(created: Any) -> str | None:
    if type(created) is not int:
        return None
    try:
        return datetime.fromtimestamp(created, timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None
