"""One chunk of data rows reduced to `Parts` (small per-row numbers, aggregates, a few examples), and
`combine`, which merges the parts of all chunks."""

from __future__ import annotations

from dataclasses import dataclass, fields

import polars as pl

from . import session_parts
from .reading import ROW_COLUMNS, _clip_expr, _file, _row_schema
from .safety import EXAMPLES as REDACTION_EXAMPLES
from .safety import redaction_examples

EXAMPLES = 3  # example records per issue code, per outcome
EXTREMES = 5  # longest and shortest conversations shown

# Only the fields the figures read: json_decode skips the rest (arguments, payloads, base64 media).
_BLOCK = pl.Struct({
    "type": pl.String, "text": pl.String, "name": pl.String, "is_error": pl.Boolean,
    "content": pl.List(pl.Struct({"type": pl.String, "kind": pl.String})), "summary": pl.List(pl.String),
    "signature": pl.String, "encrypted": pl.String, "redacted": pl.String, "role_hint": pl.String,
    "item_type": pl.String, "kind": pl.String})
_CONVERSATION = pl.Struct({"messages": pl.List(pl.Struct({"role": pl.String, "blocks": pl.List(_BLOCK)}))})
_ISSUES = pl.List(pl.Struct({"code": pl.String, "severity": pl.String, "path": pl.String, "message": pl.String,
                             "span": pl.List(pl.Int64), "family": pl.String}))
_LEDGER = pl.List(pl.Struct({"kind": pl.String, "path": pl.String, "reason": pl.String, "target": pl.String}))

_MESSAGE_INDEX = r"^\$\.messages\[(\d+)\]"
_BLOCK_INDEX = r"^\$\.messages\[\d+\]\.blocks\[(\d+)\]"


@dataclass
class Parts:
    rows: pl.DataFrame  # one line per written row, small columns only
    tools: pl.DataFrame  # name, calls
    issues: pl.DataFrame  # code, severity, kept, kept_rows
    issue_examples: pl.DataFrame  # row, code, source, path, message, excerpt
    flattened: pl.DataFrame  # row, source, path, family, text
    ledger: pl.DataFrame  # target, kind, reason, entries, rows
    ledger_kinds: pl.DataFrame  # kind, entries, rows
    reasoning_drops: pl.DataFrame  # target, kind, blocks, rows
    extremes: pl.DataFrame  # the longest and shortest rows of the chunk, with a preview
    shape_rows: pl.DataFrame  # per row: session, folded, window, tokens by role (qa/sessions.py)
    flagged: pl.DataFrame  # the first rows with no user turn or few trained tokens, with a preview
    expanded: pl.DataFrame  # case, rows, tokens, trained_tokens of past_reasoning="expand" rows
    redactions: pl.DataFrame  # row, source, path, detector, where, excerpt (a few per detector)


def chunk_parts(frame: pl.DataFrame, offset: int) -> Parts:
    frame = frame.with_row_index("row", offset=offset).with_columns(pl.col("row").cast(pl.Int64))
    blocks = _blocks(frame)
    issues = _exploded(frame, "issues", _ISSUES)
    ledger = _exploded(frame, "ledger", _LEDGER)
    shape_rows = session_parts.shape_rows(frame, blocks)
    return Parts(
        rows=_row_figures(frame, blocks),
        tools=(blocks.filter(pl.col("type") == "tool_call").group_by("name").agg(calls=pl.len())
               .with_columns(pl.col("name").fill_null("")).cast({"calls": pl.Int64})),
        issues=(issues.group_by("code").agg(severity=pl.col("severity").first(), kept=pl.len(),
                                            kept_rows=pl.col("row").n_unique())
                .cast({"kept": pl.Int64, "kept_rows": pl.Int64})),
        issue_examples=_issue_examples(issues, blocks),
        flattened=_flattened(issues, blocks),
        ledger=(ledger.group_by("target", "kind", "reason").agg(entries=pl.len(), rows=pl.col("row").n_unique())
                .cast({"entries": pl.Int64, "rows": pl.Int64})),
        ledger_kinds=(ledger.group_by("kind").agg(entries=pl.len(), rows=pl.col("row").n_unique())
                      .cast({"entries": pl.Int64, "rows": pl.Int64})),
        reasoning_drops=_reasoning_drops(ledger, blocks),
        extremes=_extremes(frame, blocks),
        shape_rows=shape_rows,
        flagged=session_parts.flagged(frame, shape_rows, blocks),
        expanded=_expanded(frame),
        redactions=redaction_examples(ledger, frame),
    )


