"""The sentinels: private-use characters around every block of a template's inputs, and finding them in
what the template rendered (the text without them, and where each block and generation region landed).

Each marked piece gets an open and a close character from the supplementary private-use planes
(U+F0000..U+10FFFD); two more mark `{% generation %}` regions. Nothing a template does with a plain string
(concatenation, `tojson` quoting with ensure_ascii=False) disturbs them, and the renderer checks that
each appears exactly once, in order.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, NamedTuple

import numpy as np

from ..errors import RenderError

GEN_OPEN = "\U000F0000"
GEN_CLOSE = "\U000F0001"
MARK_RE = re.compile("[\U000F0000-\U000FFFFD\U00100000-\U0010FFFD]")
_PLANE = 0xFFFE  # usable code points per private-use plane
_PLANE_PAIRS = (_PLANE - 2) // 2  # pairs 0.. whose open and close (2 + 2i, 3 + 2i) are both in plane 15


def mark_char(index: int) -> str:
    if index < _PLANE:
        return chr(0xF0000 + index)
    if index < 2 * _PLANE:
        return chr(0x100000 + index - _PLANE)
    raise RenderError("conversation too large to mark (more than 65,000 rendered pieces)", code="render_too_large")


def mark_index(char: str) -> int:
    code = ord(char)
    return code - 0xF0000 if code < 0x100000 else code - 0x100000 + _PLANE


SpanKind = Literal["system", "developer", "tools", "text", "tool_call", "tool_result", "reasoning", "media",
                   "scaffold", "format", "eot"]


class BlockRef(NamedTuple):
    """A block of the canonical conversation. `message` is None for system/developer/tool blocks,
    whose `block` indexes conv.system, conv.developer or conv.tools (told apart by `kind`)."""

    kind: SpanKind
    message: int | None
    block: int | None
    path: str


class _MarkedDict(dict):
    """A dict whose `tojson` output the renderer can find (the `tojson` filter adds the sentinels). It
    carries its JSON text too: dumped once to check it for sentinels, reused by `tojson`."""

    __slots__ = ("sftprep_marks", "sftprep_json")


# json.dumps(value, ensure_ascii=False), without building an encoder per call.
_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _has_marks(text: str) -> bool:
    # ASCII strings (most) are known to be ASCII without a scan.
    return not text.isascii() and MARK_RE.search(text) is not None


class Marks:
    """Allocates sentinel pairs; `refs[i]` is the block of pair i. Disabled, it returns values unchanged
    (used to render the same inputs without sentinels and compare)."""

    def __init__(self, enabled: bool = True, *, edges_outside: bool = False) -> None:
        self.enabled = enabled
        # Whitespace at a text's edges outside its sentinels: a template that trims content (Llama's
        # `| trim`) then trims the same characters with and without them.
        self.edges_outside = edges_outside
        self.refs: list[BlockRef] = []
        # Pairs a template may write again as a reference (a call's name in its result's header, as
        # gpt-oss does): the first place is the block's; content written twice is still an error.
        self.repeatable: set[int] = set()

    def _pair(self, ref: BlockRef) -> tuple[str, str]:
        i = len(self.refs)
        self.refs.append(ref)
        if i < _PLANE_PAIRS:  # both in the first plane (mark_char, without two calls)
            code = 0xF0002 + 2 * i
            return chr(code), chr(code + 1)
        return mark_char(2 + 2 * i), mark_char(3 + 2 * i)

    def text(self, value: str, ref: BlockRef, *, anchor: bool = False, repeatable: bool = False) -> str:
        """`value` wrapped in a sentinel pair. Empty strings stay empty (templates test truthiness)
        unless `anchor`: then an empty pair still shows where the block went."""
        if not self.enabled or (not value and not anchor):
            return value
        if not value.isascii() and MARK_RE.search(value) is not None:  # _has_marks, inline: once per block
            raise RenderError("text holds supplementary private-use characters (U+F0000..U+10FFFD), which the "
                              "renderer uses as span markers", path=ref.path, code="render_private_use")
        refs = self.refs
        i = len(refs)
        if repeatable:
            self.repeatable.add(i)
        if i < _PLANE_PAIRS:  # self._pair(ref), inline: once per marked piece
            refs.append(ref)
            start, end = chr(0xF0002 + 2 * i), chr(0xF0003 + 2 * i)
        else:
            start, end = self._pair(ref)
        if self.edges_outside:
            core = value.strip()
            if core != value:
                lead = value[: len(value) - len(value.lstrip())]
                return lead + start + core + end + value[len(lead) + len(core):]
        return start + value + end

    def json(self, value: dict, ref: BlockRef) -> dict:
        if not self.enabled:
            return value
        marked = _MarkedDict(value)
        i = len(self.refs)
        if i < _PLANE_PAIRS:  # self._pair(ref), inline, as in `text`
            self.refs.append(ref)
            marked.sftprep_marks = chr(0xF0002 + 2 * i), chr(0xF0003 + 2 * i)
        else:
            marked.sftprep_marks = self._pair(ref)
        text = getattr(value, "sftprep_json", None)  # a tool definition from the cache: dumped and checked
        if text is None:
            text = _dumps(value)
            if _has_marks(text):
                raise RenderError("JSON holds supplementary private-use characters (U+F0000..U+10FFFD), which the "
                                  "renderer uses as span markers", path=ref.path, code="render_private_use")
        marked.sftprep_json = text
        return marked


def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
           sort_keys: bool = False) -> str:
    """transformers' `tojson` (json.dumps, non-ASCII kept, `indent` honoured), plus sentinels."""
    marks = getattr(value, "sftprep_marks", None)
    if marks is None:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    if ensure_ascii or indent is not None or separators is not None or sort_keys:
        out = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    else:
        out = value.sftprep_json  # what json.dumps gives with these arguments
    return marks[0] + out + marks[1]


