"""A strict checker for OpenAI Responses request bodies, for tests.

`check_request(body)` returns violations as "JSON path: reason" strings (empty: accepted). It walks the
body against the official openai SDK's request TypedDicts (ResponseCreateParams, or the compact /
input-token-count params) strictly: unknown keys, wrong types and missing required keys at every depth,
choosing among union members by their `type` literal. Then it checks what the types cannot express:
every function/custom call answered by its output later in `input`, outputs naming an earlier call
(unless the history lives server-side), call ids unique and at most 64 characters, arguments a JSON
object in a string, assistant messages holding only output_text/refusal, item id prefixes (an id from
another provider is refused), reasoning items followed by the item they belong to, files and images
with a source, tool names and tool_choice naming a defined tool, sampling parameters in range.
"""

from __future__ import annotations

import collections.abc
import functools
import json
import re
import types
import typing
from typing import Any, Literal, Union

import typing_extensions
from openai.types.responses.input_token_count_params import InputTokenCountParams
from openai.types.responses.response_compact_params import ResponseCompactParams
from openai.types.responses.response_create_params import (ResponseCreateParamsNonStreaming,
                                                           ResponseCreateParamsStreaming)

MAX_CALL_ID = 64
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
# Prefixes OpenAI gives the ids of items it generated; an item id is only valid if OpenAI issued it.
ID_PREFIX = {"reasoning": "rs_", "function_call": "fc_", "message": "msg_"}
CALL_OUTPUT = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
ENDPOINTS = {"compact": ResponseCompactParams, "input_tokens": InputTokenCountParams}
# An item's `status` is output-only ("populated when items are returned via API"): the API took a null
# one on a replayed function_call (a corpus 200) though the SDK type lists only the three states.
NULL_OK = frozenset({"status"})


def check_request(body: Any, *, endpoint: str = "create") -> list[str]:
    """Violations of the Responses request rules in `body`: a POST /v1/responses body, or with
    `endpoint` "compact" / "input_tokens" a /v1/responses/compact or /input_tokens body."""
    if not isinstance(body, dict):
        return ["$: a request body must be an object"]
    errors: list[str] = []
    if endpoint in ENDPOINTS:
        schema = ENDPOINTS[endpoint]
    else:
        schema = ResponseCreateParamsStreaming if body.get("stream") is True else ResponseCreateParamsNonStreaming
    _check(body, schema, "$", errors)
    if not errors:  # the structural rules assume the types hold
        _structure(body, errors)
    return errors


# --- the type walk -----------------------------------------------------------------------------------

_LISTS = (list, collections.abc.Iterable, collections.abc.Sequence, typing.List)
_MAPS = (dict, collections.abc.Mapping, typing.Dict)


@functools.cache
def _fields(td: type) -> tuple[dict[str, Any], frozenset[str]]:
    hints = typing_extensions.get_type_hints(td, include_extras=True)
    required = set()
    out = {}
    for key, hint in hints.items():
        origin = typing_extensions.get_origin(hint)
        if origin is typing_extensions.Required or (key in td.__required_keys__
                                                    and origin is not typing_extensions.NotRequired):
            required.add(key)
        if origin in (typing_extensions.Required, typing_extensions.NotRequired):
            hint = typing_extensions.get_args(hint)[0]
        out[key] = hint
    return out, frozenset(required)


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing_extensions.is_typeddict(tp)


def _type_literals(td: type) -> tuple[frozenset | None, bool]:
    """The literal values allowed for a TypedDict's `type` key, and whether the key is required."""
    fields, required = _fields(td)
    hint = fields.get("type")
    if hint is None:
        return None, False
    values: set = set()
    for member in _union_members(hint):
        if typing_extensions.get_origin(member) is Literal:
            values.update(typing_extensions.get_args(member))
        elif member is not type(None):
            return None, "type" in required  # a free-form type: matches anything
    return frozenset(values), "type" in required


def _union_members(tp: Any) -> tuple:
    origin = typing_extensions.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        out: list = []
        for arg in typing_extensions.get_args(tp):
            out.extend(_union_members(arg))
        return tuple(out)
    return (tp,)


