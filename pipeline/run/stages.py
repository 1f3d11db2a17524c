"""The stages a record passes through: parse, validate, shape, render (then dedup and write, in the
parent). Each stage is a small function over one `Item`; it either lets the item pass or ends its
journey with a rejection (code + where) or a filter (reason). `run_stages` counts all of it."""

from __future__ import annotations

import re
from typing import Any, Callable

from ..conversation import Conversation, ToolCall, iter_blocks
from ..errors import InternalError, SftprepError
from ..ledger import LedgerEntry
from ..ingest import RawRecord, expand, parse_record
from ..validate import RULES, Issue, ValidateConfig, validate
from . import fold
from .config import JobConfig
from .item import Item, content_digest, drop, reject
from .stats import Stats


class Context:
    """What the stages need, built once per worker: config, validation settings, renderer."""

    def __init__(self, config: JobConfig):
        self.config = config
        self.validate_config = ValidateConfig(dict(config.validate.severity))
        self.fmt = None if config.input.format == "auto" else config.input.format
        self.shape = None if config.input.shape == "auto" else config.input.shape
        self._renderer = None
        self.scrubber = None
        if config.scrub.enabled:
            from .scrub import Scrubber

            self.scrubber = Scrubber(config.scrub)

    @property
    def renderer(self):
        if self._renderer is None:
            from .render_stage import Renderer

            self._renderer = Renderer(self.config.render, self.config.export.formats)
        return self._renderer


# --- stages ----------------------------------------------------------------------------------------

def read_stage(item: Item, ctx: Context) -> Item:
    """Records the reader could not decode (invalid JSON, not UTF-8, too large) end here."""
    if item.error is not None:
        return reject(item, "read", item.error.code, item.error.message, item.error.path)
    return item


def parse_stage(item: Item, ctx: Context) -> Item:
    try:
        item.conversation = parse_record(item.record, item.source, fmt=ctx.fmt, shape=ctx.shape,
                                         strict=ctx.config.run.strict,
                                         keep_original=ctx.config.output.keep_original)
    except SftprepError as exc:
        return reject(item, "parse", exc.code, exc.message, exc.path)
    item.ledger.extend(source_ledger(item.conversation))
    return item


def source_ledger(conv: Conversation) -> list[LedgerEntry]:
    """What the log source could not carry, as ledger entries against the source (a trace, a session)."""
    return [LedgerEntry("dropped", "$.meta.lacks", RULES[code].description, target=conv.meta.shape)
            for code in conv.meta.lacks if code in RULES]


def validate_stage(item: Item, ctx: Context) -> Item:
    item.issues = validate(item.conversation, ctx.validate_config)
    rejecting = set(ctx.config.validate.reject)
    for issue in item.issues:
        if issue.severity in rejecting:
            return reject(item, "validate", issue.code, issue.message, issue.path,
                          _flagged(item.conversation, issue))
    return item


_BLOCK_PATH = re.compile(r"\$\.messages\[(\d+)\]\.blocks\[(\d+)\]")


def _flagged(conv: Conversation, issue: Issue) -> dict | None:
    """For an issue that marks a span of text (a flattened call): the span and its text. The rejects
    file keeps the provider's record, where the canonical offsets mean nothing, so the text goes along."""
    match = _BLOCK_PATH.fullmatch(issue.path)
    if issue.span is None or match is None:
        return None
    block = conv.messages[int(match[1])].blocks[int(match[2])]
    start, end = issue.span
    return {"family": issue.family, "span": [start, end], "text": (getattr(block, "text", None) or "")[start:end]}


def scrub_stage(item: Item, ctx: Context) -> Item:
    return item if ctx.scrubber is None else ctx.scrubber.scrub(item)


def shape_stage(item: Item, ctx: Context) -> Item:
    shape = ctx.config.shape
    codes = {i.code for i in item.issues}
    for code in shape.drop_codes:
        if code in codes:
            return drop(item, "shape", f"issue:{code}", f"has issue {code}")
    conv = item.conversation
    if not any(m.role == "assistant" for m in conv.messages):
        return drop(item, "shape", "no_assistant_turn", "nothing to train on: no assistant turn")
    if shape.require_tool_calls and not any(isinstance(b, ToolCall) for _, _, b in iter_blocks(conv)):
        return drop(item, "shape", "no_tool_calls", "no tool calls (shape.require_tool_calls)")
    item.digest = content_digest(conv)
    return item


