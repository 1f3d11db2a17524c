"""The report's figures, computed with polars from what a run wrote: data shards, rejects.jsonl,
stats.json and config.json. Nothing is parsed from provider formats or rendered again.

Data files are read a chunk of rows at a time and each chunk reduced to `Parts`: one line of small
numbers per row plus aggregates and a few examples, so memory follows the chunk size and the number of
rows, not the size of the shards or of the conversations. `combine` merges the parts of all chunks; the
section functions turn them (with the rejects and stats.json) into the report's structs.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterator

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ..run.stats import STAGES
from ..run.writers import SCHEMA
from . import report as r

EXAMPLES = 3  # example records per issue code, per outcome
EXTREMES = 5  # longest and shortest conversations shown
TOP = 15  # most used tools, most frequent ledger reasons
PREVIEW = 240  # characters of transcript text in an excerpt
FLATTENED_SHOWN = 50

ROW_COLUMNS = ["id", "source", "source_format", "shape", "template", "tokenizer", "num_tokens",
               "num_trained_tokens", "num_messages", "num_tool_calls", "trimmed", "conversation", "issues", "ledger"]

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
_FILE = r"^(.*):\d+(?:#.*)?$"  # sources are FILE:LINE or FILE:LINE#N


# --- reading ----------------------------------------------------------------------------------------

CHUNK_ROWS = 1024  # rows decoded at a time: the report's memory follows this, not the shard size


def read_chunks(path: Path, rows: int | None = None) -> Iterator[pl.DataFrame]:
    """A data file's rows, `rows` (CHUNK_ROWS) at a time; at least one frame, maybe empty."""
    rows = rows or CHUNK_ROWS
    if path.suffix == ".parquet":
        batches = pq.ParquetFile(path).iter_batches(batch_size=rows, columns=ROW_COLUMNS)
        frames = (pl.from_arrow(pa.Table.from_batches([batch])) for batch in batches)
    else:
        frames = (pl.read_ndjson(io.BytesIO(b"".join(lines)), schema=_row_schema()).select(ROW_COLUMNS)
                  for lines in _line_chunks(path, rows))
    empty = True
    for frame in frames:
        empty = False
        yield frame
    if empty:
        yield pl.DataFrame(schema=_row_schema()).select(ROW_COLUMNS)


def _line_chunks(path: Path, rows: int) -> Iterator[list[bytes]]:
    with open(path, "rb") as handle:
        chunk: list[bytes] = []
        for line in handle:
            if line.strip():
                chunk.append(line)
            if len(chunk) >= rows:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


def _row_schema() -> pl.Schema:
    return pl.DataFrame(pl.from_arrow(SCHEMA.empty_table())).schema


def read_rejects(path: Path | None) -> pl.DataFrame:
    """rejects.jsonl as a frame. Read with orjson: `record` is any JSON (or undecodable text), which no
    columnar schema holds; only a short excerpt of it is kept."""
    rows: dict[str, list[Any]] = {k: [] for k in ("line", "source", "stage", "code", "message", "path",
                                                  "family", "text", "excerpt")}
    if path is not None:
        with open(path, "rb") as handle:
            for n, line in enumerate(handle):
                if not line.strip():
                    continue
                obj = orjson.loads(line)
                detail = obj.get("detail") or {}
                rows["line"].append(n)
                for key in ("source", "stage", "code", "message", "path"):
                    rows[key].append(str(obj.get(key) or ""))
                rows["family"].append(detail.get("family"))
                rows["text"].append(detail.get("text"))
                rows["excerpt"].append(_record_excerpt(obj.get("record"), obj.get("path"), obj.get("stage")))
    schema = {"line": pl.Int64, "family": pl.String, "text": pl.String} | {
        k: pl.String for k in ("source", "stage", "code", "message", "path", "excerpt")}
    return pl.DataFrame(rows, schema=schema).with_columns(file=_file(pl.col("source")))


def _record_excerpt(record: Any, path: Any, stage: Any) -> str:
    """What the rejected record holds at the error's path; paths of read and parse errors point into
    the record itself (later stages point into the canonical form, so show the record's start)."""
    if isinstance(record, str):
        return _clip(record)
    if record is None:
        return ""
    if stage in ("read", "parse") and isinstance(path, str) and path != "$":
        found = _resolve(record, path)
        if found is not _MISSING:
            return _clip(f"{path} = " + orjson.dumps(found).decode())
    return _clip(orjson.dumps(record).decode())


_MISSING = object()


