"""From where blocks landed to tokens: generation regions, spans over the whole text, the loss mask, and the
checks that the mask is what the policy says."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from ..conversation import Conversation
from ..errors import RenderError
from .marks import _Found
from .rendered import MaskPolicy, Span
from .segments import Segmented


class _Region:
    """A run of text the model generates for one assistant message, with its end-of-turn token."""

    __slots__ = ("start", "end", "message", "eot", "reasoning_only")

    def __init__(self, start: int, end: int, message: int, eot: tuple[int, int] | None, reasoning_only: bool = False):
        self.start, self.end, self.message, self.eot = start, end, message, eot
        # A region holding nothing but reasoning (a Harmony analysis message) is untrained as a whole,
        # headers and end token included, when the policy does not train reasoning.
        self.reasoning_only = reasoning_only

    def trained(self, trained: set[int], mask: MaskPolicy) -> bool:
        return self.message in trained and (mask.reasoning or not self.reasoning_only)


def _regions(found: _Found, blocks, pieces, eot_ids: set[int], conv: Conversation) -> list[_Region]:
    eot_pieces = [(s, e) for s, e, token in pieces if token is not None and token in eot_ids]
    points = sorted([(s, e, r.message, r.kind) for s, e, r in blocks if r.message is not None]
                    + [(s, s, r.message, r.kind) for s, r in found.anchors])
    point_starts = [p[0] for p in points]
    eot_starts = [p[0] for p in eot_pieces]
    regions: list[_Region] = []
    if found.regions:
        for start, end in found.regions:
            lo, hi = bisect_right(point_starts, start - 1), bisect_right(point_starts, end)
            # An empty block where the region ends starts the next region (joined answers, in Mistral).
            within = [p for p in points[lo:hi] if p[1] <= end and (p[0] < end or start == end)]
            inside = {p[2] for p in within}
            if len(inside) != 1:
                what = "no message content" if not inside else f"content of several messages {sorted(inside)}"
                raise RenderError(f"a generation region holds {what}", code="render_template_structure")
            message = inside.pop()
            if conv.messages[message].role != "assistant":
                raise RenderError("a generation region holds a non-assistant message",
                                  path=f"$.messages[{message}]", code="render_template_structure")
            last = max((p[1] for p in within), default=start)
            i = bisect_right(eot_starts, end - 1) - 1  # the last end-of-turn token starting in the region
            eot = eot_pieces[i] if i >= 0 and last <= eot_pieces[i][0] and eot_pieces[i][1] <= end else None
            kinds = {p[3] for p in within}
            regions.append(_Region(start, end, message, eot, reasoning_only=kinds == {"reasoning"}))
        return regions
    # No generation markers: an assistant message's region runs from its first block to its last,
    # then to the end-of-turn token right after it (if the tokenizer names one).
    by_message: dict[int, list[int]] = {}
    for s, e, mi, _ in points:
        if conv.messages[mi].role == "assistant":
            span = by_message.setdefault(mi, [s, e])
            span[0], span[1] = min(span[0], s), max(span[1], e)
    for mi, (start, end) in sorted(by_message.items()):
        i = bisect_right(eot_starts, end - 1)
        k = bisect_left(point_starts, end)
        while k < len(points) and points[k][2] == mi:
            k += 1
        next_start = points[k][0] if k < len(points) else None
        eot = eot_pieces[i] if i < len(eot_pieces) and (next_start is None or eot_pieces[i][0] < next_start) else None
        regions.append(_Region(start, eot[1] if eot else end, mi, eot))
    return regions


def _boundaries(text: str, blocks, found: _Found, regions: list[_Region]) -> list[int]:
    """Every character position spans, masks and checks map to tokens: looked up in one pass."""
    out = [0, len(text)]
    for start, end, _ in blocks:
        out += (start, end)
    out += (start for start, _ in found.anchors)
    for g in regions:
        out += (g.start, g.end) if g.eot is None else (g.start, g.end, *g.eot)
    return out


def _spans(text: str, blocks, regions: list[_Region], seg: Segmented) -> list[Span]:
    """Spans covering the whole text: blocks, the end-of-turn tokens, and between them template text:
    `format` inside a generation region (the model writes it), `scaffold` outside."""
    items: list[tuple[int, int, int | None, int | None, str]] = [
        (s, e, r.message, r.block, r.kind) for s, e, r in blocks if e > s]
    items += [(g.eot[0], g.eot[1], g.message, None, "eot") for g in regions if g.eot is not None]
    items.sort()
    region_bounds = sorted((g.start, g.end, g.message) for g in regions)
    region_ends = [g[1] for g in region_bounds]
    # Character runs first, in order; their tokens after, looked up in bulk.
    runs: list[tuple[int, int, int | None, int | None, str]] = []
    add = runs.append

    def gap(a: int, b: int, prev_msg, next_msg) -> None:
        scaffold_msg = prev_msg if prev_msg == next_msg else None
        for k in range(bisect_right(region_ends, a), len(region_bounds)):
            gs, ge, gm = region_bounds[k]
            if gs >= b:
                break
            if gs > a:
                add((a, gs, scaffold_msg, None, "scaffold"))
            fs, fe = max(a, gs), min(b, ge)
            if fe > fs:
                add((fs, fe, gm, None, "format"))
            a = fe
        if b > a:
            add((a, b, scaffold_msg, None, "scaffold"))

    cursor, prev_msg = 0, None
    for item in items:
        gap(cursor, item[0], prev_msg, item[2])
        if item[1] > item[0]:
            add(item)
        cursor, prev_msg = item[1], item[2]
    gap(cursor, len(text), prev_msg, None)
    if not runs:
        return []
    starts, ends, messages, block_ids, kinds = zip(*runs)
    return list(map(Span, _tokens_starting_at(seg, starts), _tokens_starting_at(seg, ends), starts, ends, messages,
                    block_ids, kinds))


def _tokens_starting_at(seg: Segmented, positions) -> list[int]:
    """`seg.first_token_starting_at` of each position: from the table `seg.index` filled (in C), computed
    for any position it lacks."""
    found = list(map((seg.starting or {}).get, positions))
    if None in found:
        found = [seg.first_token_starting_at(p) if t is None else t for p, t in zip(positions, found)]
    return found


def _trained_messages(conv: Conversation, regions: list[_Region], mask: MaskPolicy, blocks=()) -> set[int]:
    # An assistant message whose content was rendered counts even when no generation region holds it:
    # a template that leaves a whole turn unmarked (a call-only turn, say) then fails the mask checks.
    rendered = sorted({g.message for g in regions} | {r.message for _, _, r in blocks if r.message is not None
                                                      and conv.messages[r.message].role == "assistant"})
    if mask.turns == "last":
        rendered = rendered[-1:]
    return {mi for mi in rendered if conv.messages[mi].weight != 0}


def _subtract(ranges: list[tuple[int, int]], cut: tuple[int, int]) -> list[tuple[int, int]]:
    out = []
    for a, b in ranges:
        if cut[1] <= a or cut[0] >= b:
            out.append((a, b))
            continue
        if a < cut[0]:
            out.append((a, cut[0]))
        if cut[1] < b:
            out.append((cut[1], b))
    return out


def _mask(regions: list[_Region], blocks, trained: set[int], mask: MaskPolicy, seg: Segmented) -> bytearray:
    out = bytearray(len(seg.ids))
    reasoning = [(s, e, r.message) for s, e, r in blocks if r.kind == "reasoning"]
    for g in regions:
        if not g.trained(trained, mask):
            continue
        ranges = [(g.start, g.end)]
        if not mask.eot and g.eot is not None:
            ranges = _subtract(ranges, g.eot)
        if not mask.reasoning:
            for s, e, mi in reasoning:
                if mi == g.message:
                    ranges = _subtract(ranges, (s, e))
        for a, b in ranges:
            ta, tb = seg.overlapping(a, b)
            out[ta:tb] = b"\x01" * (tb - ta)
    return out


def _check_mask(loss_mask: bytearray, blocks, regions: list[_Region], trained: set[int], mask: MaskPolicy,
                seg: Segmented, spans: list[Span]) -> None:
    """The mask is checked, not trusted: a template with misplaced generation markers (or a bug here)
    fails with the location instead of silently training on the wrong tokens."""

    def fail(what: str, path: str) -> None:
        raise RenderError(what, path=path, code="render_mask")

    for s, e, ref in blocks:
        if e <= s:
            continue
        trained_block = ref.message in trained and ref.kind in ("text", "tool_call", "reasoning")
        if ref.kind == "reasoning" and not mask.reasoning:
            trained_block = False
        if trained_block:
            ta, tb = seg.overlapping(s, e)
            if loss_mask.find(0, ta, tb) >= 0:
                fail(f"{ref.kind} tokens of a trained turn are masked", ref.path)
        elif ref.kind == "tool_result":
            ta, tb = seg.overlapping(s, e)
            if loss_mask.find(1, ta, tb) >= 0:
                fail("tool result tokens are trained", ref.path)
        else:
            ta, tb = seg.inside(s, e)
            if loss_mask.find(1, ta, tb) >= 0:
                fail(f"{ref.kind} tokens outside a trained turn are trained", ref.path)
    for g in regions:
        if g.eot is None:
            continue
        ta, tb = seg.overlapping(*g.eot)
        want = g.trained(trained, mask) and mask.eot
        if loss_mask.find(0 if want else 1, ta, tb) >= 0:
            fail(f"end-of-turn token {'masked' if want else 'trained'} against the policy", f"$.messages[{g.message}]")
    for span in spans:
        if span.kind == "scaffold":
            ta, tb = seg.inside(span.char_start, span.char_end)
            if loss_mask.find(1, ta, tb) >= 0:
                fail(f"template scaffolding is trained (characters {span.char_start}..{span.char_end})", "$")