# --- finding them in the rendered text --------------------------------------------------------------

class _Found:
    """Where sentinels landed in the stripped text."""

    def __init__(self) -> None:
        self.blocks: dict[tuple, tuple[int, int, BlockRef]] = {}  # (kind, message, block) -> span
        self.anchors: list[tuple[int, BlockRef]] = []  # empty marked content (an empty turn)
        self.regions: list[tuple[int, int]] = []  # generation regions
        self.dropped: list[BlockRef] = []  # pieces a user template did not render (lenient only)
        # Each marked piece alone (a call's name, its arguments), where `blocks` spans all of a block.
        self.pieces: list[tuple[int, int, BlockRef]] = []


def _sentinels(raw: str) -> tuple[str, zip]:
    """The text without sentinel characters, and (sentinel index, position in that text) of each, in
    order. Vectorized over the code points: a regex scan of a long rendered text costs more than the
    rest of the render."""
    if raw.isascii():
        return raw, zip((), ())
    codes = np.frombuffer(raw.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    # Sentinels: U+F0000..U+FFFFD and U+100000..U+10FFFD (as MARK_RE), indexed plane 15 first. Found
    # among the code points >= U+F0000 (few), not by a second pass over all of them.
    at = np.flatnonzero(codes >= 0xF0000)
    if len(at):
        chars = codes[at]
        sentinel = (chars & 0xFFFF) <= 0xFFFD
        if not sentinel.all():  # U+FFFFE/F, U+10FFFE/F: noncharacters, kept as text
            at, chars = at[sentinel], chars[sentinel]
    if not len(at):
        return raw, zip((), ())
    chars = chars.astype(np.int64)
    index = np.where(chars < 0x100000, chars - 0xF0000, chars - 0x100000 + _PLANE)
    # The text between the sentinels, sliced from the str itself: fewer instructions than compressing
    # the code points and decoding them (callgrind: 84 against 98 million on 100 rendered agent logs).
    cuts = at.tolist()
    text = "".join(map(raw.__getitem__, map(slice, [0, *(cut + 1 for cut in cuts)], [*cuts, len(raw)])))
    return text, zip(index.tolist(), (at - np.arange(len(at))).tolist())


def _strip(raw: str, refs: list[BlockRef], *, lenient: bool = False,
           repeatable: set[int] | frozenset[int] = frozenset()) -> tuple[str, _Found]:
    """A `repeatable` piece rendered again counts where it first appeared. With `lenient` (user
    templates), a piece not rendered is listed in `found.dropped` for the ledger instead of failing."""
    found = _Found()
    opened: list[int] = [-1] * len(refs)
    closed: list[int] = [-1] * len(refs)
    gen_start: int | None = None
    text, sentinels = _sentinels(raw)
    blocks = found.blocks
    count = len(refs)
    for index, pos in sentinels:
        if index > 1:
            pair = (index - 2) >> 1  # index 2 + 2i opens pair i, 3 + 2i closes it
            if pair >= count:
                raise RenderError("the template emits private-use characters U+F0000..U+10FFFD, which the renderer "
                                  "reserves", code="render_private_use")
            seen = closed if index & 1 else opened
            if seen[pair] != -1:
                if pair in repeatable:
                    continue
                raise RenderError(f"the template rendered this {refs[pair].kind} twice", path=refs[pair].path,
                                  code="render_duplicated")
            seen[pair] = pos
        elif index == 0:
            if gen_start is not None:
                raise RenderError("nested {% generation %} regions", code="render_template_structure")
            gen_start = pos
        else:
            if gen_start is None:
                raise RenderError("{% endgeneration %} without a start", code="render_template_structure")
            found.regions.append((gen_start, pos))
            gen_start = None
    for start, end, ref in zip(opened, closed, refs):
        if lenient and start == -1 and end == -1:
            found.dropped.append(ref)
            continue
        if start == -1 or end == -1 or end < start:
            raise RenderError(f"the template dropped this {ref.kind} (its content is not in the output)",
                              path=ref.path, code="render_dropped")
        if ref.block is None and ref.message is not None:
            found.anchors.append((start, ref))
            continue
        found.pieces.append((start, end, ref))
        key = ref[:3]  # (kind, message, block)
        known = blocks.get(key)
        if known is not None:  # several marked pieces of one block (a call's name and arguments)
            s0, e0, _ = known
            start, end = min(start, s0), max(end, e0)
        blocks[key] = (start, end, ref)
    return text, found


def _ordered_blocks(found: _Found) -> list[tuple[int, int, BlockRef]]:
    blocks = sorted(found.blocks.values(), key=lambda b: (b[0], b[1]))
    for (s0, e0, r0), (s1, e1, r1) in zip(blocks, blocks[1:]):
        if s1 < e0:
            raise RenderError(f"the template interleaved two blocks ({r0.path} and {r1.path})", path=r1.path,
                              code="render_template_structure")
    return blocks
