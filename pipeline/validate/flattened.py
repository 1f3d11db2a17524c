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

Spans are character (code point) offsets into the text, end exclusive.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from typing import Any, Collection, Iterator, Literal, NamedTuple

import orjson

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


class Finding(NamedTuple):
    family: str
    start: int
    end: int
    name: str | None  # the called tool, when the syntax names one
    known_tool: bool  # the name is in the conversation's tool list


_IDENT = re.compile(r"[A-Za-z_][\w.\-:]{0,127}\Z")
_ARG_KEYS = ("arguments", "parameters", "args")
# Keys a flattened call object may carry besides its name and arguments.
_CALL_EXTRA_KEYS = frozenset({"id", "type", "call_id", "tool_call_id", "index"})
_CALL_TYPES = frozenset({"function", "function_call", "tool_call", "tool_use", "tool"})

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*$", re.M)
# Inline code within one line: an unmatched backtick then costs one line, not the rest of the text.
_INLINE_CODE = re.compile(r"(`+)(?!`)([^\n]+?)(?<!`)\1(?!`)")

_CHATML = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_QUOTED_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,128})"')
_FUNCTION_TAG = re.compile(r"<function=([A-Za-z_][\w.\-]*)>(.*?)(?:</function>|\Z)", re.S)
_PYTHON_TAG = re.compile(r"<\|python_tag\|>[ \t]*(\S[^\n]*)")
_PY_CALL = re.compile(r"([A-Za-z_][\w]*)(?:\.call)?\s*\(")
_HARMONY = re.compile(r"to=functions\.([A-Za-z_][\w.\-]*)")
_HARMONY_TOKENS = ("<|message|>", "<|constrain|>", "<|call|>", "<|channel|>", "<|start|>")
_HARMONY_BODY = re.compile(r"[ \t]*(?:<\|constrain\|>[ \t]*json|(?:json|code)(?=[ \t]*[{<]))?[ \t]*"
                           r"(?:<\|message\|>)?[ \t\n]*\{")
_REACT_ACTION = re.compile(r"^[ \t]*(?:\*\*)?Action(?:[ \t]*\d+)?(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*([^\n]*)$", re.M)
_REACT_INPUT = re.compile(r"[ \t]*(?:\*\*)?Action[ _]Input(?:[ \t]*\d+)?(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*([^\n]*)")
_REACT_BRACKET = re.compile(r"([A-Za-z_][\w.\-]*)\[(.*)\]\Z")
_MARKER = re.compile(
    r"\[[ \t]*(?:(calling|called|call|invoking|invoked|using|used|running|ran|executing|executed)[ \t]+)?"
    r"(tool|function)(?:[ _]call)?[ \t]*(?::|->)[ \t]*([A-Za-z_][\w.\-]*)[ \t]*"
    r"(\((?:[^()\n]|\([^()\n]*\))*\)|\{[^\n\]]*\})?[ \t]*\]", re.I)
_MARKER_WITH = re.compile(r"\[(?:Calling|Called|Invoking|Invoked)[ \t]+`?([A-Za-z_][\w.\-]*)`?[ \t]+with[ \t]+"
                          r"[({][^\n]*[)}][ \t]*\]", re.I)
_XML_INVOKE = re.compile(r"<invoke\s+name=\"([^\"]{1,128})\"\s*>")
_SPECIAL = re.compile(r"\[TOOL_CALLS\]|<\|tool_call\|>|<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>"
                      r"|<｜tool▁calls▁begin｜>|<｜tool▁call▁begin｜>|<start_function_call>")
# Gemini models that fall back to text write ```tool_code\nprint(default_api.get_weather(city="Oslo"))\n```.
_TOOL_CODE = re.compile(r"default_api\.([A-Za-z_]\w*)\s*\(")
_JSON_START = re.compile(r"^[ \t]*[\[{]", re.M)
_CALL_KEY = re.compile(r'"(?:name|function|action|tool)"\s*:')
# Cheap pre-check: text with none of these cannot hold any family.
_TRIGGERS = ("<tool_call>", "<function=", "<|", "to=functions.", "Action", "{", "[", "<invoke", "<｜",
             "<start_function_call>", "default_api.")

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


