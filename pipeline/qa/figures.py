"""The report's figures, computed with polars from what a run wrote: data shards, rejects.jsonl,
stats.json and config.json. Nothing is parsed from provider formats or rendered again.

Data files are read a chunk of rows at a time (`reading`) and each chunk reduced to `Parts` (`parts`): one
line of small numbers per row plus aggregates and a few examples, so memory follows the chunk size and the
number of rows, not the size of the shards or of the conversations. `combine` merges the parts of all
chunks; the section functions here turn them (with the rejects and stats.json) into the report's structs.
"""

from __future__ import annotations

import polars as pl

from ..run.stats import STAGES
from . import report as r
from .parts import EXAMPLES, EXTREMES, Parts
from .reading import _clip, _folder

TOP = 15  # most used tools, most frequent ledger reasons
FLATTENED_SHOWN = 50


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


def totals(stats: dict | None, parts: Parts, rejects: pl.DataFrame, shards: int,
           filtered: pl.DataFrame) -> r.Totals:
    rec = (stats or {}).get("records", {})
    return r.Totals(read=rec.get("read"), written=rec.get("written"), rejected=rec.get("rejected"),
                    filtered=rec.get("filtered"), balanced=rec.get("balanced"), rows=parts.rows.height,
                    reject_lines=rejects.height, shards=shards, filtered_lines=filtered.height,
                    row_count=(((stats or {}).get("tallies") or {}).get("output") or {}).get("rows", rec.get("written")))


def filter_reasons(filtered: pl.DataFrame) -> list[r.FilterReason]:
    """Filtered records by stage and reason, most frequent first, with the first few as examples."""
    groups = (filtered.group_by("stage", "reason").agg(count=pl.len(), first=pl.col("line").min())
              .sort(["count", "first"], descending=[True, False]))
    out = []
    for stage, reason, count, _ in groups.iter_rows():
        chosen = filtered.filter((pl.col("stage") == stage) & (pl.col("reason") == reason)).sort("line").head(EXAMPLES)
        out.append(r.FilterReason(stage, reason, int(count), [
            r.Example(e["source"], "filtered", "$", e["message"], "") for e in chosen.iter_rows(named=True)]))
    return out


def source_files(parts: Parts, rejects: pl.DataFrame, *, folders: bool = False) -> list[r.SourceFile]:
    """Written and rejected records per input file (or per folder); filtered ones are listed by reason
    (`filter_reasons`)."""
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
    expanded = [r.ExpandedCase(*row) for row in parts.expanded.sort("case")
                .select("case", "rows", "tokens", "trained_tokens").iter_rows()]
    return r.Reasoning(int((rows["reasoning_blocks"] > 0).sum()), int(rows["reasoning_blocks"].sum() or 0),
                       int(rows["reasoning_text"].sum() or 0), int(rows["reasoning_state"].sum() or 0), drops,
                       None if mask is None else "no-reasoning" not in mask, expanded)


def extremes(parts: Parts) -> tuple[list[r.ConvSummary], list[r.ConvSummary]]:
    frame = parts.extremes

    def pick(descending: bool) -> list[r.ConvSummary]:
        chosen = frame.sort(["num_tokens", "row"], descending=[descending, False]).head(EXTREMES)
        return [r.ConvSummary(c["id"] or "", c["source"] or "", c["source_format"] or "", c["template"] or "",
                              c["num_tokens"], c["num_trained_tokens"], c["num_messages"], c["num_tool_calls"],
                              bool(c["trimmed"]), c["preview"]) for c in chosen.iter_rows(named=True)]

    return pick(True), pick(False)
