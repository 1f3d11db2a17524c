"""The flattened-call detectors for templates' tagged and line syntaxes: ChatML, Llama function tags and
python_tag, Harmony, ReAct, bracket markers, XML invoke, Gemini tool_code and tool-call special tokens."""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any, Collection, Iterator

from ._flattened_base import _FENCE, _IDENT, Finding, _CodeRegions, _finding, _plausible
from ._flattened_json import _loads, _raw_decode, call_name

_CHATML = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_QUOTED_NAME = re.compile(r'"name"\s*:\s*"([^"\\]{1,128})"')
_FUNCTION_TAG = re.compile(r"<function=([A-Za-z_][\w.\-]*)>(.*?)(?:</function>|\Z)", re.S)
_PYTHON_TAG = re.compile(r"<\|python_tag\|>[ \t]*(\S[^\n]*)")
_PY_CALL = re.compile(r"([A-Za-z_][\w]*)(?:\.call)?\s*\(")
_HARMONY = re.compile(r"to=functions\.([A-Za-z_][\w.\-]*)")
_HARMONY_TOKENS = ("<|message|>", "<|constrain|>", "<|call|>", "<|channel|>", "<|start|>")
_HARMONY_BODY = re.compile(r"[ \t]*(?:<\|constrain\|>[ \t]*json|(?:json|code)(?=[ \t]*[{<]))?[ \t]*"
                           r"(?:<\|message\|>)?[ \t\n]*\{")
# At a line start, or after a sentence on its line (then only a defined tool counts).
_REACT_ACTION = re.compile(r"(?:^[ \t]*|(?<=[.!?])[ \t]+)(?:\*\*)?Action(?:[ \t]*\d+)?(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*([^\n]*)$", re.M)
_REACT_INPUT = re.compile(r"[ \t]*(?:\*\*)?Action[ _]Input(?:[ \t]*\d+)?(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*([^\n]*)")
_REACT_BRACKET = re.compile(r"([A-Za-z_][\w.\-]*)\[(.*)\]\Z")
_MARKER = re.compile(
    r"\[[ \t]*(?:(calling|called|call|invoking|invoked|using|used|running|ran|executing|executed)[ \t]+)?"
    r"(tool|function)(?:[ _]call)?[ \t]*(?::|->)[ \t]*([A-Za-z_][\w.\-]*)[ \t]*"
    r"(\((?:[^()\n]|\([^()\n]*\))*\)|\{[^\n\]]*\})?[ \t]*\]", re.I)
_MARKER_WITH = re.compile(r"\[(?:Calling|Called|Invoking|Invoked)[ \t]+`?([A-Za-z_][\w.\-]*)`?[ \t]+with[ \t]+"
                          r"[({][^\n]*[)}][ \t]*\]", re.I)
# Every marker opens with "[", blanks, then a verb or "tool"/"function": the first letter of one, in
# either case, or one of the two Turkish i's that re.I matches to "i". Without it neither can match.
_MARKER_LEAD = re.compile(r"\[[ \t]*[CEFIRTUcefirtu\u0130\u0131]")
_XML_INVOKE = re.compile(r"<invoke\s+name=\"([^\"]{1,128})\"\s*>")
_SPECIAL = re.compile(r"\[TOOL_CALLS\]|<\|tool_call\|>|<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>"
                      r"|<｜tool▁calls▁begin｜>|<｜tool▁call▁begin｜>|<start_function_call>")
# Gemini models that fall back to text write ```tool_code\nprint(default_api.get_weather(city="Oslo"))\n```.
_TOOL_CODE = re.compile(r"default_api\.([A-Za-z_]\w*)\s*\(")


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
        after_prose = bool(text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip())
        plausible = (lambda name: name in tools) if after_prose else (lambda name: _plausible(name, tools))
        begin = m.start() + len(m.group()) - len(m.group().lstrip()) if after_prose else m.start()
        bracket = _REACT_BRACKET.match(value)
        if bracket:  # original ReAct: Action: Search[query]
            if plausible(bracket.group(1)):
                yield _finding("react", begin, m.end(), bracket.group(1), tools)
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
                if name is not None and plausible(name):
                    yield _finding("react", begin, fence[1], name, tools)
            continue
        action_input = _REACT_INPUT.match(text, line_start, line_end)
        if action_input is None or not action_input.group(1).strip():
            continue
        if not plausible(value):
            continue
        yield _finding("react", begin, line_end, value, tools)


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


def _may_hold_marker(text: str) -> bool:
    return "[" in text and _MARKER_LEAD.search(text) is not None


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
            # From `print(` when the call is wrapped so, else from `default_api`: prose before it is not the call.
            start = m.start() - 6 if text.endswith("print(", 0, m.start()) else m.start()
            yield _finding("tool_code", start, _line_end(text, m.start()), m.group(1), tools)


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _may_hold_special_token(text: str) -> bool:
    """False when `_SPECIAL` cannot match: each of its alternatives contains one of these."""
    return (("<" in text and ("<|tool_call" in text or "<｜tool▁call" in text or "<start_function_call>" in text))
            or ("_" in text and "[TOOL_CALLS]" in text))


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
