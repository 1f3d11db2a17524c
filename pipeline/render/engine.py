"""The render core: a canonical Conversation, a chat template and a tokenizer in; text, token ids, a
checked per-token loss mask and spans out.

How: the conversation becomes the template's inputs with sentinel characters around every block
(`_inputs`); the template runs in a sandboxed Jinja environment configured as transformers configures
it, its `{% generation %}` regions wrapped in two more sentinels; stripping the sentinels gives the text
and the character span of every block and generation region. The text is split at added tokens and
each piece tokenized on its own (identical ids to the whole text, and repeated pieces are cached);
character spans become token spans through per-piece offsets, so nothing loops over tokens in Python.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Literal

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
import msgspec
import numpy as np
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..conversation import Conversation
from ..errors import ConfigError, RenderError
from ..ledger import Ledger, LedgerEntry
from ._inputs import (GEN_CLOSE, GEN_OPEN, MARK_RE, _PLANE, BlockRef, InputPolicy, Marks, TemplateInputs,
                      build_inputs, tojson)
from .tokenizers import Segmented, Tokenizer

from ..resources import TEMPLATES_DIR  # noqa: E402

# A pinned "today" for templates that print a date (Llama 3.x, gpt-oss): renders are reproducible.
DEFAULT_NOW = datetime(2024, 7, 26)


# --- options and results ---------------------------------------------------------------------------

class MaskPolicy(msgspec.Struct, frozen=True):
    """Which tokens are trained. `turns`: every assistant turn, or the last one only. A message with
    `weight == 0` is never trained. Everything else (prompts, tool results, scaffolding) never is."""

    turns: Literal["all", "last"] = "all"
    reasoning: bool = True  # train the reasoning of trained turns
    eot: bool = True  # train the end-of-turn token of trained turns

    @classmethod
    def parse(cls, spec: str) -> "MaskPolicy":
        """`all`, `last`, optionally followed by `,no-reasoning` and/or `,no-eot`."""
        words = [w.strip() for w in spec.split(",") if w.strip()]
        turns = words[0] if words else "all"
        flags = set(words[1:])
        valid_flags = {"no-reasoning", "no-eot", "reasoning", "eot"}
        if turns not in ("all", "last") or not flags <= valid_flags:
            raise ConfigError(f"unknown mask policy '{spec}'; valid: all or last, then optionally ,no-reasoning "
                              "and ,no-eot (e.g. 'last,no-eot')", code="unknown_mask_policy")
        return cls(turns=turns, reasoning="no-reasoning" not in flags, eot="no-eot" not in flags)  # type: ignore[arg-type]


class RenderOptions(msgspec.Struct, frozen=True):
    now: datetime = DEFAULT_NOW  # what `strftime_now` and `date_string` show
    add_generation_prompt: bool = False
    strict: bool = False  # any ledger entry is an error
    check: bool = True  # run the mask checks (errors name the message and block)
    # Also render without sentinels and require the same text: catches templates that inspect
    # content (`if content.startswith(...)`). None: on for user templates, off for built-ins.
    verify_marks: bool | None = None
    template_kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    # For families that render one call per assistant turn and no text beside it (llama3): "split" the
    # turn into consecutive turns, "drop-text" beside calls as the official template does, or "refuse".
    # Each is ledgered; families that carry any turn ignore it.
    calls: Literal["split", "drop-text", "refuse"] = "split"


class Span(msgspec.Struct, frozen=True, array_like=True):
    """A run of the rendered text tied to its source. Token ranges partition the tokens (a token belongs
    to the span holding its first character); character ranges partition the text."""

    token_start: int
    token_end: int
    char_start: int
    char_end: int
    message: int | None
    block: int | None
    kind: str


class Rendered(msgspec.Struct, frozen=True):
    template: str
    tokenizer: str
    text: str
    input_ids: list[int]
    loss_mask: list[int]
    spans: tuple[Span, ...]
    ledger: tuple[LedgerEntry, ...]


# --- families and templates -----------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """What a built-in template family knows beyond its Jinja file: what it can carry (the input
    policy), its end-of-turn tokens, the tokens it needs, and how to parse its token stream back."""

    name: str
    policy: InputPolicy
    template_file: str | None = None  # under templates/
    eot_tokens: tuple[str, ...] = ()
    required_tokens: tuple[str, ...] = ()
    parse_back: Callable[[str], Conversation] | None = None
    # A family may replace the generic conversion (e.g. one Harmony message per call).
    build_inputs: Callable[[Conversation, Marks, Ledger, InputPolicy], TemplateInputs] | None = None
    default_tokenizer: str | None = None
    # A family may read render options into its input policy (llama3: the `calls` policy).
    configure: Callable[[InputPolicy, RenderOptions], InputPolicy] | None = None
    # A family that restructures turns (llama3 splits them) says what parse-back must equal: the
    # conversation with the ledger's dropped parts removed and the restructuring applied.
    expected: Callable[[Conversation, tuple[LedgerEntry, ...]], Conversation] | None = None
    # Template variables the family sets (harmony: its style), before RenderOptions.template_kwargs.
    template_vars: tuple[tuple[str, Any], ...] = ()

    def inputs(self, conv: Conversation, marks: Marks, ledger: Ledger,
               options: RenderOptions | None = None) -> TemplateInputs:
        policy = self.policy
        if options is not None and self.configure is not None:
            policy = self.configure(policy, options)
        return (self.build_inputs or build_inputs)(conv, marks, ledger, policy)


CUSTOM = Family(name="custom", policy=InputPolicy(target="custom template", reasoning="field", developer="system"))


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}`: wraps what the body renders in two sentinels."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_wrap"), [], [], body).set_lineno(lineno)

    def _wrap(self, caller):
        return GEN_OPEN + caller() + GEN_CLOSE


class _TemplateDict:
    # `dict(...)` for templates, without exposing the type itself (as transformers does).
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    # Namespaces refuse underscore names, which lead to CPython internals.
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"templates cannot set underscore attributes ({name!r})")


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt):
    return DEFAULT_NOW.strftime(fmt)


def make_environment() -> ImmutableSandboxedEnvironment:
    """A sandbox configured as transformers' apply_chat_template configures it."""
    return _configured(ImmutableSandboxedEnvironment)


