"""OpenAI Responses tool definitions: function, custom and hosted tools, parsed and written."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ...conversation import Conversation, Tool
from ...ledger import Ledger
from ..base import expect, require
from .items import NAME, own

def parse_tool(tool: Any, path: str) -> Tool:
    expect(tool, dict, path, "tool")
    tool_type = require(tool, "type", str, path)
    if tool_type in ("function", "custom"):
        name = require(tool, "name", str, path)
        form: dict = {}
        fields: dict = {}
        if "description" in tool:
            description = tool["description"]
            if description is None:
                form["null"] = ["description"]
            else:
                fields["description"] = expect(description, str, f"{path}.description", "'description'")
        modelled = {"type", "name", "description"}
        if tool_type == "function":
            modelled.add("parameters")
            if "parameters" in tool:
                parameters = tool["parameters"]
                if parameters is None:
                    form.setdefault("null", []).append("parameters")
                else:
                    fields["parameters"] = expect(parameters, dict, f"{path}.parameters", "'parameters'")
        extras = {k: v for k, v in tool.items() if k not in modelled}
        # The literal, not the parsed string: msgspec leaves out a default only when it is that very object.
        kind = "function" if tool_type == "function" else "custom"
        return Tool(name=name, kind=kind, extras={NAME: extras} if extras else {}, form={NAME: form}, **fields)
    # A hosted tool (web_search, mcp, shell, tool_search, ...): kept whole.
    name = tool.get("name")
    rest = {k: v for k, v in tool.items() if k != "name"} if isinstance(name, str) else dict(tool)
    return Tool(name=name if isinstance(name, str) else tool_type, kind="hosted", extras={NAME: rest},
                form={NAME: {"named": 1}} if isinstance(name, str) else {NAME: {}})


def write_tools(conv: Conversation, form: dict, ledger: Ledger) -> list | None:
    if not conv.tools and not form.get("tools"):
        return None
    out = []
    for ti, tool in enumerate(conv.tools):
        written = _write_tool(tool, f"$.tools[{ti}]", ledger)
        if written is not None:
            out.append(written)
    if not out and not form.get("tools"):
        return None
    return out


def _write_tool(tool: Tool, path: str, ledger: Ledger) -> dict | None:
    tform = own(tool.form)
    extras = own(tool.extras) or {}
    mine = tform is not None
    nulls = (tform or {}).get("null", ())
    if tool.kind == "hosted":
        if NAME not in tool.extras:
            ledger.add("dropped", path, f"hosted tool '{tool.name}' of another provider has no openai-responses form")
            return None
        out = dict(extras)
        if (tform or {}).get("named"):
            out["name"] = tool.name
        return out
    out = {"type": tool.kind, "name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    elif "description" in nulls:
        out["description"] = None
    if tool.kind == "function":
        if tool.parameters is not UNSET:
            out["parameters"] = tool.parameters
        elif "parameters" in nulls:
            out["parameters"] = None
        elif not mine:
            out["parameters"] = {"type": "object", "properties": {}}  # required; same meaning as none
        if not mine:
            out["strict"] = False  # other formats do not enforce schemas; strict mode would reject most
    out.update(extras)
    return out