def _expanded(frame: pl.DataFrame) -> pl.DataFrame:
    case = pl.col("reasoning_row").str.json_path_match("$.case")
    return (frame.filter(pl.col("reasoning_row").is_not_null()).group_by(case.alias("case"))
            .agg(rows=pl.len(), tokens=pl.col("num_tokens").sum(), trained_tokens=pl.col("num_trained_tokens").sum())
            .cast({"case": pl.String, "rows": pl.Int64, "tokens": pl.Int64, "trained_tokens": pl.Int64}))


def _blocks(frame: pl.DataFrame) -> pl.DataFrame:
    """One line per message block: row, message index, block index, role and the decoded fields."""
    messages = (frame.select("row", pl.col("conversation").str.json_decode(_CONVERSATION)
                             .struct.field("messages").alias("message"))
                .explode("message")
                .with_columns(mi=pl.int_range(pl.len()).over("row"))
                .filter(pl.col("message").is_not_null())
                .unnest("message"))
    return (messages.explode("blocks")
            .with_columns(bi=pl.int_range(pl.len()).over("row", "mi"))
            .filter(pl.col("blocks").is_not_null())
            .unnest("blocks")
            .cast({"mi": pl.Int64, "bi": pl.Int64}))


def _exploded(frame: pl.DataFrame, column: str, dtype: pl.DataType) -> pl.DataFrame:
    """A JSON list column as one line per element, with where it points (message and block index)."""
    return (frame.select("row", "source", pl.col(column).str.json_decode(dtype).alias("item"))
            .explode("item").filter(pl.col("item").is_not_null()).unnest("item")
            .with_columns(mi=pl.col("path").str.extract(_MESSAGE_INDEX, 1).cast(pl.Int64),
                          bi=pl.col("path").str.extract(_BLOCK_INDEX, 1).cast(pl.Int64)))


