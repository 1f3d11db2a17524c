"""What tools, calls and results become in a template's inputs: tool definitions (each distinct tool built
and dumped once), a call's arguments as a JSON object, a result as one text."""

from __future__ import annotations

import json
from typing import Any, assert_never

import msgspec
from msgspec import UNSET

from ..conversation import CUSTOM_INPUT, Media, Text, Tool, ToolCall, ToolResult, custom_input_schema
from ..errors import RenderError
from ..ledger import Ledger
from .marks import BlockRef, _dumps, _has_marks


class _Definition(dict):
    """A cached tool definition with its JSON text (None when it holds sentinel characters: then
    Marks.json dumps and refuses it as for any other value)."""

    __slots__ = ("sftprep_json",)


# Tool lists repeat across a dataset: each distinct tool's definition is built and dumped once. Bounded
# (cleared when full). Shared, so only ever handed to Marks.json, which wraps a copy.
_DEFINITIONS: dict[bytes, _Definition] = {}
_DEFINITIONS_MAX = 2048


def _cached_definition(tool: Tool) -> dict[str, Any]:
    try:
        key = msgspec.msgpack.encode(tool)  # exact for JSON values (floats, NaN and ints kept apart)
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):  # not plain data (a huge int): uncached
        return tool_definition(tool)
    hit = _DEFINITIONS.get(key)
    if hit is None:
        hit = _Definition(tool_definition(tool))
        text = _dumps(hit)
        hit.sftprep_json = None if _has_marks(text) else text
        if len(_DEFINITIONS) >= _DEFINITIONS_MAX:
            _DEFINITIONS.clear()
        _DEFINITIONS[key] = hit
    return hit


# Whole tool lists, the same way: per list of function tools whose definitions hold no sentinel, each
# tool's cached definition with its ref (what `_Builder._tools` gives it at that position).
_TOOL_LISTS: dict[bytes, tuple[tuple[_Definition, BlockRef], ...]] = {}
_TOOL_LISTS_MAX = 512


def _cached_tools(tools: tuple[Tool, ...]) -> tuple[tuple[_Definition, BlockRef], ...] | None:
    """None when a tool is not a function tool, its definition is not cacheable or holds sentinels:
    then each tool takes the general path (its ledger entry, its error)."""
    try:
        key = msgspec.msgpack.encode(tools)  # exact, as for one tool
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return None
    hit = _TOOL_LISTS.get(key)
    if hit is None:
        if any(tool.kind != "function" for tool in tools):
            return None
        definitions = [_cached_definition(tool) for tool in tools]
        if any(getattr(d, "sftprep_json", None) is None for d in definitions):
            return None
        hit = tuple((d, BlockRef("tools", None, ti, f"$.tools[{ti}]")) for ti, d in enumerate(definitions))
        if len(_TOOL_LISTS) >= _TOOL_LISTS_MAX:
            _TOOL_LISTS.clear()
        _TOOL_LISTS[key] = hit
    return hit


def tool_definition(tool: Tool) -> dict[str, Any]:
    """The OpenAI-style function definition templates expect: name, description, parameters, in that order.
    A custom (free-form) tool is the function taking its text as one string field (`custom_input_schema`)."""
    function: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        function["description"] = tool.description
    parameters = tool_parameters(tool)
    if parameters is not UNSET:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def tool_parameters(tool: Tool) -> Any:
    """The JSON Schema a template declares the tool with (UNSET: none)."""
    return custom_input_schema() if tool.kind == "custom" else tool.parameters


def declared(tool: Tool, path: str, ledger: Ledger, target: str) -> bool:
    """Whether a template's function tools have a place for the tool: not a hosted one (ledgered as
    dropped); a custom one as the function taking its free text as one string field (ledgered as folded)."""
    if tool.kind == "hosted":
        ledger.add("dropped", path, f"{tool.kind} tool '{tool.name}' has no place in {target}")
        return False
    if tool.kind == "custom":
        ledger.add("folded", path, f"custom tool '{tool.name}' takes free text: declared as a function taking it as "
                   f"the string field '{CUSTOM_INPUT}'")
    return True


def custom_arguments(call: ToolCall, path: str = "$") -> dict[str, Any]:
    """A custom call's free text as the JSON object a template writes: {"input": text}."""
    if not isinstance(call.arguments, str):
        raise RenderError(f"custom tool '{call.name}' takes free text, but this call's input is "
                          f"{'missing' if call.arguments is UNSET else type(call.arguments).__name__}", path=path,
                          code="render_arguments")
    return {CUSTOM_INPUT: call.arguments}


def _arguments(call: ToolCall, path: str) -> dict[str, Any]:
    """The call's arguments as a JSON object: parsed from the raw string when needed, never a string
    (templates `tojson` them, so a string would be double-encoded)."""
    if not call.arguments_valid:
        raise RenderError(f"arguments of '{call.name}' are not valid JSON: {_clip(call.raw_arguments)}", path=path,
                          code="render_arguments")
    arguments = call.arguments
    if arguments is UNSET:
        if call.raw_arguments is None or not call.raw_arguments.strip():
            return {}
        try:
            arguments = json.loads(call.raw_arguments)
        except ValueError:
            raise RenderError(f"arguments of '{call.name}' are not valid JSON: {_clip(call.raw_arguments)}",
                              path=path, code="render_arguments") from None
    if not isinstance(arguments, dict):
        raise RenderError(f"arguments of '{call.name}' must be a JSON object, got {type(arguments).__name__}",
                          path=path, code="render_arguments")
    return arguments


def result_text(result: ToolResult, ledger: Ledger | None, path: str, target: str, joiner: str = "\n") -> str:
    """A result as the one string text templates render: its text parts joined; a structured output
    (when there is no text) as compact JSON. Media parts are ledgered as dropped."""
    content = result.content
    if len(content) == 1 and result.output is UNSET and type(content[0]) is Text and type(content[0].text) is str:
        return content[0].text  # most results: what the loop and the join below give for one text
    texts: list[str] = []
    for ci, part in enumerate(result.content):
        match part:
            case Text():
                texts.append(part.text)
            case Media():
                if part.text is not None:
                    texts.append(part.text)
                    if ledger is not None:
                        ledger.add("folded", f"{path}.content[{ci}]", f"text document rendered as text in {target}")
                elif ledger is not None:
                    ledger.add("dropped", f"{path}.content[{ci}]", f"{part.kind} in a tool result has no place in {target}")
            case _:
                assert_never(part)
    if result.output is not UNSET:
        if texts:
            if ledger is not None:
                ledger.add("dropped", f"{path}.output", "structured output beside text: the text is rendered")
        else:
            if ledger is not None:
                ledger.add("folded", f"{path}.output", "structured output rendered as JSON text")
            return json.dumps(result.output, ensure_ascii=False)
    return _join(joiner, texts)


def _has_text(result: ToolResult) -> bool:
    return any(isinstance(p, Text) or (isinstance(p, Media) and p.text is not None) for p in result.content)


def _join(joiner: str, texts: list[str]) -> str:
    """Texts of one message joined; empty ones carry nothing and would only add stray separators."""
    if len(texts) == 1 and type(texts[0]) is str:  # most turns: the join's own result, without the join
        return texts[0]
    return joiner.join(t for t in texts if t)


def _clip(text: str | None, n: int = 60) -> str:
    text = text or ""
    return repr(text if len(text) <= n else text[:n] + "...")
