"""A strict checker for Gemini generateContent request bodies, built on google-genai's pydantic types.

The SDK models are walked by hand rather than validated through pydantic, so that every problem is
reported with its JSON path and both spellings the API accepts (camelCase and snake_case) are handled
at every level. On top of the types come the rules the types cannot say: one data field per part,
the required fields, roles, calls only from the model and responses only from the user, and every
model turn's function calls answered by the very next content (the API refuses a history where the
number of function responses differs from the number of calls; Gemini 3 also wants each response to
echo its call's id). Consecutive contents of one role are accepted: the corpus holds such bodies that
the API answered with 200, so strict alternation is not a rule here.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import enum
import re
import types as pytypes
from collections import Counter
from functools import lru_cache
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from google.genai import types
from pydantic import BaseModel

# The REST request body (GenerateContentRequest) in terms of the SDK's types.
REQUEST = {
    "contents": list[types.Content],
    "systemInstruction": types.Content,
    "tools": list[types.Tool],
    "toolConfig": types.ToolConfig,
    "safetySettings": list[types.SafetySetting],
    "generationConfig": types.GenerationConfig,
    "cachedContent": str,
    "labels": dict[str, str],
    "modelArmorConfig": types.ModelArmorConfig,
}
_REQUEST_SNAKE = {"system_instruction": "systemInstruction", "tool_config": "toolConfig",
                  "safety_settings": "safetySettings", "generation_config": "generationConfig",
                  "cached_content": "cachedContent", "model_armor_config": "modelArmorConfig"}

_DATA = ("text", "inline_data", "file_data", "function_call", "function_response", "executable_code",
         "code_execution_result", "tool_call", "tool_response")
_FUNCTION_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")


def check_request(body: Any) -> list[str]:
    """Every reason the Gemini API would refuse this generateContent body, as 'path: reason'."""
    out: list[str] = []
    if not isinstance(body, dict):
        return ["$: a request body must be an object"]
    for key, value in body.items():
        name = _REQUEST_SNAKE.get(key, key)
        if name != key and name in body:
            out.append(f"$.{key}: given twice, as '{key}' and '{name}'")
        if name not in REQUEST:
            out.append(f"$.{key}: unknown field")
            continue
        _check(value, REQUEST[name], f"$.{key}", out)
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        out.append("$.contents: required, a non-empty array")
    elif all(isinstance(c, dict) for c in contents):
        _check_contents(contents, out)
    system = _get(body, "systemInstruction")
    if isinstance(system, dict):
        for i, part in enumerate(system.get("parts") or []):
            if isinstance(part, dict) and set(map(_snake, part)) != {"text"}:
                out.append(f"$.systemInstruction.parts[{i}]: system instructions hold text parts only")
    tools = body.get("tools")
    if isinstance(tools, list):
        _check_tools(tools, out)
    return out


# --- the walk over SDK types -------------------------------------------------------------------

def _check(value: Any, tp: Any, path: str, out: list[str]) -> None:
    if tp is Any or tp is object:
        return
    origin = get_origin(tp)
    if origin is Union or origin is pytypes.UnionType:
        if value is None and type(None) in get_args(tp):
            return
        options = [a for a in get_args(tp) if a is not type(None)]
        if len(options) == 1:
            _check(value, options[0], path, out)
            return
        best: list[str] | None = None
        for option in options:
            errors: list[str] = []
            _check(value, option, path, errors)
            if not errors:
                return
            if best is None or len(errors) < len(best):
                best = errors
        out.extend(best or [f"{path}: matches none of {tp}"])
        return
    if origin is list:
        if not isinstance(value, list):
            out.append(f"{path}: must be an array, got {_kind(value)}")
            return
        (item,) = get_args(tp) or (Any,)
        for i, v in enumerate(value):
            _check(v, item, f"{path}[{i}]", out)
        return
    if origin is dict:
        if not isinstance(value, dict):
            out.append(f"{path}: must be an object, got {_kind(value)}")
            return
        args = get_args(tp)
        for key, v in value.items():
            if args:
                _check(v, args[1], f"{path}.{key}", out)
        return
    if origin is Literal:
        if value not in get_args(tp):
            out.append(f"{path}: must be one of {get_args(tp)}, got {value!r}")
        return
    if not isinstance(tp, type):
        return  # typing constructs the API does not constrain further
    if issubclass(tp, BaseModel):
        _check_model(value, tp, path, out)
    elif issubclass(tp, enum.Enum):
        if value not in _enum_values(tp):
            out.append(f"{path}: must be one of {sorted(_enum_values(tp))}, got {value!r}")
    elif tp is bool:
        if not isinstance(value, bool):
            out.append(f"{path}: must be a boolean, got {_kind(value)}")
    elif tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            out.append(f"{path}: must be an integer, got {_kind(value)}")
    elif tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            out.append(f"{path}: must be a number, got {_kind(value)}")
    elif tp is str or tp is datetime.datetime:
        if not isinstance(value, str):
            out.append(f"{path}: must be a string, got {_kind(value)}")
    elif tp is bytes:
        if not isinstance(value, str) or not _is_base64(value):
            out.append(f"{path}: must be base64 text")


def _check_model(value: Any, model: type[BaseModel], path: str, out: list[str]) -> None:
    if not isinstance(value, dict):
        out.append(f"{path}: must be an object ({model.__name__}), got {_kind(value)}")
        return
    fields, hints = _fields(model)
    seen: dict[str, str] = {}
    for key, v in value.items():
        name = fields.get(key)
        if name is None:
            out.append(f"{path}.{key}: unknown field of {model.__name__}")
            continue
        if name in seen:
            out.append(f"{path}.{key}: given twice, as '{seen[name]}' and '{key}'")
        seen[name] = key
        _check(v, hints[name], f"{path}.{key}", out)


@lru_cache(maxsize=None)
def _fields(model: type[BaseModel]) -> tuple[dict[str, str], dict[str, Any]]:
    """Accepted JSON key (alias or field name) -> field name, and the field annotations."""
    hints = get_type_hints(model)
    keys: dict[str, str] = {}
    for name, info in model.model_fields.items():
        keys[name] = name
        if info.alias:
            keys[info.alias] = name
    return keys, hints


@lru_cache(maxsize=None)
def _enum_values(tp: type[enum.Enum]) -> frozenset:
    return frozenset(m.value for m in tp)


def _is_base64(text: str) -> bool:
    text = text.replace("-", "+").replace("_", "/")  # the API takes both alphabets
    try:
        base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


def _get(obj: dict, camel: str) -> Any:
    value = obj.get(camel)
    return obj.get(_snake(camel)) if value is None else value


# --- rules the types cannot express -----------------------------------------------------------

def _check_contents(contents: list[dict], out: list[str]) -> None:
    pending: list[tuple[str | None, str, str]] | None = None  # calls of the previous model turn
    for ci, content in enumerate(contents):
        path = f"$.contents[{ci}]"
        role = content.get("role", "user")
        if role not in ("user", "model"):
            out.append(f"{path}.role: must be 'user' or 'model', got {role!r}")
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            out.append(f"{path}.parts: required, a non-empty array")
            parts = []
        calls: list[tuple[str | None, str, str]] = []
        responses: list[tuple[str | None, str, str]] = []
        for pi, part in enumerate(parts):
            ppath = f"{path}.parts[{pi}]"
            if not isinstance(part, dict):
                continue
            data = [key for key in part if _snake(key) in _DATA]
            if len(data) != 1:
                out.append(f"{ppath}: a part holds exactly one of {', '.join(_DATA)}; found {data or 'none'}")
                continue
            key = data[0]
            value = part[key]
            if not isinstance(value, dict):
                continue
            match _snake(key):
                case "function_call":
                    _required(value, ("name",), f"{ppath}.{key}", out)
                    if role != "model":
                        out.append(f"{ppath}: a function call must come from the model")
                    calls.append((value.get("id"), value.get("name"), ppath))
                case "function_response":
                    _required(value, ("name", "response"), f"{ppath}.{key}", out)
                    if role != "user":
                        out.append(f"{ppath}: a function response must be in a user content")
                    responses.append((value.get("id"), value.get("name"), ppath))
                case "inline_data":
                    _required(value, ("data", "mimeType"), f"{ppath}.{key}", out)
                case "file_data":
                    _required(value, ("fileUri",), f"{ppath}.{key}", out)
        if pending is not None:
            _check_answers(pending, responses, path, out)
        elif responses:
            for _, name, rpath in responses:
                out.append(f"{rpath}: response to '{name}' without a call in the previous model content")
        pending = calls or None
    if pending:
        for _, name, cpath in pending:
            out.append(f"{cpath}: call to '{name}' is never answered")


def _check_answers(calls: list, responses: list, path: str, out: list[str]) -> None:
    if len(responses) != len(calls):
        out.append(f"{path}: {len(calls)} function call(s) in the previous model content but {len(responses)} "
                   "function response(s) here")
    if Counter(name for _, name, _ in calls) != Counter(name for _, name, _ in responses):
        out.append(f"{path}: function response names {[n for _, n, _ in responses]} do not match the calls "
                   f"{[n for _, n, _ in calls]}")
    # Gemini 3 pairs strictly: a response echoes the id of the call it answers.
    call_ids = {cid for cid, _, _ in calls if cid is not None}
    for rid, name, rpath in responses:
        if call_ids and rid is None:
            out.append(f"{rpath}: the calls carry ids, this response to '{name}' does not echo one")
        elif rid is not None and call_ids and rid not in call_ids:
            out.append(f"{rpath}: response id {rid!r} matches no call of the previous model content")


def _required(obj: dict, keys: tuple[str, ...], path: str, out: list[str]) -> None:
    for key in keys:
        if _get(obj, key) is None:
            out.append(f"{path}.{key}: required")


def _check_tools(tools: list, out: list[str]) -> None:
    names: set[str] = set()
    for ti, tool in enumerate(tools):
        if not isinstance(tool, dict):
            continue
        if not tool:
            out.append(f"$.tools[{ti}]: an empty tool")
        for key, decls in tool.items():
            if _snake(key) != "function_declarations" or not isinstance(decls, list):
                continue
            for di, decl in enumerate(decls):
                path = f"$.tools[{ti}].{key}[{di}]"
                if not isinstance(decl, dict):
                    continue
                name = decl.get("name")
                if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
                    out.append(f"{path}.name: required, letters, digits, '_', '.', ':' or '-', at most 64, "
                               f"not starting with a digit; got {name!r}")
                elif name in names:
                    out.append(f"{path}.name: '{name}' is declared twice")
                if isinstance(name, str):
                    names.add(name)
                if "parameters" in decl and _get(decl, "parametersJsonSchema") is not None:
                    out.append(f"{path}: 'parameters' and 'parametersJsonSchema' are mutually exclusive")