def _row_figures(frame: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    calls = blocks.filter(pl.col("type") == "tool_call").group_by("row", "mi").agg(n=pl.len())
    turns = calls.group_by("row").agg(call_turns=pl.len(), parallel_turns=(pl.col("n") >= 2).sum())
    is_image = pl.element().struct.field("kind") == "image"
    reasoning = pl.col("type") == "reasoning"
    per_block = blocks.group_by("row").agg(
        results=(pl.col("type") == "tool_result").sum(),
        error_results=((pl.col("type") == "tool_result") & pl.col("is_error").fill_null(False)).sum(),
        image_results=((pl.col("type") == "tool_result")
                       & pl.col("content").list.eval(is_image).list.any().fill_null(False)).sum(),
        hosted_calls=((pl.col("type") == "opaque") & (pl.col("role_hint") == "call")).sum(),
        reasoning_blocks=reasoning.sum(),
        reasoning_text=(reasoning & ((pl.col("text").fill_null("") != "")
                                     | (pl.col("summary").list.len().fill_null(0) > 0))).sum(),
        reasoning_state=(reasoning & pl.any_horizontal(pl.col("signature", "encrypted", "redacted").is_not_null())).sum(),
    )
    counts = ["call_turns", "parallel_turns", "results", "error_results", "image_results", "hosted_calls",
              "reasoning_blocks", "reasoning_text", "reasoning_state"]
    return (frame.select("row", "id", "source", "source_format", "shape", "template", "tokenizer", "num_tokens",
                         "num_trained_tokens", "num_messages", "num_tool_calls", "trimmed")
            .with_columns(file=_file(pl.col("source")),
                          source_format=pl.col("source_format").fill_null("unknown"),
                          shape=pl.col("shape").fill_null("unknown"))
            .join(turns, on="row", how="left").join(per_block, on="row", how="left")
            .with_columns(pl.col(counts).fill_null(0).cast(pl.Int64))
            .with_columns(pl.col("num_tokens", "num_trained_tokens", "num_messages", "num_tool_calls").cast(pl.Int64)))


def _block_excerpt() -> pl.Expr:
    kind = pl.col("type")
    text = _clip_expr(pl.col("text").fill_null(""))
    return (pl.when(kind.is_in(["text", "reasoning"])).then(text)
            .when(kind == "tool_call").then(pl.lit("call to ") + pl.col("name").fill_null("?"))
            .when(kind == "tool_result").then(pl.lit("result of ") + pl.col("name").fill_null("a call"))
            .when(kind == "opaque").then(pl.lit("provider item ") + pl.col("item_type").fill_null("?"))
            .when(kind == "media").then(pl.col("kind").fill_null("media"))
            .otherwise(pl.lit("")))


def _issue_examples(issues: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    first = issues.sort("row").group_by("code", maintain_order=True).head(EXAMPLES)
    where = blocks.select("row", "mi", "bi", excerpt=_block_excerpt())
    return (first.join(where, on=["row", "mi", "bi"], how="left")
            .select("row", "code", "source", "path", "message", pl.col("excerpt").fill_null("")))


def _flattened(issues: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    spans = issues.filter(pl.col("span").is_not_null())
    texts = blocks.select("row", "mi", "bi", "text")
    start, end = pl.col("span").list.get(0), pl.col("span").list.get(1)
    return (spans.join(texts, on=["row", "mi", "bi"], how="left")
            .select("row", "source", "path", pl.col("family").fill_null(""),
                    # A row trimmed to its limit may have lost the block the issue was found in.
                    text=pl.col("text").str.slice(start, end - start).fill_null("(trimmed away)")))


def _reasoning_drops(ledger: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    reasoning = blocks.filter(pl.col("type") == "reasoning").select("row", "mi", "bi")
    on_reasoning = ledger.join(reasoning, on=["row", "mi", "bi"], how="inner")
    return (on_reasoning.group_by("target", "kind")
            .agg(blocks=pl.struct("row", "mi", "bi").n_unique(), rows=pl.col("row").n_unique())
            .cast({"blocks": pl.Int64, "rows": pl.Int64}))


def _extremes(frame: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    ordered = frame.select("row", "id", "source", "source_format", "template", "num_tokens", "num_trained_tokens",
                           "num_messages", "num_tool_calls", "trimmed")
    picked = pl.concat([ordered.sort(["num_tokens", "row"], descending=[True, False]).head(EXTREMES),
                        ordered.sort(["num_tokens", "row"]).head(EXTREMES)]).unique("row", maintain_order=True)
    opening = (blocks.filter((pl.col("role") == "user") & (pl.col("type") == "text"))
               .sort("row", "mi", "bi").group_by("row").agg(preview=pl.col("text").first()))
    return (picked.join(opening, on="row", how="left")
            .with_columns(preview=_clip_expr(pl.col("preview").fill_null("")))
            .cast({c: pl.Int64 for c in ("num_tokens", "num_trained_tokens", "num_messages", "num_tool_calls")}))


def combine(parts: list[Parts]) -> Parts:
    if not parts:
        return chunk_parts(pl.DataFrame(schema=_row_schema()).select(ROW_COLUMNS), 0)

    def cat(name: str) -> pl.DataFrame:
        return pl.concat([getattr(p, name) for p in parts], how="vertical_relaxed")

    merged = {f.name: cat(f.name) for f in fields(Parts)}
    summed = pl.col(pl.Int64)
    merged["tools"] = merged["tools"].group_by("name").agg(summed.sum())
    merged["issues"] = merged["issues"].group_by("code").agg(pl.col("severity").first(), summed.sum())
    merged["issue_examples"] = merged["issue_examples"].sort("row").group_by("code", maintain_order=True).head(EXAMPLES)
    merged["ledger"] = merged["ledger"].group_by("target", "kind", "reason").agg(summed.sum())
    merged["ledger_kinds"] = merged["ledger_kinds"].group_by("kind").agg(summed.sum())
    merged["reasoning_drops"] = merged["reasoning_drops"].group_by("target", "kind").agg(summed.sum())
    merged["flagged"] = session_parts.combine_flagged(merged["flagged"])
    merged["expanded"] = merged["expanded"].group_by("case").agg(summed.sum())
    merged["redactions"] = merged["redactions"].sort("row").group_by("detector", maintain_order=True).head(
        REDACTION_EXAMPLES)
    return Parts(**merged)
