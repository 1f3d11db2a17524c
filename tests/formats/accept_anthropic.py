"""A strict checker for Anthropic Messages request bodies, for tests.

`check_request(body)` returns violations as "JSON path: reason" strings (empty: accepted). It walks the
body against the official SDK's request TypedDicts (the beta ones, a superset of the stable API that the
corpus bodies use: mcp_servers, context_management, compaction blocks...) strictly: unknown keys, wrong
types and missing required keys are all reported, at every depth. It then checks the rules the types
cannot express: tool_use/tool_result pairing between turns, results first in a user turn, id and tool
name patterns, unique ids and tool names, tool_choice naming a defined tool, thinking budgets.
"""

from __future__ import annotations

import collections.abc
import functools
import re
import types
import typing

import typing_extensions
from typing import Any, Literal, NotRequired, Required, Union

import pydantic
from anthropic.types.beta.message_count_tokens_params import MessageCountTokensParams
from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming, MessageCreateParamsStreaming

ID = re.compile(r"^[a-zA-Z0-9_-]+$")
# The API reference allows 1-128 characters of this set for a custom tool's name.
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_LISTS = (collections.abc.Iterable, collections.abc.Sequence, list, typing.List)
_MAPS = (dict, collections.abc.Mapping, typing.Dict)
# Keys the SDK types list but sends as HTTP headers, never in the body.
_HEADER_ONLY = frozenset({"betas"})
# Sampling parameters of the Messages API that this SDK version's types no longer list; the API still
# accepted them when the corpus was recorded (a 200 for temperature and top_k), so check them here.
_SAMPLING = {"temperature": float, "top_p": float, "top_k": int}


def check_request(body: Any, *, count_tokens: bool = False) -> list[str]:
    """Violations of the Anthropic request rules in `body` (a /v1/messages body, or a
    /v1/messages/count_tokens body when `count_tokens`)."""
    errors: list[str] = []
    if not isinstance(body, dict):
        return ["$: a request body must be an object"]
    typed = body if count_tokens else {k: v for k, v in body.items() if k not in _SAMPLING}
    if count_tokens:
        _check(typed, MessageCountTokensParams, "$", errors)
    else:
        for key in _SAMPLING.keys() & body.keys():
            _check(body[key], _SAMPLING[key], f"$.{key}", errors)
        schema = MessageCreateParamsStreaming if body.get("stream") is True else MessageCreateParamsNonStreaming
        _check(typed, schema, "$", errors)
    for key in _HEADER_ONLY & body.keys():
        errors.append(f"$.{key}: sent as an HTTP header, not in the body")
    if not errors:  # structural rules assume the types hold
        _structure(body, errors)
    return errors


# --- the type walk -----------------------------------------------------------------------------------

@functools.cache
def _hints(td: type) -> dict[str, tuple[Any, bool]]:
    """key -> (annotation, required) for a TypedDict. The SDK modules use string annotations, which
    hide Required from __required_keys__, so read the markers from the resolved hints."""
    out = {}
    for key, hint in typing_extensions.get_type_hints(td, include_extras=True).items():
        required = False
        while typing.get_origin(hint) in (Required, NotRequired, typing.Annotated):
            required = required or typing.get_origin(hint) is Required
            hint = typing.get_args(hint)[0]
        out[key] = (hint, required)
    return out


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _describe(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _check(value: Any, tp: Any, path: str, errors: list[str]) -> None:
    if tp is Any or tp is object:
        return
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        _check_union(value, typing.get_args(tp), path, errors)
    elif origin is Literal:
        if not any(value == allowed and type(value) is type(allowed) for allowed in typing.get_args(tp)):
            errors.append(f"{path}: must be one of {list(typing.get_args(tp))}, got {value!r:.60}")
    elif typing_extensions.is_typeddict(tp):
        _check_typeddict(value, tp, path, errors)
    elif origin in _MAPS or tp in (dict, typing.Dict):
        if not isinstance(value, dict):
            errors.append(f"{path}: must be an object, got {_describe(value)}")
            return
        args = typing.get_args(tp)
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(f"{path}: keys must be strings")
            elif args:
                _check(item, args[1], f"{path}.{key}", errors)
    elif origin in _LISTS or (origin is not None and getattr(origin, "__name__", "") == "SequenceNotStr"):
        if not isinstance(value, list):
            errors.append(f"{path}: must be an array, got {_describe(value)}")
            return
        (item_tp,) = typing.get_args(tp) or (Any,)
        for i, item in enumerate(value):
            _check(item, item_tp, f"{path}[{i}]", errors)
    elif tp is type(None):
        if value is not None:
            errors.append(f"{path}: must be null, got {_describe(value)}")
    elif tp is bool:
        if not isinstance(value, bool):
            errors.append(f"{path}: must be a boolean, got {_describe(value)}")
    elif tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{path}: must be an integer, got {_describe(value)}")
    elif tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            errors.append(f"{path}: must be a number, got {_describe(value)}")
    elif tp is str:
        if not isinstance(value, str):
            errors.append(f"{path}: must be a string, got {_describe(value)}")
    elif _is_model(tp):
        errors.append(f"{path}: response-only type {tp.__name__} in a request")
    else:
        errors.append(f"{path}: checker cannot check type {tp!r}")


def _check_typeddict(value: Any, td: type, path: str, errors: list[str]) -> None:
    if not isinstance(value, dict):
        errors.append(f"{path}: must be an object ({td.__name__}), got {_describe(value)}")
        return
    hints = _hints(td)
    for key, item in value.items():
        if key not in hints:
            errors.append(f"{path}.{key}: unknown key for {td.__name__}")
        else:
            _check(item, hints[key][0], f"{path}.{key}", errors)
    for key, (_, required) in hints.items():
        if required and key not in value:
            errors.append(f"{path}: missing required key '{key}' ({td.__name__})")


def _type_literals(td: type) -> tuple[tuple, bool] | None:
    """The `type` values a TypedDict accepts and whether `type` is required (None: no `type` key)."""
    entry = _hints(td).get("type")
    if entry is None:
        return None
    hint, required = entry
    literals: list = []
    for arm in (typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)):
        if typing.get_origin(arm) is Literal:
            literals.extend(typing.get_args(arm))
    return tuple(literals), required


