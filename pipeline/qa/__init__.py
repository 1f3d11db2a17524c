"""The dataset QA report: what a data lead reads to sign off a run.

    report = build_report("out/")            # a run directory, or its files
    Path("report.html").write_text(render_html(report))
    render_terminal(report, rich.console.Console())

Everything comes from what the run wrote (data shards, rejects.jsonl, stats.json, config.json) and is
computed with polars (see `figures`); nothing is parsed or rendered again. The report cross-checks the
files against stats.json and says so when they disagree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import ConfigError
from ..run.writers import atomic_path
from . import figures, reading, safety, sessions
from .parts import chunk_parts, combine
from .report import Report

__all__ = ["Report", "RunFiles", "build_report", "find_files", "render_html", "render_terminal", "to_json",
           "write_html"]


@dataclass(frozen=True)
class RunFiles:
    data: list[Path]
    rejects: Path | None = None
    stats: Path | None = None
    config: Path | None = None
    filtered: Path | None = None
    near_duplicates: Path | None = None


def find_files(paths: str | Path | Iterable[str | Path]) -> RunFiles:
    """A run directory, or files named as a run names them: data shards (`*.parquet`, `*.jsonl`),
    `rejects*.jsonl`, `stats*.json`, `config*.json`."""
    items = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not items:
        raise ConfigError("qa: give a run directory or its files", code="no_input")
    found: list[Path] = []
    for item in items:
        if item.is_dir():
            found.extend(sorted(p for p in item.iterdir() if p.is_file() and not p.name.startswith(".")))
        elif item.is_file():
            found.append(item)
        else:
            raise ConfigError(f"qa: '{item}' does not exist", code="no_input")
    data, rejects, stats, config, filtered, near = [], None, None, None, None, None
    for path in found:
        name = path.name
        if name.startswith("rejects") and name.endswith(".jsonl"):
            rejects = path
        elif name.startswith("near_duplicates") and name.endswith(".jsonl"):
            near = path
        elif name.startswith("filtered") and name.endswith(".jsonl"):
            filtered = path
        elif name.startswith("stats") and name.endswith(".json"):
            stats = path
        elif name.startswith("config") and name.endswith(".json"):
            config = path
        elif name.endswith((".parquet", ".jsonl")):
            data.append(path)
    if not (data or rejects or stats):
        raise ConfigError(f"qa: no run outputs (data-*.parquet|jsonl, rejects.jsonl, stats.json) in "
                          f"{', '.join(map(str, items))}", code="no_input")
    return RunFiles(data, rejects, stats, config, filtered, near)


def build_report(paths: str | Path | Iterable[str | Path] | RunFiles) -> Report:
    files = paths if isinstance(paths, RunFiles) else find_files(paths)
    problems: list[str] = []  # broken files: the report says what is broken and shows the rest
    stats = reading.load_json(files.stats, problems, stats=True)
    config = reading.load_json(files.config, problems)
    parts, offset = [], 0
    for shard in files.data:  # a chunk of rows in memory at a time; parts are small aggregates
        problem = reading.shard_problem(shard)
        if problem is not None:
            problems.append(f"{shard}: {problem}; left out")
            continue
        try:
            for frame in reading.read_chunks(shard):
                parts.append(chunk_parts(frame, offset))
                offset += frame.height
        except Exception as exc:  # noqa: BLE001 - a truncated or foreign shard: named, the rest reported
            problems.append(f"{shard}: cannot be read ({type(exc).__name__}: {str(exc)[:200]}); "
                            f"rows before the damage are counted, the rest are not")
    merged = combine(parts)
    rejects = reading.read_rejects(files.rejects, problems)
    filtered = reading.read_filtered(files.filtered, problems)
    totals = figures.totals(stats, merged, rejects, len(files.data), filtered)
    longest, shortest = figures.extremes(merged)
    issues = figures.issues(merged, rejects, stats)
    inputs = ((config or {}).get("input") or {}).get("paths") or []
    return Report(
        title="sftprep QA report", inputs=[str(p) for p in inputs],
        files=[str(p) for p in (*files.data, files.rejects, files.filtered, files.stats, files.config,
                                files.near_duplicates)
               if p is not None],
        status=_status(totals, bool(files.data)), notes=problems + _notes(totals, files), totals=totals,
        stages=figures.stages(stats), source_files=figures.source_files(merged, rejects),
        source_folders=figures.source_files(merged, rejects, folders=True),
        formats=figures.formats(merged, stats), shapes=figures.shapes(merged),
        tools=figures.tool_use(merged, rejects), issues=issues,
        flattened=figures.flattened(merged, rejects), tokens=figures.tokens(merged, stats, config),
        duplicates=figures.duplicates(merged, stats, config), ledger=figures.ledger(merged, stats),
        reasoning=figures.reasoning(merged, config), longest=longest, shortest=shortest, config=config or {},
        filtered=figures.filter_reasons(filtered), safety=safety.safety(merged.redactions, stats, config, rejects, issues),
        near_duplicates=safety.near_duplicates(files.near_duplicates, config),
        sessions=sessions.sessions(merged.shape_rows, merged.flagged, stats, config))


def _status(totals, has_data: bool) -> str:
    read = totals.read if totals.read is not None else totals.rows + totals.reject_lines
    if read == 0:
        return "empty"
    if not has_data:
        return "no_data"
    return "ok" if totals.rows else "none_written"


def _notes(totals, files: RunFiles) -> list[str]:
    notes = []
    if files.stats is None:
        notes.append("no stats.json: read, filtered and per-stage counts are unknown; figures come from the files")
    if totals.row_count is not None and totals.row_count != totals.rows:
        notes.append(f"stats.json says {totals.row_count} rows written but the data files hold {totals.rows}")
    if totals.rejected is not None and files.rejects is not None and totals.rejected != totals.reject_lines:
        notes.append(f"stats.json says {totals.rejected} rejected but rejects.jsonl holds {totals.reject_lines} lines")
    if totals.balanced is False:
        notes.append("the accounting does not balance: read != written + rejected + filtered")
    if files.rejects is None:
        notes.append("no rejects.jsonl: rejected records cannot be shown")
    if totals.filtered is not None and files.filtered is not None and totals.filtered != totals.filtered_lines:
        notes.append(f"stats.json says {totals.filtered} filtered but filtered.jsonl holds {totals.filtered_lines} lines")
    return notes


def render_html(report: Report) -> str:
    from .html import render_html as _render

    return _render(report)


def render_terminal(report: Report, console, *, compact: bool = False) -> None:
    from .terminal import render_terminal as _render

    _render(report, console, compact=compact)


def write_html(report: Report, path: str | Path) -> Path:
    """The HTML page, written under a temporary name and renamed: it appears complete or not at all."""
    target = Path(path)
    tmp = atomic_path(target)
    try:
        tmp.write_text(render_html(report), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write '{target}': {exc.strerror}", code="unwritable_output") from None
    os.replace(tmp, target)
    return target


def to_json(report: Report) -> bytes:
    import msgspec

    return msgspec.json.encode(report)