def _configured(env_class: type[jinja2.Environment]) -> jinja2.Environment:
    env = env_class(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _Namespace
    return env


_ENV = make_environment()
_DICT_ATTRIBUTES = frozenset(dir(dict))


class _TrustedEnvironment(jinja2.Environment):
    """`message.role` on a dict: Jinja tries the attribute first, which raises, then the item. For a
    name no dict attribute has, the item alone gives the same answer without the exception."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


# The built-in templates (files of this project) are trusted code: rendered without the sandbox's checks
# on every attribute access and call, which cost a fifth of their render time. Same output; user
# templates always run sandboxed.
_TRUSTED_ENV = _configured(_TrustedEnvironment)


@dataclass(frozen=True, eq=False)
class Template:
    name: str
    source: str
    family: Family
    builtin: bool
    compiled: jinja2.Template = field(repr=False)

    @classmethod
    def compile(cls, name: str, source: str, family: Family = CUSTOM, builtin: bool = False) -> "Template":
        try:
            compiled = (_TRUSTED_ENV if builtin else _ENV).from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"template '{name}' does not compile: {exc.message} (line {exc.lineno})",
                              code="bad_template") from None
        return cls(name=name, source=source, family=family, builtin=builtin, compiled=compiled)

    @classmethod
    def from_family(cls, family: Family) -> "Template":
        assert family.template_file is not None
        path = TEMPLATES_DIR / family.template_file
        return cls.compile(family.name, path.read_text(encoding="utf-8"), family, builtin=True)

    def render_raw(self, inputs: TemplateInputs, tokenizer: Tokenizer | None, options: RenderOptions) -> str:
        """The template's output, sentinels included. Template failures become RenderError."""
        now = options.now
        variables: dict[str, Any] = dict(tokenizer.special_tokens_map) if tokenizer is not None else {}
        variables.update(messages=inputs.messages, tools=inputs.tools, documents=None,
                         add_generation_prompt=options.add_generation_prompt,
                         strftime_now=lambda fmt: now.strftime(fmt), date_string=now.strftime("%d %b %Y"))
        variables.update(self.family.template_vars)
        variables.update(options.template_kwargs)
        try:
            return self.compiled.render(**variables)
        except jinja2.exceptions.SecurityError as exc:
            raise RenderError(f"template '{self.name}' tried something the sandbox forbids: {exc}",
                              code="template_security") from None
        except jinja2.exceptions.TemplateError as exc:
            raise RenderError(f"template '{self.name}' raised: {exc}", code="template_error") from None
        except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
            raise RenderError(f"template '{self.name}' failed: {type(exc).__name__}: {exc}",
                              code="template_error") from None


# --- rendering ------------------------------------------------------------------------------------

class _Found:
    """Where sentinels landed in the stripped text."""

    def __init__(self) -> None:
        self.blocks: dict[tuple, tuple[int, int, BlockRef]] = {}  # (kind, message, block) -> span
        self.anchors: list[tuple[int, BlockRef]] = []  # empty marked content (an empty turn)
        self.regions: list[tuple[int, int]] = []  # generation regions


def _sentinels(raw: str) -> tuple[str, zip]:
    """The text without sentinel characters, and (sentinel index, position in that text) of each, in
    order. Vectorized over the code points: a regex scan of a long rendered text costs more than the
    rest of the render."""
    if raw.isascii():
        return raw, zip((), ())
    codes = np.frombuffer(raw.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    # Sentinels: U+F0000..U+FFFFD and U+100000..U+10FFFD (as MARK_RE), indexed plane 15 first.
    at = np.flatnonzero((codes >= 0xF0000) & ((codes & 0xFFFF) <= 0xFFFD))
    if not len(at):
        return raw, zip((), ())
    chars = codes[at].astype(np.int64)
    index = np.where(chars < 0x100000, chars - 0xF0000, chars - 0x100000 + _PLANE)
    text = np.delete(codes, at).tobytes().decode("utf-32-le", "surrogatepass")
    return text, zip(index.tolist(), (at - np.arange(len(at))).tolist())


def _strip(raw: str, refs: list[BlockRef]) -> tuple[str, _Found]:
    found = _Found()
    opened: list[int] = [-1] * len(refs)
    closed: list[int] = [-1] * len(refs)
    gen_start: int | None = None
    text, sentinels = _sentinels(raw)
    for index, pos in sentinels:
        if index == 0:
            if gen_start is not None:
                raise RenderError("nested {% generation %} regions", code="render_template_structure")
            gen_start = pos
        elif index == 1:
            if gen_start is None:
                raise RenderError("{% endgeneration %} without a start", code="render_template_structure")
            found.regions.append((gen_start, pos))
            gen_start = None
        else:
            pair, is_close = divmod(index - 2, 2)
            if pair >= len(refs):
                raise RenderError("the template emits private-use characters U+F0000..U+10FFFD, which the renderer "
                                  "reserves", code="render_private_use")
            seen = closed if is_close else opened
            if seen[pair] != -1:
                raise RenderError(f"the template rendered this {refs[pair].kind} twice", path=refs[pair].path,
                                  code="render_duplicated")
            seen[pair] = pos
    for pair, ref in enumerate(refs):
        start, end = opened[pair], closed[pair]
        if start == -1 or end == -1 or end < start:
            raise RenderError(f"the template dropped this {ref.kind} (its content is not in the output)",
                              path=ref.path, code="render_dropped")
        if ref.block is None and ref.message is not None:
            found.anchors.append((start, ref))
            continue
        key = (ref.kind, ref.message, ref.block)
        if key in found.blocks:  # several marked pieces of one block (a call's name and arguments)
            s0, e0, _ = found.blocks[key]
            start, end = min(start, s0), max(end, e0)
        found.blocks[key] = (start, end, ref)
    return text, found


def _ordered_blocks(found: _Found) -> list[tuple[int, int, BlockRef]]:
    blocks = sorted(found.blocks.values(), key=lambda b: (b[0], b[1]))
    for (s0, e0, r0), (s1, e1, r1) in zip(blocks, blocks[1:]):
        if s1 < e0:
            raise RenderError(f"the template interleaved two blocks ({r0.path} and {r1.path})", path=r1.path,
                              code="render_template_structure")
    return blocks


def render(conv: Conversation, template: Template, tokenizer: Tokenizer, *, mask: MaskPolicy = MaskPolicy(),
           options: RenderOptions = RenderOptions()) -> Rendered:
    """Render one conversation. Raises RenderError (with the block's path) when the template cannot
    carry it faithfully or the mask checks fail; ledger entries record declared losses."""
    return render_buffers(conv, template, tokenizer, mask=mask, options=options)[0]


def render_buffers(conv: Conversation, template: Template, tokenizer: Tokenizer, *, mask: MaskPolicy = MaskPolicy(),
                   options: RenderOptions = RenderOptions()) -> tuple[Rendered, bytes, bytes]:
    """`render`, plus its ids as little-endian int32 and its mask as int8 bytes: what a writer stores,
    without a Python int per token."""
    family = template.family
    _check_required_tokens(template, tokenizer)
    ledger = Ledger(template.name, strict=options.strict)
    marks = Marks()
    inputs = family.inputs(conv, marks, ledger, options)
    raw = template.render_raw(inputs, tokenizer, options)
    verify = options.verify_marks if options.verify_marks is not None else not template.builtin
    if verify:
        plain = template.render_raw(family.inputs(conv, Marks(enabled=False), Ledger(template.name), options),
                                    tokenizer, options)
        if MARK_RE.sub("", plain) != MARK_RE.sub("", raw):
            raise RenderError(f"template '{template.name}' renders differently once blocks are marked (it inspects "
                              "message content), so spans cannot be located", code="render_marking")
    text, found = _strip(raw, marks.refs)
    blocks = _ordered_blocks(found)
    encoder = tokenizer.segment_encoder
    pieces = encoder.split(text)
    _check_added_tokens_in_content(pieces, blocks, tokenizer)
    seg = encoder.encode(text, pieces)
    eot_ids = {tid for tid in (tokenizer.token_id(t) for t in _eot_tokens(family, tokenizer)) if tid is not None}
    regions = _regions(found, blocks, pieces, eot_ids, conv)
    seg.index(_boundaries(text, blocks, found, regions))
    spans = _spans(text, blocks, regions, seg)
    trained = _trained_messages(conv, regions, mask, blocks)
    loss_mask = _mask(regions, blocks, trained, mask, seg)
    if options.check:
        _check_mask(loss_mask, blocks, regions, trained, mask, seg, spans)
    rendered = Rendered(template=template.name, tokenizer=tokenizer.name, text=text, input_ids=seg.ids,
                        loss_mask=list(loss_mask), spans=tuple(spans), ledger=tuple(ledger.entries))
    return rendered, seg.buffer, bytes(loss_mask)


def _check_required_tokens(template: Template, tokenizer: Tokenizer) -> None:
    missing = [t for t in template.family.required_tokens if t not in tokenizer.added_tokens]
    if missing:
        raise ConfigError(f"tokenizer '{tokenizer.name}' lacks {', '.join(missing)}, which template "
                          f"'{template.name}' needs", code="tokenizer_mismatch")


def _eot_tokens(family: Family, tokenizer: Tokenizer) -> tuple[str, ...]:
    if family.eot_tokens:
        return family.eot_tokens
    return (tokenizer.eos_token,) if tokenizer.eos_token else ()


def _check_added_tokens_in_content(pieces, blocks, tokenizer: Tokenizer) -> None:
    """Text that spells a special token would be tokenized as template structure: a user turn could
    close itself, a text could become a tool call. Refuse it, naming the block."""
    if not blocks:
        return
    starts = [b[0] for b in blocks]
    for start, end, token in pieces:
        if token is None:
            continue
        i = bisect_right(starts, start) - 1
        if i >= 0 and start < blocks[i][1]:
            content = tokenizer.backend.id_to_token(token)
            raise RenderError(f"content spells the special token {content}, which would be read as template "
                              "structure", path=blocks[i][2].path, code="render_special_token")


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
            inside = {p[2] for p in points[lo:hi] if p[1] <= end}
            if len(inside) != 1:
                what = "no message content" if not inside else f"content of several messages {sorted(inside)}"
                raise RenderError(f"a generation region holds {what}", code="render_template_structure")
            message = inside.pop()
            if conv.messages[message].role != "assistant":
                raise RenderError("a generation region holds a non-assistant message",
                                  path=f"$.messages[{message}]", code="render_template_structure")
            last = max((p[1] for p in points[lo:hi]), default=start)
            i = bisect_right(eot_starts, end - 1) - 1  # the last end-of-turn token starting in the region
            eot = eot_pieces[i] if i >= 0 and last <= eot_pieces[i][0] and eot_pieces[i][1] <= end else None
            kinds = {p[3] for p in points[lo:hi] if p[1] <= end}
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
    out: list[Span] = []

    def emit(a: int, b: int, message, block, kind) -> None:
        if b > a:
            out.append(Span(seg.first_token_starting_at(a), seg.first_token_starting_at(b), a, b, message, block, kind))

    def gap(a: int, b: int, prev_msg, next_msg) -> None:
        scaffold_msg = prev_msg if prev_msg == next_msg else None
        for k in range(bisect_right(region_ends, a), len(region_bounds)):
            gs, ge, gm = region_bounds[k]
            if gs >= b:
                break
            emit(a, max(a, gs), scaffold_msg, None, "scaffold")
            emit(max(a, gs), min(b, ge), gm, None, "format")
            a = min(b, ge)
        emit(a, b, scaffold_msg, None, "scaffold")

    cursor, prev_msg = 0, None
    for s, e, message, block, kind in items:
        gap(cursor, s, prev_msg, message)
        emit(s, e, message, block, kind)
        cursor, prev_msg = e, message
    gap(cursor, len(text), prev_msg, None)
    return out


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
            if b"\x00" in loss_mask[ta:tb]:
                fail(f"{ref.kind} tokens of a trained turn are masked", ref.path)
        elif ref.kind == "tool_result":
            ta, tb = seg.overlapping(s, e)
            if b"\x01" in loss_mask[ta:tb]:
                fail("tool result tokens are trained", ref.path)
        else:
            ta, tb = seg.inside(s, e)
            if b"\x01" in loss_mask[ta:tb]:
                fail(f"{ref.kind} tokens outside a trained turn are trained", ref.path)
    for g in regions:
        if g.eot is None:
            continue
        ta, tb = seg.overlapping(*g.eot)
        want = g.trained(trained, mask) and mask.eot
        if (b"\x00" if want else b"\x01") in loss_mask[ta:tb]:
            fail(f"end-of-turn token {'masked' if want else 'trained'} against the policy", f"$.messages[{g.message}]")
    for span in spans:
        if span.kind == "scaffold":
            ta, tb = seg.inside(span.char_start, span.char_end)
            if b"\x01" in loss_mask[ta:tb]:
                fail(f"template scaffolding is trained (characters {span.char_start}..{span.char_end})", "$")


# --- views ------------------------------------------------------------------------------------------

def mask_view(rendered: Rendered, tokenizer: Tokenizer, open_mark: str = "⟦", close_mark: str = "⟧") -> str:
    """The rendered text with trained token runs wrapped in visible markers (for goldens and debugging)."""
    encoding = tokenizer.backend.encode(rendered.text, add_special_tokens=False)
    if encoding.ids != rendered.input_ids:
        raise RenderError("rendered ids differ from tokenizing the rendered text", code="render_ids")
    offsets = encoding.offsets
    out, pos, i, n = [], 0, 0, len(rendered.loss_mask)
    while i < n:
        if not rendered.loss_mask[i]:
            i += 1
            continue
        j = i
        while j < n and rendered.loss_mask[j]:
            j += 1
        start, end = max(pos, offsets[i][0]), offsets[j - 1][1]
        out.append(rendered.text[pos:start] + open_mark + rendered.text[start:end] + close_mark)
        pos, i = end, j
    out.append(rendered.text[pos:])
    return "".join(out)


def spans_json(rendered: Rendered) -> list[dict[str, Any]]:
    return [{"start": s.token_start, "end": s.token_end, "char_start": s.char_start, "char_end": s.char_end,
             "message": s.message, "block": s.block, "kind": s.kind} for s in rendered.spans]


def to_json(rendered: Rendered) -> str:
    return json.dumps({"template": rendered.template, "tokenizer": rendered.tokenizer, "text": rendered.text,
                       "input_ids": rendered.input_ids, "loss_mask": rendered.loss_mask,
                       "spans": spans_json(rendered), "ledger": msgspec.to_builtins(list(rendered.ledger))},
                      ensure_ascii=False)