def render_stage(item: Item, ctx: Context) -> Item:
    export = (lambda conv: _export(conv, ctx)) if ctx.config.convert.to else None
    try:
        ctx.renderer.render_item(item, ctx.config.shape, export)
    except SftprepError as exc:
        return reject(item, "render", exc.code, exc.message, exc.path)
    if item.outcome is None:  # folding compares what the row holds (after trimming)
        links = fold.chain(item.conversation, None if ctx.config.shape.sessions == "longest" else 1)
        item.session = fold.session_id(item.source, links)
        item.chain = links if ctx.config.shape.sessions == "longest" else ()
    return item


def near_dedup_stage(item: Item, ctx: Context) -> Item:
    """The row's MinHash, for the parent's near-duplicate check."""
    if ctx.config.shape.near_dedup:
        from .near_dedup import signature

        item.minhash = signature(item.rendered["input_ids"])
    return item


def export_stage(item: Item, ctx: Context) -> Item:
    if not ctx.config.convert.to:
        return item
    try:
        item.export, entries = _export(item.conversation, ctx)
    except SftprepError as exc:
        return reject(item, "render", exc.code, exc.message, exc.path)
    item.ledger.extend(entries)
    return item


def _export(conv: Conversation, ctx: Context):
    from .. import formats

    return formats.serialize(conv, ctx.config.convert.to, shape="request", strict=ctx.config.run.strict)


WORKER_STAGES: tuple[tuple[str, tuple[Callable[[Item, Context], Item], ...]], ...] = (
    ("read", (read_stage,)),
    ("parse", (parse_stage,)),
    ("validate", (validate_stage,)),
    ("scrub", (scrub_stage,)),
    ("shape", (shape_stage,)),
    ("render", (export_stage, render_stage, near_dedup_stage)),
)


def run_stages(raws: list[RawRecord], ctx: Context) -> tuple[list[Item], Stats]:
    """Worker side: every record (decoded and split here when the reader deferred it) through
    read..render. Counts each stage's in/passed/rejected/filtered."""
    stats = Stats()
    items = [item for deferred in raws for item in _items(deferred)]
    for item in items:
        for name, steps in WORKER_STAGES:
            counts = stats.stages[name]
            counts.seen += 1
            for step in steps:
                try:
                    step(item, ctx)
                except Exception as exc:  # one record's surprise never stops the run: it is a reject
                    error = InternalError(exc, stage=name)
                    reject(item, name, error.code, error.message, error.path, error.detail())
                if item.outcome is not None:
                    break
            if item.outcome is not None:
                (counts.rejected if item.outcome.kind == "rejected" else counts.filtered)[item.outcome.code] += 1
                break
            counts.passed += 1
        else:
            item.tallies += _tallies(item)
        if ctx.scrubber is not None and item.outcome is not None and item.outcome.kind == "rejected":
            ctx.scrubber.clean_rejection(item)
    return items, stats


def _tallies(item: Item) -> list[tuple]:
    """What a record adds to the run's tallies; the parent counts it only once the record is written,
    so tallies describe the written set (duplicates excluded)."""
    conv = item.conversation
    out = [("issues", issue.code) for issue in item.issues]
    out += [("ledger", entry.kind) for entry in item.ledger]
    out += [("source_format", conv.meta.provider or "unknown"), ("shape", conv.meta.shape or "unknown")]
    if item.scrubbed is not None:
        applied = [e for e in item.ledger if e.kind == "redacted"]
        out += [("redacted", e.detector) for e in applied]
        out += [("redacted_in", e.reason.rpartition(" in ")[2]) for e in applied]
    return out + item.shape_tallies


def _items(deferred: RawRecord) -> list[Item]:
    """The items of one record as read: decoded, and split when it is an HTTP recording."""
    try:
        return [Item(raw.source, raw.value if raw.error is None else _undecoded(raw), error=raw.error)
                for raw in expand(deferred)]
    except Exception as exc:
        error = InternalError(exc, stage="read")
        return [reject(Item(deferred.source, _undecoded(deferred)), "read", error.code, error.message,
                       error.path, error.detail())]


def _undecoded(raw: RawRecord) -> Any:
    return raw.raw.decode("utf-8", "replace") if raw.raw is not None else None