def _resolve(value: Any, path: str) -> Any:
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path[1:]):
        if name and isinstance(value, dict) and name in value:
            value = value[name]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _MISSING
    return value


def _clip(text: str, limit: int = PREVIEW) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _file(source: pl.Expr) -> pl.Expr:
    return source.str.extract(_FILE, 1).fill_null(source)


def _folder(file: pl.Expr) -> pl.Expr:
    return file.str.extract(r"^(.*)/[^/]*$", 1).fill_null(".")


def _clip_expr(text: pl.Expr, limit: int = PREVIEW) -> pl.Expr:
    return pl.when(text.str.len_chars() > limit).then(text.str.slice(0, limit - 1) + "…").otherwise(text)


# --- one chunk of rows -----------------------------------------------------------------------------

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


def chunk_parts(frame: pl.DataFrame, offset: int) -> Parts:
    frame = frame.with_row_index("row", offset=offset).with_columns(pl.col("row").cast(pl.Int64))
    blocks = _blocks(frame)
    issues = _exploded(frame, "issues", _ISSUES)
    ledger = _exploded(frame, "ledger", _LEDGER)
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
    )


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
    return Parts(**merged)


# --- sections ----------------------------------------------------------------------------------------

def counts(mapping: dict[str, int] | None) -> list[r.Count]:
    return [r.Count(k, int(v)) for k, v in sorted((mapping or {}).items(), key=lambda kv: (-kv[1], kv[0]))]


def _frame_counts(frame: pl.DataFrame, key: str, value: str = "count") -> list[r.Count]:
    frame = frame.sort([value, key], descending=[True, False])
    return [r.Count(str(k), int(v)) for k, v in zip(frame[key], frame[value])]


def stages(stats: dict | None) -> list[r.Stage]:
    if not stats:
        return []
    found = stats.get("stages", {})
    order = [name for name in STAGES if name in found] + sorted(set(found) - set(STAGES))  # flow order
    return [r.Stage(name, found[name]["in"], found[name]["passed"], counts(found[name]["rejected"]),
                    counts(found[name]["filtered"])) for name in order]


def totals(stats: dict | None, parts: Parts, rejects: pl.DataFrame, shards: int) -> r.Totals:
    rec = (stats or {}).get("records", {})
    return r.Totals(read=rec.get("read"), written=rec.get("written"), rejected=rec.get("rejected"),
                    filtered=rec.get("filtered"), balanced=rec.get("balanced"), rows=parts.rows.height,
                    reject_lines=rejects.height, shards=shards)


def source_files(parts: Parts, rejects: pl.DataFrame, *, folders: bool = False) -> list[r.SourceFile]:
    """Written and rejected records per input file (or per folder). Filtered records are only counted
    per stage in stats.json, so they cannot be given here."""
    key = _folder(pl.col("file")) if folders else pl.col("file")
    rows, rejects = parts.rows.with_columns(file=key), rejects.with_columns(file=key)
    written = rows.group_by("file").agg(written=pl.len())
    formats = (rows.group_by("file", "source_format").agg(n=pl.len())
               .sort(["file", "n", "source_format"], descending=[False, True, False]))
    rejected = rejects.group_by("file").agg(rejected=pl.len())
    table = (written.join(rejected, on="file", how="full", coalesce=True)
             .with_columns(pl.col("written", "rejected").fill_null(0))
             .sort(["written", "rejected", "file"], descending=[True, True, False]))
    by_file: dict[str, list[r.Count]] = {}
    for file, fmt, n in formats.iter_rows():
        by_file.setdefault(file, []).append(r.Count(fmt, n))
    return [r.SourceFile(file, int(w), int(j), by_file.get(file, [])) for file, w, j in
            table.select("file", "written", "rejected").iter_rows()]


def formats(parts: Parts, stats: dict | None) -> list[r.Format]:
    tally = ((stats or {}).get("tallies") or {}).get("source_format")
    table = parts.rows.group_by("source_format").agg(
        written=pl.len(), with_tool_calls=(pl.col("num_tool_calls") > 0).sum(), tokens=pl.col("num_tokens").sum())
    out = {fmt: r.Format(fmt, int(w), int(c), int(t), (tally or {}).get(fmt, 0) if tally is not None else None)
           for fmt, w, c, t in table.iter_rows()}
    for fmt, n in (tally or {}).items():  # counted by the run but absent from the files
        out.setdefault(fmt, r.Format(fmt, 0, 0, 0, n))
    return sorted(out.values(), key=lambda f: (-f.written, f.name))


def shapes(parts: Parts) -> list[r.Count]:
    return _frame_counts(parts.rows.group_by("shape").agg(count=pl.len()), "shape")