def find_flattened(text: str, tools: Collection[str] = ()) -> list[Finding]:
    """Every flattened call in `text`, in order of position. `tools` are the names the conversation
    defines (a set is fastest)."""
    if not any(t in text for t in _TRIGGERS):
        return []
    code = _CodeRegions(text)
    found: list[Finding] = []
    found.extend(_chatml(text, tools, code))
    found.extend(_function_tags(text, tools, code, found))
    found.extend(_python_tag(text, tools, code))
    found.extend(_harmony(text, tools, code))
    found.extend(_react(text, tools, code))
    found.extend(_markers(text, tools, code))
    found.extend(_xml_invoke(text, tools, code))
    found.extend(_special_tokens(text, tools, code, found))
    found.extend(_tool_code(text, tools, code))
    found.extend(_json_objects(text, tools, code, found))
    found.sort(key=lambda f: (f.start, f.end))
    return found


# --- code regions -------------------------------------------------------------------------------

class _CodeRegions:
    """Fenced blocks and inline code spans of markdown, as sorted (start, end) ranges."""

    def __init__(self, text: str):
        self.text = text
        self.fences: list[tuple[int, int]] = []
        open_at: int | None = None
        marker = ""
        for m in _FENCE.finditer(text):
            fence = m.group(1)
            if open_at is None:
                open_at, marker = m.start(), fence
            elif fence[0] == marker[0] and len(fence) >= len(marker) and m.group().strip() == fence:
                self.fences.append((open_at, m.end()))
                open_at = None
        if open_at is not None:
            self.fences.append((open_at, len(text)))
        ranges = list(self.fences)
        if "`" in text:
            for m in _INLINE_CODE.finditer(text):
                if not self._in(self.fences, m.start()):
                    ranges.append((m.start(), m.end()))
        ranges.sort()
        self.ranges = ranges
        self.starts = [r[0] for r in ranges]

    @staticmethod
    def _in(ranges: list[tuple[int, int]], pos: int) -> bool:
        return any(a <= pos < b for a, b in ranges)

    def contains(self, pos: int) -> bool:
        i = bisect_right(self.starts, pos) - 1
        return i >= 0 and pos < self.ranges[i][1]

    def sole_fence_body(self) -> tuple[int, int] | None:
        """When the whole text is one fenced block: the (start, end) of its body."""
        if len(self.fences) != 1:
            return None
        a, b = self.fences[0]
        if self.text[:a].strip() or self.text[b:].strip():
            return None
        body_start = self.text.find("\n", a)
        if body_start < 0:
            return None
        closing = self.text.rfind("\n", body_start, b)
        return body_start + 1, closing if closing > body_start else b


def _plausible(name: str, tools: Collection[str]) -> bool:
    return name in tools if tools else _IDENT.match(name) is not None


def _finding(family: str, start: int, end: int, name: str | None, tools: Collection[str]) -> Finding:
    return Finding(family, start, end, name, name is not None and name in tools)


# --- call-shaped JSON -----------------------------------------------------------------------------

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
    # JSON on its own lines inside prose: only when it calls a defined tool.
    if not tools:
        return
    taken = [(f.start, f.end) for f in found]
    decoded_to = 0  # lines inside an object already decoded are not decoded again
    attempts = 0
    for m in _JSON_START.finditer(text):
        start = m.end() - 1
        if start < decoded_to or code.contains(start) or any(a <= start < b for a, b in taken):
            continue
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
        if name is not None and name in tools and not rest.strip():
            yield _finding(family, start, end, name, tools)


# --- tagged syntaxes ------------------------------------------------------------------------------

