"""Call-shaped JSON for the flattened-call detector: JSON decoding, `call_name` (is this value one tool
call, or a list of them?) and the detector of bare JSON objects shaped like a call."""

from __future__ import annotations

import json
import re
from typing import Any, Collection, Iterator

import orjson

from ._flattened_base import _IDENT, Finding, _CodeRegions, _finding

_ARG_KEYS = ("arguments", "parameters", "args")
# Keys a flattened call object may carry besides its name and arguments.
_CALL_EXTRA_KEYS = frozenset({"id", "type", "call_id", "tool_call_id", "index"})
_CALL_TYPES = frozenset({"function", "function_call", "tool_call", "tool_use", "tool"})
# A value opening a line, or opening after prose on its line with a call key first (`Let me check.
# {"name": ...}`); either must then name a defined tool and end its line.
_JSON_START = re.compile(r'^[ \t]*[\[{]|(?<=\S)[ \t]*[\[{](?=[ \t]*\{?[ \t]*"(?:name|function|action|tool|id|type)"\s*:)',
                         re.M)
_CALL_KEY = re.compile(r'"(?:name|function|action|tool)"\s*:')

_decoder = json.JSONDecoder()


def _loads(text: str) -> Any:
    """The JSON value of `text`; ValueError when it is not JSON (orjson: fast, and bounded nesting)."""
    return orjson.loads(text)


def _raw_decode(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value starting at `pos` and where it ends; ValueError when there is none."""
    try:
        return _decoder.raw_decode(text, pos)
    except RecursionError:  # absurdly deep nesting is not a call either
        raise ValueError("too deeply nested") from None


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict) and ("properties" in value or value.get("type") == "object"
                                        or "$schema" in value)


def _args_object(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value = _loads(value)
        except ValueError:
            return False
    return isinstance(value, dict) and not _is_schema(value)


def call_name(obj: Any) -> tuple[str | None, str]:
    """(name, family) when `obj` is shaped like one tool call (or a list of them), else (None, "")."""
    if isinstance(obj, list):
        if not obj:
            return None, ""
        first = call_name(obj[0])
        return first if all(call_name(o)[0] for o in obj[1:]) else (None, "")
    if not isinstance(obj, dict):
        return None, ""
    if len(obj) == 1:
        (key, inner), = obj.items()
        if key in ("function", "functionCall", "function_call"):
            return call_name(inner)
        if key == "tool_calls" and isinstance(inner, list):
            return call_name(inner)
    # OpenAI tool_calls entry: {"id", "type": "function", "function": {"name", "arguments"}}
    if isinstance(obj.get("function"), dict) and set(obj) <= _CALL_EXTRA_KEYS | {"function"}:
        return call_name(obj["function"])
    # LangChain agents: {"action": ..., "action_input": ...} and {"tool": ..., "tool_input": ...}
    for name_key, input_key in (("action", "action_input"), ("tool", "tool_input")):
        if set(obj) == {name_key, input_key} and isinstance(obj[name_key], str) and _IDENT.match(obj[name_key]):
            return obj[name_key], "json"
    name = obj.get("name")
    if not isinstance(name, str) or not _IDENT.match(name):
        return None, ""
    if obj.get("type") == "tool_use" and set(obj) <= _CALL_EXTRA_KEYS | {"name", "input"} and "input" in obj:
        return (name, "json") if _args_object(obj["input"]) else (None, "")
    if "type" in obj and obj["type"] not in _CALL_TYPES:
        return None, ""
    arg_keys = [k for k in _ARG_KEYS if k in obj]
    if len(arg_keys) != 1 or not set(obj) <= _CALL_EXTRA_KEYS | {"name", arg_keys[0]}:
        return None, ""
    if not _args_object(obj[arg_keys[0]]):
        return None, ""
    return name, "llama_json" if arg_keys[0] == "parameters" else "json"


def _may_hold_json_call(text: str, tools: Collection[str], code: _CodeRegions) -> bool:
    """False when `_json_objects` can find nothing: a call needs the whole text to be a JSON value, or
    to be one fenced block, or (with a tool list) a call key somewhere, which every object it decodes
    after prose must have near its start."""
    if tools and '"' in text and _CALL_KEY.search(text) is not None:
        return True
    return len(code.fences) == 1 or text.strip()[:1] in ("{", "[")


def _json_objects(text: str, tools: Collection[str], code: _CodeRegions, found: list[Finding]) -> Iterator[Finding]:
    stripped = text.strip()
    # The whole block is one JSON value: a call when its name looks like a function name.
    if stripped[:1] in "{[":
        try:
            value = _loads(stripped)
        except ValueError:
            value = None
        if value is not None:
            name, family = call_name(value)
            if name is not None:
                start = text.index(stripped[0])
                yield _finding(family, start, start + len(stripped), name, tools)
            return
    # The whole block is a single fenced JSON sample: a call only when it names a defined tool.
    body = code.sole_fence_body()
    if body is not None:
        inner = text[body[0]:body[1]].strip()
        try:
            value = _loads(inner) if inner[:1] in "{[" else None
        except ValueError:
            value = None
        name, family = call_name(value)
        if name is not None and name in tools:
            start = text.index(inner[0], body[0])
            yield _finding(family, start, start + len(inner), name, tools)
        return
    # JSON inside prose, on its own lines or after a sentence: only when it calls a defined tool.
    if not tools:
        return
    taken = [(f.start, f.end) for f in found]
    decoded_to = 0  # lines inside an object already decoded are not decoded again
    attempts = 0
    for m in _JSON_START.finditer(text):
        start = m.end() - 1
        if start < decoded_to or code.contains(start) or any(a <= start < b for a, b in taken):
            continue
        if not _after_prose_or_line_start(text, start):
            continue  # a value inside a larger JSON or code expression, not one written after prose
        # Only objects that name something near their start can be calls; a bounded number of tries keeps
        # a long text of unclosed braces linear.
        if not _CALL_KEY.search(text, start, start + 400) or attempts >= 64:
            continue
        attempts += 1
        try:
            value, end = _raw_decode(text, start)
        except ValueError:
            continue
        decoded_to = end
        line_end = text.find("\n", end)
        rest = text[end:] if line_end < 0 else text[end:line_end]
        name, family = call_name(value)
        if name is not None and name in tools and not rest.strip(" \t.!"):
            yield _finding(family, start, end, name, tools)


def _after_prose_or_line_start(text: str, pos: int) -> bool:
    before = text[text.rfind("\n", 0, pos) + 1:pos].rstrip()
    if not before:
        return True
    last = before[-1]
    if last in "\"',[{(=`<>|\\":
        return False
    return not (last == ":" and before[:-1].rstrip()[-1:] in ("\"", "'", "}", "]"))
