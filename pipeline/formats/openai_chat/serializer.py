"""Canonical conversations -> OpenAI Chat Completions request bodies, message lists and
`chat.completion` response objects (the messages themselves are written by `writer.Writer`)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

import msgspec
from msgspec import UNSET

from ...conversation import Conversation
from ...errors import ConversionError
from ...ledger import Ledger
from ..base import SHAPES, ledger_foreign_extras
from ..openai_siblings import adopt
from .blocks import NAME
from ..shared_params import foreign_model_reason, same_vendor
from .params import map_foreign_params
from .tools import write_tool
from .writer import Writer

DEFAULT_MODEL = "gpt-4o"  # written, with a ledger entry, when a conversation names no model

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
           "pause_turn": "stop", "refusal": "content_filter", "STOP": "stop", "MAX_TOKENS": "length",
           "SAFETY": "content_filter", "RECITATION": "content_filter", "completed": "stop",
           "incomplete": "length", "stop": "stop", "length": "length", "tool_calls": "tool_calls",
           "content_filter": "content_filter", "function_call": "function_call"}


def serialize(conv: Conversation, shape: str = "request", ledger: Ledger | None = None) -> Any:
    if ledger is None:
        ledger = Ledger(NAME)
    if shape not in SHAPES:
        raise ConversionError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", code="unknown_shape")
    conv = adopt(conv, NAME)
    mapped: dict[str, Any] = {}
    walk = conv
    if shape == "request" and any(p != NAME for p in conv.extras):
        mapped, used, leftovers = map_foreign_params(conv.extras, ledger)
        if used:
            kept = {p: {k: v for k, v in values.items() if k not in used.get(p, ())} | leftovers.get(p, {})
                    for p, values in conv.extras.items()}
            walk = msgspec.structs.replace(conv, extras={p: v for p, v in kept.items() if v})
    ledger_foreign_extras(walk, NAME, ledger)
    writer = Writer(conv, ledger, shape)
    if shape == "response":
        return _write_response(conv, writer, ledger)
    messages = writer.messages()
    own = conv.extras.get(NAME) or {}
    if shape == "messages":
        for key in own:
            ledger.add("dropped", "$", f"request parameter '{key}' has no place in a bare message list")
        for ti in range(len(conv.tools)):
            ledger.add("dropped", f"$.tools[{ti}]", "tool definitions have no place in a bare message list")
        return messages
    body: dict[str, Any] = {}
    for key, value in own.items():
        if key[0] == "$":
            ledger.add("dropped", "$", f"response field '{key[1:]}' has no place in a request body")
        else:
            body[key] = value
    if "model" not in body:
        if conv.meta.model is not None and same_vendor(conv.meta.provider, NAME):
            body["model"] = conv.meta.model
        elif conv.meta.model is not None:  # another vendor's model: only its own API serves it
            ledger.add("dropped", "$.meta.model", foreign_model_reason(conv.meta.model, conv.meta.provider, NAME))
            body["model"] = DEFAULT_MODEL
            ledger.add("synthesized", "$.meta.model", f"no OpenAI model known; Chat requires one: wrote {DEFAULT_MODEL}")
        elif conv.meta.provider != NAME or conv.meta.shape != "request":
            body["model"] = DEFAULT_MODEL
            ledger.add("synthesized", "$.meta.model", f"no model known; Chat requires one: wrote {DEFAULT_MODEL}")
    body["messages"] = messages
    form = conv.form.get(NAME) or {}
    tools: list = []
    functions: list = []
    for ti, tool in enumerate(conv.tools):
        written, legacy = write_tool(tool, f"$.tools[{ti}]", ledger)
        if written is not None:
            (functions if legacy else tools).append(written)
    for key, values in (("tools", tools), ("functions", functions)):
        if values or key in form.get("empty", ()):
            body[key] = values
        elif key in form.get("null", ()):
            body[key] = None
    named = {t[kind]["name"] for t in tools for kind in ("function", "custom")
             if t.get("type", "function") == kind and isinstance(t.get(kind), dict)}
    _put_mapped(body, mapped, named, ledger)
    return body


def _put_mapped(body: dict, mapped: dict, functions: set[str], ledger: Ledger) -> None:
    """Add the parameters mapped from another format, except tool settings that would name no tool:
    Chat refuses tool_choice and parallel_tool_calls without tools. `functions`: the function and custom
    tools' names."""
    for key, value in mapped.items():
        if key in body:
            continue
        if key in ("tool_choice", "parallel_tool_calls"):
            target = (value.get("function") or value.get("custom")) if isinstance(value, dict) else None
            named = target.get("name") if isinstance(target, dict) else None
            if not functions or (named is not None and named not in functions):
                ledger.add("dropped", "$", f"{key} {json.dumps(value)} names no function tool left in the Chat body")
                continue
        body[key] = value