def _chatml(text: str, tools: Collection[str], code: _CodeRegions) -> Iterator[Finding]:
    if "<tool_call>" not in text:
        return
    sole = code.sole_fence_body()
    for m in _CHATML.finditer(text):
        in_code = code.contains(m.start())
        body = m.group(1).strip()
        name: str | None = None
        if body.startswith("{"):
            try:
                name, _ = call_name(_loads(body))
            except ValueError:
                quoted = _QUOTED_NAME.search(body)  # malformed JSON the model still meant as a call
                name = quoted.group(1) if quoted and _IDENT.match(quoted.group(1)) else None
        elif body.startswith("<function="):
            tag = _FUNCTION_TAG.match(body)
            name = tag.group(1) if tag else None
        if name is None:
            continue
        if in_code and not (sole and name in tools):
            continue
        yield _finding("chatml", m.start(), m.end(), name, tools)


def _function_tags(text: str, tools: Collection[str], code: _CodeRegions,
                   found: list[Finding]) -> Iterator[Finding]:
    if "<function=" not in text:
        return
    for m in _FUNCTION_TAG.finditer(text):
        if code.contains(m.start()) or any(f.start <= m.start() < f.end for f in found):
            continue
        body = m.group(2).strip()
        # Llama: a JSON object; Qwen3-Coder: <parameter=...> elements.
        if body.startswith("{") or body.startswith("<parameter=") or m.group(0).endswith("</function>"):
            yield _finding("function_tag", m.start(), m.end(), m.group(1), tools)


def _python_tag(text: str, tools: Collection[str], code: _CodeRegions) -> Iterator[Finding]:
    if "<|python_tag|>" not in text:
        return
    for m in _PYTHON_TAG.finditer(text):
        if code.contains(m.start()):
            continue
        body = m.group(1)
        name: str | None = None
        if body.startswith("{"):
            try:
                value, _ = _raw_decode(body, 0)
                name = call_name(value)[0]
            except ValueError:
                quoted = _QUOTED_NAME.search(body)
                name = quoted.group(1) if quoted else None
        else:
            call = _PY_CALL.match(body)
            name = call.group(1) if call else None
        yield _finding("python_tag", m.start(), m.end(), name, tools)


def _harmony(text: str, tools: Collection[str], code: _CodeRegions) -> Iterator[Finding]:
    if "to=functions." not in text:
        return
    for m in _HARMONY.finditer(text):
        if code.contains(m.start()):
            continue
        window = text[max(0, m.start() - 80):m.end() + 80]
        tokens = any(t in window for t in _HARMONY_TOKENS)
        if not tokens and not _HARMONY_BODY.match(text, m.end()):
            continue
        start = text.rfind("<|start|>", max(0, m.start() - 80), m.start())
        start = start if start >= 0 else m.start()
        call_end = text.find("<|call|>", m.end())
        line_end = text.find("\n", m.end())
        if call_end >= 0 and (line_end < 0 or call_end - m.end() < 4000):
            end = call_end + len("<|call|>")
        else:
            end = _json_end(text, m.end()) or (line_end if line_end >= 0 else len(text))
        yield _finding("harmony", start, end, m.group(1), tools)


def _json_end(text: str, pos: int) -> int | None:
    brace = text.find("{", pos)
    if brace < 0 or brace - pos > 40:
        return None
    try:
        return _raw_decode(text, brace)[1]
    except ValueError:
        return None


def _react(text: str, tools: Collection[str], code: _CodeRegions) -> Iterator[Finding]:
    if "Action" not in text:
        return
    for m in _REACT_ACTION.finditer(text):
        if code.contains(m.start(1)):
            continue
        value = m.group(1).strip().strip("`*'\"").strip()
        bracket = _REACT_BRACKET.match(value)
        if bracket:  # original ReAct: Action: Search[query]
            if _plausible(bracket.group(1), tools):
                yield _finding("react", m.start(), m.end(), bracket.group(1), tools)
            continue
        following = _next_nonblank_line(text, m.end())
        if following is None:
            continue
        line_start, line_end = following
        if not value:
            # LangChain structured agents: "Action:" then a fenced {"action", "action_input"} blob.
            fence = _fenced_json_at(text, line_start)
            if fence is not None:
                name, _ = call_name(fence[2])
                if name is not None and _plausible(name, tools):
                    yield _finding("react", m.start(), fence[1], name, tools)
            continue
        action_input = _REACT_INPUT.match(text, line_start, line_end)
        if action_input is None or not action_input.group(1).strip():
            continue
        if not _plausible(value, tools):
            continue
        yield _finding("react", m.start(), line_end, value, tools)


