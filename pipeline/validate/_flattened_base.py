"""What every flattened-call detector shares: the `Finding` it yields, the markdown code regions it
skips, and whether a name is plausibly a call."""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import cached_property
from typing import Collection, NamedTuple


class Finding(NamedTuple):
    family: str
    start: int
    end: int
    name: str | None  # the called tool, when the syntax names one
    known_tool: bool  # the name is in the conversation's tool list


_IDENT = re.compile(r"[A-Za-z_][\w.\-:]{0,127}\Z")

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*$", re.M)
# Inline code within one line: an unmatched backtick then costs one line, not the rest of the text.
_INLINE_CODE = re.compile(r"(`+)(?!`)([^\n]+?)(?<!`)\1(?!`)")


# --- code regions -------------------------------------------------------------------------------

def _fences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each fenced block; one left open runs to the end of the text."""
    fences: list[tuple[int, int]] = []
    open_at: int | None = None
    marker = ""
    for m in _FENCE.finditer(text):
        fence = m.group(1)
        if open_at is None:
            open_at, marker = m.start(), fence
        elif fence[0] == marker[0] and len(fence) >= len(marker) and m.group().strip() == fence:
            fences.append((open_at, m.end()))
            open_at = None
    if open_at is not None:
        fences.append((open_at, len(text)))
    return fences


class _CodeRegions:
    """Fenced blocks and inline code spans of markdown, as sorted (start, end) ranges. Found when first
    asked for: most texts reach no detector that asks."""

    def __init__(self, text: str):
        self.text = text

    @cached_property
    def fences(self) -> list[tuple[int, int]]:
        text = self.text
        # A fence line holds ``` or ~~~; without one, the line-anchored scan (it tries every position)
        # cannot match. A one-character `in` first: a memchr, many times faster.
        fenced = ("`" in text and "```" in text) or ("~" in text and "~~~" in text)
        return _fences(text) if fenced else []

    @cached_property
    def ranges(self) -> list[tuple[int, int]]:
        ranges = list(self.fences)
        if "`" in self.text:
            for m in _INLINE_CODE.finditer(self.text):
                if not self._in(self.fences, m.start()):
                    ranges.append((m.start(), m.end()))
        ranges.sort()
        return ranges

    @cached_property
    def starts(self) -> list[int]:
        return [r[0] for r in self.ranges]

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