def _check_union(value: Any, arms: tuple, path: str, errors: list[str]) -> None:
    # Response models appear in the SDK's content unions for convenience; a request uses the params.
    arms = tuple(a for a in arms if not _is_model(a))
    if value is None and type(None) in arms:
        return
    candidates = arms
    if isinstance(value, dict):
        tds = [a for a in arms if typing_extensions.is_typeddict(a)]
        if tds:
            others = [a for a in arms if not typing_extensions.is_typeddict(a) and a is not type(None)]
            vtype = value.get("type")
            matched = []
            for td in tds:
                info = _type_literals(td)
                if info is None or ("type" not in value and not info[1]) or vtype in info[0]:
                    matched.append(td)
            if not matched and not any(typing.get_origin(a) in _MAPS or a in (dict, object) for a in others):
                known = sorted({v for td in tds if (info := _type_literals(td)) for v in info[0]})
                errors.append(f"{path}: unknown type {vtype!r}; expected one of {known}")
                return
            candidates = tuple(matched) + tuple(others)
    # Report the errors of the closest arm: one whose outer shape (object, array, scalar) fits.
    fitting = [a for a in candidates if _shape_fits(value, a)]
    if not fitting:
        errors.append(f"{path}: {_describe(value)} is not allowed here")
        return
    best: list[str] | None = None
    for arm in fitting:
        found: list[str] = []
        _check(value, arm, path, found)
        if not found:
            return
        if best is None or len(found) < len(best):
            best = found
    errors.extend(best or ())