CALL_BINS = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 9), (10, 19), (20, 49), (50, None))


def tool_use(parts: Parts, rejects: pl.DataFrame) -> r.ToolUse:
    rows = parts.rows
    calls = rows["num_tool_calls"]
    bins = []
    for low, high in CALL_BINS:
        in_bin = (calls >= low) & (calls <= high) if high is not None else calls >= low
        label = str(low) if high == low else (f"{low}–{high}" if high is not None else f"{low}+")
        bins.append(r.Bin(label, low, high, int(in_bin.sum())))
    sums = rows.select(pl.col("num_tool_calls", "call_turns", "parallel_turns", "results", "error_results",
                              "image_results", "hosted_calls").sum())
    t = {k: int(v or 0) for k, v in sums.row(0, named=True).items()} if rows.height else {}
    kept = parts.issues.filter(pl.col("code") == "arguments_schema")["kept"].sum() if parts.issues.height else 0
    return r.ToolUse(
        conversations=rows.height, with_calls=int((calls > 0).sum()), calls=t.get("num_tool_calls", 0),
        hosted_calls=t.get("hosted_calls", 0), calls_per_conversation=bins,
        mean_calls=float(calls.mean() or 0.0), max_calls=int(calls.max() or 0),
        call_turns=t.get("call_turns", 0), parallel_turns=t.get("parallel_turns", 0),
        parallel_rate=_rate(t.get("parallel_turns", 0), t.get("call_turns", 0)),
        with_parallel=int((rows["parallel_turns"] > 0).sum()), distinct_tools=parts.tools.height,
        top_tools=_frame_counts(parts.tools.rename({"calls": "count"}), "name")[:TOP],
        results=t.get("results", 0), error_results=t.get("error_results", 0),
        error_rate=_rate(t.get("error_results", 0), t.get("results", 0)), image_results=t.get("image_results", 0),
        schema_failures_kept=int(kept or 0),
        schema_failures_rejected=int((rejects["code"] == "arguments_schema").sum()))


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def issues(parts: Parts, rejects: pl.DataFrame, stats: dict | None) -> list[r.IssueCode]:
    tally = ((stats or {}).get("tallies") or {}).get("issues")
    rejected = rejects.group_by("code").agg(rejected=pl.len(), stage=pl.col("stage").unique().sort().str.join(", "))
    table = (parts.issues.join(rejected, on="code", how="full", coalesce=True)
             .with_columns(pl.col("kept", "kept_rows", "rejected").fill_null(0),
                           pl.col("severity").fill_null("error"), pl.col("stage").fill_null(""))
             .sort(["rejected", "kept", "code"], descending=[True, True, False]))
    kept_examples = parts.issue_examples.sort("row")
    reject_examples = rejects.sort("line").group_by("code", maintain_order=True).head(EXAMPLES)
    out = []
    for row in table.iter_rows(named=True):
        code = row["code"]
        examples = [r.Example(e["source"], "written", e["path"], e["message"], e["excerpt"])
                    for e in kept_examples.filter(pl.col("code") == code).iter_rows(named=True)]
        examples += [r.Example(e["source"], "rejected", e["path"], e["message"], e["text"] or e["excerpt"])
                     for e in reject_examples.filter(pl.col("code") == code).iter_rows(named=True)]
        out.append(r.IssueCode(code, row["severity"], int(row["kept"]), int(row["kept_rows"]), int(row["rejected"]),
                               row["stage"], (tally or {}).get(code, 0) if tally is not None else None, examples))
    return out


def flattened(parts: Parts, rejects: pl.DataFrame) -> list[r.Flattened]:
    kept = [r.Flattened(f["source"], "written", f["path"], f["family"], _clip(f["text"], 600))
            for f in parts.flattened.sort("row").iter_rows(named=True)]
    dropped = [r.Flattened(f["source"], "rejected", f["path"], f["family"] or "", _clip(f["text"] or "", 600))
               for f in rejects.filter(pl.col("code") == "flattened_tool_call").sort("line").iter_rows(named=True)]
    return (dropped + kept)[:FLATTENED_SHOWN]