def _write_response(conv: Conversation, writer: Writer, ledger: Ledger) -> dict:
    own = conv.extras.get(NAME) or {}
    last = None
    for mi in range(len(conv.messages) - 1, -1, -1):
        if conv.messages[mi].role == "assistant":
            last = mi
            break
    for mi in range(len(conv.messages)):
        if mi != last:
            ledger.add("dropped", f"$.messages[{mi}]", "a response object holds only the last assistant turn")
    for name, values in (("system", conv.system), ("developer", conv.developer), ("tools", conv.tools)):
        for i in range(len(values)):
            ledger.add("dropped", f"$.{name}[{i}]", "a response object holds only the last assistant turn")
    for key in own:
        if key[0] != "$":
            ledger.add("dropped", "$", f"request parameter '{key}' has no place in a response object")
    response = dict(own.get("$response") or {})
    if last is None:
        if "$choice" in own or not conv.messages and "$response" in own:
            response["choices"] = []
            return response
        raise ConversionError("no assistant message to write as a response", path="$.messages", code="no_assistant")
    writer.emit_assistant(last, conv.messages[last])
    message = writer.out[0]
    for extra in writer.out[1:]:
        ledger.add("dropped", f"$.messages[{last}]", f"a {extra['role']} message cannot be part of a response object")
    meta = conv.meta
    if "$response" not in own:
        response["id"] = meta.response_id or _synthetic_id(conv, last, ledger)
        response["object"] = "chat.completion"
        response["created"] = _created(meta.created, ledger)
        response["model"] = meta.model or ""
        usage = _usage(meta.usage, ledger)
        if usage is not None:
            response["usage"] = usage
    choice = dict(own["$choice"]) if "$choice" in own else {
        "index": 0, "finish_reason": _finish(meta.stop_reason, message, ledger), "logprobs": None}
    choice["message"] = message
    response["choices"] = [choice, *own.get("$more_choices", ())]
    return response


def _synthetic_id(conv: Conversation, last: int, ledger: Ledger) -> str:
    ledger.add("synthesized", "$.meta.response_id", "no response id: wrote one derived from the message")
    digest = hashlib.blake2b(msgspec.json.encode(conv.messages[last]), digest_size=12).hexdigest()
    return f"chatcmpl-{digest}"


def _created(created: str | None, ledger: Ledger) -> int:
    if created is not None:
        try:
            return int(datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp())
        except ValueError:
            if created.isdigit():
                return int(created)
    ledger.add("synthesized", "$.meta.created", "no creation time: wrote 0")
    return 0


def _usage(usage: Any, ledger: Ledger) -> dict | None:
    if usage is UNSET or usage is None:
        return None
    if type(usage) is dict:
        if "prompt_tokens" in usage:
            return usage
        for prompt, completion in (("input_tokens", "output_tokens"), ("promptTokenCount", "candidatesTokenCount"),
                                   ("prompt_token_count", "candidates_token_count")):
            p, c = usage.get(prompt), usage.get(completion)
            if type(p) is int and type(c) is int:
                if len(usage) > 2:
                    ledger.add("dropped", "$.meta.usage", "usage counters other than prompt and completion tokens")
                return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    ledger.add("dropped", "$.meta.usage", "usage in a shape Chat Completions cannot express")
    return None


def _finish(reason: str | None, message: dict, ledger: Ledger) -> str:
    if reason is None:
        return "tool_calls" if message.get("tool_calls") else "stop"
    mapped = _FINISH.get(reason)
    if mapped is None:
        ledger.add("folded", "$.meta.stop_reason", f"stop reason '{reason}' has no Chat equivalent: wrote 'stop'")
        return "stop"
    return mapped