def _shape_fits(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any or tp is object or origin in (Union, types.UnionType):
        return True
    if origin is Literal:
        return any(type(value) is type(v) for v in typing.get_args(tp))
    if typing_extensions.is_typeddict(tp) or origin in _MAPS or tp in (dict, typing.Dict):
        return isinstance(value, dict)
    if origin in _LISTS or (origin is not None and getattr(origin, "__name__", "") == "SequenceNotStr"):
        return isinstance(value, list)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(tp, type) and isinstance(value, tp)


# --- rules the types cannot express ---------------------------------------------------------------

def _blocks(message: dict) -> list:
    content = message.get("content")
    if isinstance(content, str):  # shorthand for one text block
        return [{"type": "text", "text": content}] if content else []
    return content if isinstance(content, list) else []


def _structure(body: dict, errors: list[str]) -> None:
    messages = body["messages"]
    if not messages:
        errors.append("$.messages: at least one message is required")
    tool_names = _check_tools(body, errors)
    _check_params(body, tool_names, errors)

    # The API combines consecutive same-role messages into one turn; system messages stand apart.
    turns: list[tuple[str, list[tuple[str, dict]]]] = []
    seen_ids: set[str] = set()
    for mi, message in enumerate(messages):
        role = message["role"]
        content = message.get("content")
        if role != "system" and (content == "" or content == []) and mi != len(messages) - 1:
            errors.append(f"$.messages[{mi}].content: only the final assistant message may be empty")
        if role == "system":
            continue
        entries = [(f"$.messages[{mi}].content[{bi}]", b) for bi, b in enumerate(_blocks(message))]
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(entries)
        else:
            turns.append((role, entries))
        for bpath, block in entries:
            btype = block["type"]
            if btype == "text" and not block["text"].strip():
                errors.append(f"{bpath}.text: text blocks must hold non-whitespace text")
            if btype in ("tool_use", "server_tool_use", "mcp_tool_use"):
                if role != "assistant":
                    errors.append(f"{bpath}: {btype} is only allowed in assistant messages")
                if not ID.match(block["id"]):
                    errors.append(f"{bpath}.id: must match {ID.pattern}")
                if block["id"] in seen_ids:
                    errors.append(f"{bpath}.id: duplicate id '{block['id']}'")
                seen_ids.add(block["id"])
            elif btype == "tool_result" and role != "user":
                errors.append(f"{bpath}: tool_result is only allowed in user messages")
            elif btype in ("thinking", "redacted_thinking") and role != "assistant":
                errors.append(f"{bpath}: {btype} is only allowed in assistant messages")

    for ti, (role, entries) in enumerate(turns):
        if role != "assistant":
            continue
        calls = {b["id"]: p for p, b in entries if b["type"] == "tool_use"}
        nxt = turns[ti + 1] if ti + 1 < len(turns) else None
        answered: set[str] = set()
        if nxt is not None:
            results = [(p, b) for p, b in nxt[1] if b["type"] == "tool_result"]
            leading = 0
            while leading < len(nxt[1]) and nxt[1][leading][1]["type"] == "tool_result":
                leading += 1
            if leading != len(results):
                errors.append(f"{results[-1][0]}: tool results must come before any other content in a user turn")
            for p, b in results:
                if b["tool_use_id"] not in calls:
                    errors.append(f"{p}.tool_use_id: '{b['tool_use_id']}' answers no tool_use of the previous turn")
                elif b["tool_use_id"] in answered:
                    errors.append(f"{p}.tool_use_id: '{b['tool_use_id']}' answered twice")
                answered.add(b["tool_use_id"])
        for call_id, p in calls.items():
            if call_id not in answered:
                errors.append(f"{p}: tool_use '{call_id}' has no tool_result in the next user turn")
    # A tool_result in the first turn, or after a user turn, answers nothing.
    for ti, (role, entries) in enumerate(turns):
        if role == "user" and (ti == 0 or turns[ti - 1][0] != "assistant"):
            for p, b in entries:
                if b["type"] == "tool_result":
                    errors.append(f"{p}.tool_use_id: '{b['tool_use_id']}' answers no tool_use of the previous turn")


def _check_tools(body: dict, errors: list[str]) -> set[str]:
    names: set[str] = set()
    for ti, tool in enumerate(body.get("tools") or ()):
        name = tool.get("name")
        if name is None:
            continue  # toolsets (mcp_toolset) are named by their server
        if name in names:
            errors.append(f"$.tools[{ti}].name: duplicate tool name '{name}'")
        names.add(name)
        if tool.get("type") in (None, "custom"):
            if not TOOL_NAME.match(name):
                errors.append(f"$.tools[{ti}].name: must match {TOOL_NAME.pattern}")
            if tool["input_schema"].get("type") != "object":
                errors.append(f"$.tools[{ti}].input_schema.type: must be 'object'")
    return names


def _check_params(body: dict, tool_names: set[str], errors: list[str]) -> None:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool" and choice.get("name") not in tool_names:
        errors.append(f"$.tool_choice.name: '{choice.get('name')}' is not a defined tool")
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)) and not 0 <= temperature <= 1:
        errors.append("$.temperature: must be between 0 and 1")
    top_p = body.get("top_p")
    if isinstance(top_p, (int, float)) and not 0 <= top_p <= 1:
        errors.append("$.top_p: must be between 0 and 1")
    top_k = body.get("top_k")
    if isinstance(top_k, int) and top_k < 0:
        errors.append("$.top_k: must not be negative")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens < 0:
        errors.append("$.max_tokens: must not be negative")
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int):
            if budget < 1024:
                errors.append("$.thinking.budget_tokens: must be at least 1024")
            if isinstance(max_tokens, int) and budget >= max_tokens:
                errors.append("$.thinking.budget_tokens: must be less than max_tokens")
