"""Detect tool calls flattened into text: a call written in some template's syntax inside a text block
instead of being a call block. A model trained on such text learns to print calls, not to make them.

Precision matters as much as recall, so every family needs syntax a writer of prose or code would not
produce by accident, and three signals tighten the looser families:
- code: anything inside a markdown code fence or an inline `code span` is a sample, not a call,
  unless the whole text is that one fenced block and it calls a tool the conversation defines;
- tools: a bare JSON object counts when it names a tool from the conversation's tool list, or when it
  is the whole text block and its name looks like a function name; ReAct lines and bracket markers,
  the loosest syntaxes, must name a defined tool when the conversation defines any (otherwise they are
  more likely an explanation of the format than a call);
- shape: a call-shaped object has only call keys (name plus arguments / parameters / args, id, type),
  and arguments that are an object but not a JSON Schema (that is a tool definition, not a call).

Spans are character (code point) offsets into the text, end exclusive. The detectors are in
`_flattened_json` (bare JSON) and `_flattened_tags` (the other syntaxes); `_flattened_base` holds `Finding`.
"""

from __future__ import annotations

from typing import Collection, Literal

from ._flattened_base import Finding, _CodeRegions
from ._flattened_json import _json_objects, _may_hold_json_call
from ._flattened_tags import (_chatml, _function_tags, _harmony, _markers, _may_hold_marker, _may_hold_special_token,
                              _python_tag, _react, _special_tokens, _tool_code, _xml_invoke)

Family = Literal["chatml", "llama_json", "python_tag", "function_tag", "harmony", "react", "json",
                 "marker", "xml_invoke", "special_token", "tool_code"]

# One line per family, for messages and docs.
FAMILIES: dict[str, str] = {
    "chatml": "ChatML/Hermes <tool_call>...</tool_call> holding a JSON call (or Qwen <function=...>)",
    "llama_json": 'Llama 3 JSON call {"name": ..., "parameters": {...}}',
    "python_tag": "Llama 3 <|python_tag|> call",
    "function_tag": "Llama <function=name>{...}</function> call",
    "harmony": "Harmony header to=functions.NAME with its message tokens or JSON body",
    "react": "ReAct Action: / Action Input: lines",
    "json": "bare JSON object shaped like a call",
    "marker": "[Calling tool: X(args)]-style marker",
    "xml_invoke": "<invoke name=...> XML call",
    "special_token": "a tool-call special token ([TOOL_CALLS], <|tool_call|>, DeepSeek/Kimi tool tokens)",
    "tool_code": "Gemini tool_code block calling default_api.NAME(...)",
}

# Cheap pre-check: text with none of these cannot hold any family.
_TRIGGERS = ("<tool_call>", "<function=", "<|", "to=functions.", "Action", "{", "[", "<invoke", "<｜",
             "<start_function_call>", "default_api.")


def _may_hold_call(text: str) -> bool:
    # _TRIGGERS written out: most assistant texts hold none, and this runs on every one of them. A
    # one-character `in` is a memchr, many times faster than a longer one, so each longer trigger is
    # looked for only when a rare character of it is in the text.
    return ("{" in text or "[" in text or ("A" in text and "Action" in text)
            or ("=" in text and "to=functions." in text) or ("_" in text and "default_api." in text)
            or ("<" in text and ("<|" in text or "<tool_call>" in text or "<function=" in text or "<invoke" in text
                                 or "<｜" in text or "<start_function_call>" in text)))


def find_flattened(text: str, tools: Collection[str] = ()) -> list[Finding]:
    """Every flattened call in `text`, in order of position. `tools` are the names the conversation
    defines (a set is fastest)."""
    if not _may_hold_call(text):
        return []
    code = _CodeRegions(text)
    found: list[Finding] = []
    # Each detector runs only when its trigger is in the text: every match of its syntax contains the
    # trigger, so a detector skipped would have found nothing (and `found`, which later ones read, is
    # the same). Most texts that pass the pre-check hold a "[" or "{" and nothing else. A rare
    # character first, as in `_may_hold_call`.
    tag = "<" in text
    if tag and "<tool_call>" in text:
        found.extend(_chatml(text, tools, code))
    if tag and "<function=" in text:
        found.extend(_function_tags(text, tools, code, found))
    if tag and "<|python_tag|>" in text:
        found.extend(_python_tag(text, tools, code))
    if "=" in text and "to=functions." in text:
        found.extend(_harmony(text, tools, code))
    if "A" in text and "Action" in text:
        found.extend(_react(text, tools, code))
    if _may_hold_marker(text):
        found.extend(_markers(text, tools, code))
    if tag and "<invoke" in text:
        found.extend(_xml_invoke(text, tools, code))
    if _may_hold_special_token(text):
        found.extend(_special_tokens(text, tools, code, found))
    if "_" in text and "default_api." in text:
        found.extend(_tool_code(text, tools, code))
    if _may_hold_json_call(text, tools, code):
        found.extend(_json_objects(text, tools, code, found))
    found.sort(key=lambda f: (f.start, f.end))
    return found
