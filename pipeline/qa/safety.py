"""The report's Safety section: what the scrub stage redacted (by detector, by where it was found),
the records it rejected, the findings it only reported, a few redactions shown in context (placeholders
only: the outputs hold no secret to show), and the near-duplicate clusters."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .. import jsonpolicy
from . import report as r

EXAMPLES = 3  # per detector
CLUSTERS = 10  # near-duplicate clusters shown, largest first


def redaction_examples(ledger: pl.DataFrame, frame: pl.DataFrame) -> pl.DataFrame:
    """One chunk's `redacted` ledger entries, EXAMPLES per detector, each with the stored text around
    its placeholder (from the row's canonical conversation)."""
    redacted = (ledger.filter(pl.col("kind") == "redacted")
                .with_columns(detector=pl.col("reason").str.extract(r"^(\S+) in ", 1),
                              where=pl.col("reason").str.extract(r" in (\S+)$", 1))
                .sort("row").group_by("detector", maintain_order=True).head(EXAMPLES)
                .select("row", "source", "path", "detector", "where"))
    stored = dict(frame.filter(pl.col("row").is_in(redacted["row"].unique().implode()))
                  .select("row", "conversation").iter_rows())
    excerpts = [_around(stored.get(row) or "", detector) for row, detector in
                redacted.select("row", "detector").iter_rows()]
    return redacted.with_columns(excerpt=pl.Series(excerpts, dtype=pl.String))


def _around(text: str, detector: str) -> str:
    match = re.search(rf"<(?:SECRET|PII):{re.escape(detector)}(?:_\d+)?>", text)
    if match is None:
        return ""
    start = max(0, match.start() - 60)
    return ("…" if start else "") + text[start:match.end() + 60] + ("…" if match.end() + 60 < len(text) else "")


def safety(examples: pl.DataFrame, stats: dict | None, config: dict | None, rejects: pl.DataFrame,
           issues: list[r.IssueCode]) -> r.Safety:
    tallies = (stats or {}).get("tallies") or {}
    scrub = (config or {}).get("scrub") or {}
    refused = rejects.filter(pl.col("code").is_in(["secret_found", "personal_data_found"]))
    return r.Safety(
        enabled=scrub.get("enabled"), action=scrub.get("action"), actions=dict(scrub.get("actions") or {}),
        by_detector=_counts(tallies.get("redacted")), by_where=_counts(tallies.get("redacted_in")),
        rejected=[r.Count(code, n) for code, n in refused.group_by("code").len().sort("code").iter_rows()],
        rejected_examples=[r.SafetyExample(s, p, "", "", m) for s, p, m in
                           refused.select("source", "path", "message").head(EXAMPLES).iter_rows()],
        reported=[r.Count(i.code, i.kept) for i in issues if i.code in ("possible_secret", "possible_personal_data")],
        examples=[r.SafetyExample(*row) for row in
                  examples.sort("detector", "row").select("source", "path", "detector", "where", "excerpt").iter_rows()])


def near_duplicates(path: Path | None, config: dict | None) -> r.NearDuplicates:
    shape = (config or {}).get("shape") or {}
    clusters: dict[str, list[dict]] = {}
    if path is not None:
        with open(path, "rb") as handle:
            for line in handle:
                if line.strip():
                    entry = jsonpolicy.loads(line)
                    clusters.setdefault(entry["kept_source"], []).append(entry)
    ordered = sorted(clusters.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return r.NearDuplicates(
        enabled=shape.get("near_dedup"), threshold=shape.get("near_dedup_threshold"),
        removed=sum(len(v) for v in clusters.values()), clusters=len(clusters),
        largest=[r.NearCluster(kept, len(dups), [d["source"] for d in dups[:EXAMPLES]],
                               min(d["similarity"] for d in dups)) for kept, dups in ordered[:CLUSTERS]])


def _counts(mapping: dict | None) -> list[r.Count]:
    return [r.Count(k, v) for k, v in sorted((mapping or {}).items(), key=lambda kv: (-kv[1], kv[0]))]