def _describe(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _check(value: Any, tp: Any, path: str, errors: list[str]) -> None:
    if tp is Any or tp is object:
        return
    origin = typing_extensions.get_origin(tp)
    if origin is typing_extensions.Annotated:
        return _check(value, typing_extensions.get_args(tp)[0], path, errors)
    if origin is Union or origin is types.UnionType:
        return _check_union(value, _union_members(tp), path, errors)
    if origin is Literal:
        allowed = typing_extensions.get_args(tp)
        if not any(value == a and type(value) is type(a) for a in allowed):
            errors.append(f"{path}: {value!r} is not one of {', '.join(repr(a) for a in allowed)}")
        return
    if _is_typeddict(tp):
        return _check_typeddict(value, tp, path, errors)
    if origin is not None and (origin in _LISTS or getattr(origin, "__name__", "") == "SequenceNotStr"):
        if not isinstance(value, list):
            errors.append(f"{path}: must be an array, got {_describe(value)}")
            return
        (item_tp,) = typing_extensions.get_args(tp) or (Any,)
        for i, item in enumerate(value):
            _check(item, item_tp, f"{path}[{i}]", errors)
        return
    if origin is not None and origin in _MAPS:
        if not isinstance(value, dict):
            errors.append(f"{path}: must be an object, got {_describe(value)}")
            return
        args = typing_extensions.get_args(tp)
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(f"{path}: keys must be strings")
            if args:
                _check(item, args[1], f"{path}.{key}", errors)
        return
    if tp is type(None) or tp is None:
        if value is not None:
            errors.append(f"{path}: must be null, got {_describe(value)}")
        return
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    elif tp is list or tp is dict:
        ok = isinstance(value, tp)
    else:
        return  # a type this walk does not model (never met in the Responses params)
    if not ok:
        errors.append(f"{path}: must be {_describe(tp())}, got {_describe(value)}")


def _check_union(value: Any, members: tuple, path: str, errors: list[str]) -> None:
    # Only members of the value's JSON kind can explain why it fails.
    candidates = tuple(m for m in members if _same_kind(value, m)) or members
    if isinstance(value, dict):
        typed = [m for m in members if _is_typeddict(m)]
        if typed:
            matching = []
            for member in typed:
                literals, required = _type_literals(member)
                if "type" in value:
                    if literals is None or value["type"] in literals:
                        matching.append(member)
                elif not required:
                    matching.append(member)
            candidates = tuple(matching) or candidates
    best: list[str] | None = None
    for member in candidates:
        trial: list[str] = []
        _check(value, member, path, trial)
        if not trial:
            return
        if best is None or len(trial) < len(best):
            best = trial
    if best is None:
        errors.append(f"{path}: {_describe(value)} matches no allowed type")
    elif len(candidates) == 1 or isinstance(value, dict):
        errors.extend(best)
    else:
        errors.append(f"{path}: {_describe(value)} matches none of the allowed types ({best[0]})")


def _same_kind(value: Any, tp: Any) -> bool:
    origin = typing_extensions.get_origin(tp)
    if isinstance(value, dict):
        return _is_typeddict(tp) or tp is dict or origin in _MAPS
    if isinstance(value, list):
        return tp is list or (origin is not None and (origin in _LISTS
                                                      or getattr(origin, "__name__", "") == "SequenceNotStr"))
    if origin is Literal:
        return any(type(a) is type(value) for a in typing_extensions.get_args(tp))
    return not _is_typeddict(tp) and origin is None


def _check_typeddict(value: Any, td: type, path: str, errors: list[str]) -> None:
    if not isinstance(value, dict):
        errors.append(f"{path}: must be an object, got {_describe(value)}")
        return
    fields, required = _fields(td)
    for key in required - value.keys():
        errors.append(f"{path}: missing required key '{key}' ({td.__name__})")
    for key, item in value.items():
        if key not in fields:
            errors.append(f"{path}.{key}: unknown key for {td.__name__}")
        elif not (item is None and key in NULL_OK and key not in required):
            _check(item, fields[key], f"{path}.{key}", errors)


# --- rules the types cannot express ------------------------------------------------------------------

def _structure(body: dict, errors: list[str]) -> None:
    items = body.get("input")
    server_history = body.get("previous_response_id") is not None or body.get("conversation") is not None
    if body.get("previous_response_id") is not None and body.get("conversation") is not None:
        errors.append("$: previous_response_id cannot be used together with conversation")
    for key, top in (("temperature", 2), ("top_p", 1)):
        value = body.get(key)
        if value is not None and not 0 <= value <= top:
            errors.append(f"$.{key}: must be between 0 and {top}, got {value}")
    tool_names = _tools(body.get("tools") or [], "$.tools", errors)
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name") not in tool_names:
        errors.append(f"$.tool_choice.name: '{choice.get('name')}' is not a function tool of this request")
    if isinstance(items, list):
        _items(items, server_history, errors)


def _tools(tools: list, path: str, errors: list[str]) -> set[str]:
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if tool.get("type") not in ("function", "custom"):
            continue
        name = tool["name"]
        if not TOOL_NAME.match(name):
            errors.append(f"{path}[{i}].name: '{name}' must be 1-128 of a-z A-Z 0-9 _ -")
        if name in names:
            errors.append(f"{path}[{i}].name: duplicate tool name '{name}'")
        names.add(name)
    return names


def _items(items: list, server_history: bool, errors: list[str]) -> None:
    calls: dict[str, tuple[int, str]] = {}  # call_id -> (index, item type)
    answered: set[str] = set()
    for i, item in enumerate(items):
        path = f"$.input[{i}]"
        item_type = item.get("type", "message" if "role" in item else "item_reference")
        prefix = ID_PREFIX.get(item_type)
        item_id = item.get("id")
        if prefix and isinstance(item_id, str) and not item_id.startswith(prefix):
            errors.append(f"{path}.id: '{item_id}' is not an id OpenAI issued for a {item_type} item "
                          f"(expected '{prefix}...')")
        call_id = item.get("call_id")
        if isinstance(call_id, str) and not 0 < len(call_id) <= MAX_CALL_ID:
            errors.append(f"{path}.call_id: must be 1-{MAX_CALL_ID} characters, got {len(call_id)}")
        match item_type:
            case "message":
                _message(item, path, errors)
            case "function_call" | "custom_tool_call":
                if call_id in calls:
                    errors.append(f"{path}.call_id: duplicate call id '{call_id}'")
                calls[call_id] = (i, item_type)
                if item_type == "function_call":
                    _arguments(item["arguments"], f"{path}.arguments", errors)
            case "function_call_output" | "custom_tool_call_output":
                if call_id is None:
                    errors.append(f"{path}: a tool output needs the call_id of its call")
                    continue
                call = calls.get(call_id)
                if call is None:
                    if not server_history:
                        errors.append(f"{path}.call_id: no earlier call has id '{call_id}'")
                elif CALL_OUTPUT[call[1]] != item_type:
                    errors.append(f"{path}.type: a {call[1]} is answered by {CALL_OUTPUT[call[1]]}, not {item_type}")
                elif call_id in answered:
                    errors.append(f"{path}.call_id: call '{call_id}' is already answered")
                answered.add(call_id)
            case "reasoning":
                # Replayed reasoning must precede the output item it produced, with that item's own id
                # (the API refuses it before an id-less assistant message: a corpus 400).
                following = items[i + 1] if i + 1 < len(items) else None
                if following is None or following.get("id") is None or following.get("role") in (
                        "user", "system", "developer") or str(following.get("type", "")).endswith("_output"):
                    errors.append(f"{path}: a reasoning item must be followed by the output item it belongs to "
                                  "(with its id)")
    for call_id, (i, item_type) in calls.items():
        if call_id not in answered:
            errors.append(f"$.input[{i}]: {item_type} '{call_id}' has no {CALL_OUTPUT[item_type]} after it")


def _message(item: dict, path: str, errors: list[str]) -> None:
    content = item["content"]
    if not isinstance(content, list):
        return
    for j, part in enumerate(content):
        part_path = f"{path}.content[{j}]"
        part_type = part.get("type")
        if item["role"] == "assistant" and part_type not in ("output_text", "refusal"):
            errors.append(f"{part_path}.type: an assistant message holds output_text or refusal, not {part_type}")
        _part(part, part_path, errors)


def _part(part: dict, path: str, errors: list[str]) -> None:
    part_type = part.get("type")
    if part_type == "input_image":
        url = part.get("image_url")
        if url is None and part.get("file_id") is None:
            errors.append(f"{path}: an image needs image_url or file_id")
        if isinstance(url, str) and url.startswith("data:") and ";base64," not in url:
            errors.append(f"{path}.image_url: a data URL must be base64 encoded")
    elif part_type == "input_file":
        if all(part.get(k) is None for k in ("file_id", "file_data", "file_url")):
            errors.append(f"{path}: a file needs file_id, file_data or file_url")
        if part.get("file_data") is not None and not part.get("filename"):
            errors.append(f"{path}.filename: required with file_data")


def _arguments(raw: str, path: str, errors: list[str]) -> None:
    try:
        value = json.loads(raw)
    except ValueError:
        errors.append(f"{path}: not valid JSON")
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: must be a JSON object, got {_describe(value)}")

