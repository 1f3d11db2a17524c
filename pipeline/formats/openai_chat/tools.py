"""OpenAI Chat Completions tool definitions: `tools` (function, custom, hosted) and the legacy
`functions` list, parsed and written."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ...conversation import Tool
from ...ledger import Ledger
from .blocks import NAME, missing, opt_str, req_dict, req_str, rest, wrong

_FUNCTION_TOOL_KEYS = frozenset(("type", "function"))
_FUNCTION_KEYS = frozenset(("name", "description", "parameters"))
_CUSTOM_TOOL_KEYS = frozenset(("type", "custom"))
_CUSTOM_KEYS = frozenset(("name", "description"))


def parse_tool(tool: Any, path: str, legacy: bool = False) -> Tool:
    """One entry of `tools` (or of the legacy `functions` list when `legacy`)."""
    if type(tool) is not dict:
        raise wrong(path, "a tool", "an object", tool)
    if legacy:
        return _parse_function(tool, path, False, {}, {"legacy": True})
    kind = tool.get("type", UNSET)
    if kind == "function" or (kind is UNSET and "function" in tool):
        # Mistral writes function tools without `type`; the API defaults it.
        fn = tool.get("function")
        if type(fn) is not dict:
            req_dict(tool, "function", path)  # raises: missing, or not an object
        outer = None if _FUNCTION_TOOL_KEYS.issuperset(tool) else rest(tool, _FUNCTION_TOOL_KEYS)
        return _parse_function(fn, path, True, {"$tool": outer} if outer else {},
                               {"no_type": True} if kind is UNSET else {})
    if kind == "custom":
        custom = req_dict(tool, "custom", path)
        cpath = f"{path}.custom"
        name = req_str(custom, "name", cpath)
        description = opt_str(custom, "description", cpath)
        extras = rest(custom, _CUSTOM_KEYS)
        outer = rest(tool, _CUSTOM_TOOL_KEYS)
        if outer:
            extras["$tool"] = outer
        form = {"null": ["description"]} if "description" in custom and description is None else {}
        return Tool(name=name, description=description, kind="custom", extras={NAME: extras} if extras else {},
                    form={NAME: form} if form else {})
    if kind is UNSET:
        raise missing(path, "type")
    if type(kind) is not str:
        raise wrong(f"{path}.type", "'type'", "a string", kind)
    # A server-side tool of some OpenAI-compatible API: kept whole, emitted verbatim.
    name = tool.get("name") if type(tool.get("name")) is str else kind
    return Tool(name=name, kind="hosted", extras={NAME: {"tool": dict(tool)}})


def _parse_function(fn: dict, path: str, nested: bool, extras: dict, form: dict) -> Tool:
    """A function definition: the tool at `path` itself, or its `function` when `nested`."""
    name = fn.get("name")
    description = fn.get("description")
    parameters = fn.get("parameters", UNSET)
    if type(name) is not str or (description is not None and type(description) is not str) \
            or (type(parameters) is not dict and parameters is not UNSET and parameters is not None):
        _refuse_function(fn, f"{path}.function" if nested else path)
    if description is None or parameters is None:
        nulls = [k for k in ("description", "parameters") if k in fn and fn[k] is None]
        if nulls:
            form["null"] = nulls
        if parameters is None:
            parameters = UNSET
    if not _FUNCTION_KEYS.issuperset(fn):
        extras.update(rest(fn, _FUNCTION_KEYS))
    return Tool(name=name, description=description, parameters=parameters, kind="function",
                extras={NAME: extras} if extras else {}, form={NAME: form} if form else {})


def _refuse_function(fn: dict, path: str) -> None:
    """The error of a function definition some field of which is wrong: the first, in reading order."""
    req_str(fn, "name", path)
    opt_str(fn, "description", path)
    raise wrong(f"{path}.parameters", "'parameters'", "an object", fn["parameters"])


def write_tool(tool: Tool, path: str, ledger: Ledger) -> tuple[dict | None, bool]:
    """(definition, is_legacy) for one tool; None after a ledger entry when Chat cannot carry it."""
    own = tool.extras.get(NAME) or {}
    form = tool.form.get(NAME) or {}
    if tool.kind == "hosted":
        if "tool" in own:
            return dict(own["tool"]), False
        ledger.add("dropped", path, f"hosted tool '{tool.name}' has no equivalent in Chat Completions")
        return None, False
    nulls = form.get("null", ())
    if tool.kind == "custom":
        custom: dict[str, Any] = {"name": tool.name}
        if tool.description is not None or "description" in nulls:
            custom["description"] = tool.description
        custom.update((k, v) for k, v in own.items() if k != "$tool")
        out = {"type": "custom", "custom": custom}
        out.update(own.get("$tool") or {})
        return out, False
    fn: dict[str, Any] = {"name": tool.name}
    if tool.description is not None or "description" in nulls:
        fn["description"] = tool.description
    if tool.parameters is not UNSET:
        fn["parameters"] = tool.parameters
    elif "parameters" in nulls:
        fn["parameters"] = None
    fn.update((k, v) for k, v in own.items() if k != "$tool")
    if form.get("legacy"):
        return fn, True
    out = {"function": fn} if form.get("no_type") else {"type": "function", "function": fn}
    out.update(own.get("$tool") or {})
    return out, False