def token_bins(high: int, target: int = 24) -> int:
    """A round bin width giving about `target` bins up to `high`."""
    raw = max(1.0, high / target)
    scale = 10 ** (len(str(int(raw))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if step * scale >= raw:
            return max(1, int(step * scale))
    return int(10 * scale)


def tokens(parts: Parts, stats: dict | None, config: dict | None) -> r.Tokens:
    rows = parts.rows
    high = int(rows["num_tokens"].max() or 0)
    width = token_bins(high)
    out = []
    groups = rows.group_by("template", "tokenizer").agg(pl.col("num_tokens"), n=pl.len()).sort("template", "tokenizer")
    for template, tokenizer, values, n in groups.iter_rows():
        series = pl.Series(values, dtype=pl.Int64)
        binned = (series // width).value_counts(name="count")
        seen = {int(b): int(c) for b, c in binned.iter_rows()}
        histogram = [r.Bin(f"{i * width}–{(i + 1) * width - 1}", i * width, (i + 1) * width - 1, seen.get(i, 0))
                     for i in range(high // width + 1)]
        trained = rows.filter((pl.col("template") == template) & (pl.col("tokenizer") == tokenizer))
        out.append(r.TemplateTokens(template or "", tokenizer or "", int(n), int(series.sum()),
                                    int(trained["num_trained_tokens"].sum()), int(series.min()),
                                    float(series.median()), float(series.quantile(0.95, "nearest")),
                                    int(series.max()), histogram))
    total, trained = int(rows["num_tokens"].sum() or 0), int(rows["num_trained_tokens"].sum() or 0)
    render_stage = ((stats or {}).get("stages") or {}).get("render") or {}
    limit = ((config or {}).get("shape") or {}).get("max_tokens")
    return r.Tokens(out, total, trained, _rate(trained, total), int(rows["trimmed"].sum() or 0),
                    counts(render_stage.get("filtered")), limit or None)


def duplicates(parts: Parts, stats: dict | None, config: dict | None) -> r.Duplicates:
    dedup = ((stats or {}).get("stages") or {}).get("dedup")
    enabled = ((config or {}).get("shape") or {}).get("dedup")
    ids = parts.rows["id"].filter(parts.rows["id"] != "")
    return r.Duplicates(enabled, dedup["filtered"].get("duplicate", 0) if dedup is not None else None,
                        ids.len() - ids.n_unique())


def ledger(parts: Parts, stats: dict | None) -> r.Ledger:
    tally = ((stats or {}).get("tallies") or {}).get("ledger")
    by_target: dict[str, list[r.Count]] = {}
    for kind, target, n in (parts.ledger.group_by("kind", "target").agg(n=pl.col("entries").sum())
                            .sort(["kind", "n", "target"], descending=[False, True, False]).iter_rows()):
        by_target.setdefault(kind, []).append(r.Count(target, int(n)))
    kinds = [r.LedgerKind(k, int(e), int(n), by_target.get(k, []),
                          (tally or {}).get(k, 0) if tally is not None else None)
             for k, e, n in parts.ledger_kinds.sort(["entries", "kind"], descending=[True, False])
             .select("kind", "entries", "rows").iter_rows()]
    targets = _frame_counts(parts.ledger.group_by("target").agg(count=pl.col("entries").sum()), "target")
    reasons = [r.LedgerReason(*row) for row in parts.ledger.sort(
        ["entries", "target", "kind", "reason"], descending=[True, False, False, False]).head(TOP)
        .select("target", "kind", "reason", "entries", "rows").iter_rows()]
    return r.Ledger(kinds, targets, reasons)


def reasoning(parts: Parts, config: dict | None) -> r.Reasoning:
    rows = parts.rows
    mask = ((config or {}).get("render") or {}).get("mask")
    drops = [r.ReasoningDrop(*row) for row in parts.reasoning_drops.sort(
        ["blocks", "target", "kind"], descending=[True, False, False]).select("target", "kind", "blocks", "rows")
        .iter_rows()]
    return r.Reasoning(int((rows["reasoning_blocks"] > 0).sum()), int(rows["reasoning_blocks"].sum() or 0),
                       int(rows["reasoning_text"].sum() or 0), int(rows["reasoning_state"].sum() or 0), drops,
                       None if mask is None else "no-reasoning" not in mask)


def extremes(parts: Parts) -> tuple[list[r.ConvSummary], list[r.ConvSummary]]:
    frame = parts.extremes

    def pick(descending: bool) -> list[r.ConvSummary]:
        chosen = frame.sort(["num_tokens", "row"], descending=[descending, False]).head(EXTREMES)
        return [r.ConvSummary(c["id"] or "", c["source"] or "", c["source_format"] or "", c["template"] or "",
                              c["num_tokens"], c["num_trained_tokens"], c["num_messages"], c["num_tool_calls"],
                              bool(c["trimmed"]), c["preview"]) for c in chosen.iter_rows(named=True)]

    return pick(True), pick(False)