def _next_nonblank_line(text: str, pos: int) -> tuple[int, int] | None:
    while pos < len(text):
        start = pos + 1
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return start, end
        pos = end
    return None


def _fenced_json_at(text: str, pos: int) -> tuple[int, int, Any] | None:
    m = _FENCE.match(text, pos)
    if m is None:
        return None
    close = _FENCE.search(text, m.end())
    if close is None:
        return None
    try:
        return pos, close.end(), _loads(text[m.end():close.start()])
    except ValueError:
        return None


def _markers(text: str, tools: Collection[str], code: _CodeRegions) -> Iterator[Finding]:
    if "[" not in text:
        return
    for m in _MARKER.finditer(text):
        verb, args, name = m.group(1), m.group(4), m.group(3)
        if code.contains(m.start()):
            continue
        # "[Tool: none]" could be a label; a verb, arguments or a defined tool make it a call.
        if (verb or args or name in tools) and _plausible(name, tools):
            yield _finding("marker", m.start(), m.end(), name, tools)
    for m in _MARKER_WITH.finditer(text):
        if not code.contains(m.start()) and _plausible(m.group(1), tools):
            yield _finding("marker", m.start(), m.end(), m.group(1), tools)


def _xml_invoke(text: str, tools: Collection[str], code: _CodeRegions) -> Iterator[Finding]:
    if "<invoke" not in text:
        return
    # Closing tags found once, so that many unclosed openings cost a bisect each, not a scan each.
    closings = [m.start() for m in re.finditer("</invoke>", text)]
    for m in _XML_INVOKE.finditer(text):
        i = bisect_right(closings, m.end() - 1)
        if i == len(closings) or code.contains(m.start()):
            continue
        body = text[m.end():closings[i]]
        if "<parameter" in body or not body.strip():
            start = text.rfind("<function_calls>", max(0, m.start() - 200), m.start())
            start = start if start >= 0 and not text[start:m.start()].count("</function_calls>") else m.start()
            end = closings[i] + len("</invoke>")
            rest = text[end:end + 40]
            if rest.lstrip().startswith("</function_calls>"):
                end += rest.index("</function_calls>") + len("</function_calls>")
            yield _finding("xml_invoke", start, end, m.group(1), tools)


def _tool_code(text: str, tools: Collection[str], code: _CodeRegions) -> Iterator[Finding]:
    """`default_api.NAME(` is Gemini's own call syntax: a call when in a ```tool_code fence, or when the
    whole text is one fence or bare code calling a defined tool."""
    if "default_api." not in text:
        return
    sole = code.sole_fence_body()
    for m in _TOOL_CODE.finditer(text):
        fence = next(((a, b) for a, b in code.fences if a <= m.start() < b), None)
        if fence is not None:
            info = text[fence[0]:_line_end(text, fence[0])].strip().lstrip("`~").strip()
            if info.startswith("tool_code") or (m.group(1) in tools and sole is not None):
                yield _finding("tool_code", fence[0], fence[1], m.group(1), tools)
        elif m.group(1) in tools and not code.contains(m.start()):
            start = text.rfind("\n", 0, m.start()) + 1
            yield _finding("tool_code", start, _line_end(text, m.start()), m.group(1), tools)


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _special_tokens(text: str, tools: Collection[str], code: _CodeRegions,
                    found: list[Finding]) -> Iterator[Finding]:
    for m in _SPECIAL.finditer(text):
        if code.contains(m.start()) or any(f.start <= m.start() < f.end for f in found):
            continue
        line_end = text.find("\n", m.end())
        end = _json_end(text, m.end()) or (line_end if line_end >= 0 else len(text))
        name = None
        if text.startswith(("[", "{"), m.end()):  # Mistral: [TOOL_CALLS][{"name": ..., "arguments": ...}]
            try:
                value, end = _raw_decode(text, m.end())
                name = call_name(value)[0]
            except ValueError:
                pass
        yield _finding("special_token", m.start(), max(end, m.end()), name, tools)
