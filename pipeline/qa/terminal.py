"""The QA report in a terminal, with rich: the same figures as the HTML page, as tables.

Transcript strings and file names go in as `Text`, never as markup, so a `[bold]` (or an escape
sequence) inside a conversation is printed as it is, not interpreted.
"""

from __future__ import annotations

from typing import Any

import msgspec
from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..display import visible
from .report import Count, Report

_STATUS = {
    "empty": "Empty run: no records were read.",
    "none_written": "No conversation was written: every record was rejected or filtered.",
    "no_data": "No data files were given: only counts and rejects are reported.",
}


def _n(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _counts(items: list[Count], limit: int = 6) -> Text:
    shown = ", ".join(f"{c.key} {c.count:,}" for c in items[:limit])
    return Text(shown + (f", +{len(items) - limit} more" if len(items) > limit else ""))


def _table(title: str, *columns: str, numeric: tuple[str, ...] = ()) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    for name in columns:
        table.add_column(name, justify="right" if name in numeric else "left", overflow="fold")
    return table


def shown(report: Report) -> Report:
    """The report with every string as a terminal may show it: control characters from transcripts
    (an ESC[2J, an OSC title) become symbols, as `sftprep render` shows them."""
    return msgspec.convert(_visible(msgspec.to_builtins(report)), Report)


def _visible(value: Any) -> Any:
    if isinstance(value, str):
        return visible(value, newline="\n")
    if isinstance(value, list):
        return [_visible(v) for v in value]
    if isinstance(value, dict):
        return {_visible(k): _visible(v) for k, v in value.items()}
    return value


def render_terminal(report: Report, console: Console, *, compact: bool = False) -> None:
    """Print the report. `compact` (after `sftprep run`) keeps the accounting, sources, tool use,
    issues and tokens, and leaves examples and the longer tables to `sftprep qa`."""
    report = shown(report)
    t = report.totals
    head = Text(report.title, style="bold")
    if report.inputs:
        head.append("  inputs: " + ", ".join(report.inputs), style="dim")
    console.print(head)
    if report.status in _STATUS:
        console.print(Text(_STATUS[report.status], style="bold yellow"))
    for note in report.notes:
        console.print(Text("! " + note, style="red"))

    balance = "–" if t.balanced is None else ("balanced" if t.balanced else "UNBALANCED")
    summary = Text.assemble(
        ("read ", "dim"), _n(t.read), ("  written ", "dim"), (_n(t.written if t.written is not None else t.rows), "green"),
        ("  rejected ", "dim"), (_n(t.rejected if t.rejected is not None else t.reject_lines), "red"),
        ("  filtered ", "dim"), (_n(t.filtered), "yellow"), ("  ", ""), (balance, "bold"),
        ("   tokens ", "dim"), _n(report.tokens.tokens), (" (", "dim"), _pct(report.tokens.trained_share),
        (" trained)", "dim"))
    console.print(Panel(summary, box=box.ROUNDED, expand=False))

    if report.stages:
        stages = _table("Stages", "stage", "in", "passed", "rejected", "filtered",
                        numeric=("in", "passed"))
        for s in report.stages:
            stages.add_row(s.name, _n(s.seen), _n(s.passed), _counts(s.rejected), _counts(s.filtered))
        console.print(stages)

    formats = _table("By provider format", "format", "written", "with calls", "tokens",
                     numeric=("written", "with calls", "tokens"))
    for f in report.formats:
        formats.add_row(Text(f.name), _n(f.written), _n(f.with_tool_calls), _n(f.tokens))
    console.print(formats)
    if report.shapes:  # the shape names the log source too (a trace dialect, a session, a batch)
        console.print(Text("Written by shape / source  ", style="bold") + _counts(report.shapes, 12))

    u = report.tools
    tools = Text.assemble(
        ("Tool use  ", "bold"), f"{u.calls:,} calls in {u.with_calls:,} of {u.conversations:,} conversations; ",
        f"parallel-call rate {_pct(u.parallel_rate)}; {u.distinct_tools:,} distinct tools; ",
        f"error results {_pct(u.error_rate)} ({u.error_results:,} of {u.results:,}); ",
        f"{u.image_results:,} results with images; ",
        f"{u.schema_failures_rejected + u.schema_failures_kept:,} arguments failing their schema")
    console.print(tools)
    if u.top_tools:
        console.print(Text("  most used: ", style="dim") + _counts(u.top_tools, 8))

    issues = _table("Validation issues", "code", "kept", "rejected", "stage", numeric=("kept", "rejected"))
    for i in report.issues:
        issues.add_row(Text(i.code), _n(i.kept), _n(i.rejected), i.stage)
    console.print(issues if report.issues else Text("No validation issues.", style="dim"))

    if report.filtered:
        filters = _table("Filtered", "stage", "reason", "records", numeric=("records",))
        for f in report.filtered:
            filters.add_row(f.stage, Text(f.reason), _n(f.count))
        console.print(filters)

    k = report.tokens
    for tpl in k.templates:
        console.print(Text.assemble(
            ("Tokens  ", "bold"), f"{tpl.template} / {tpl.tokenizer}: {tpl.rows:,} rows, min {tpl.min:,}, ",
            f"median {tpl.median:,.0f}, p95 {tpl.p95:,.0f}, max {tpl.max:,}; trained share {_pct(k.trained_share)}; ",
            f"trimmed {k.trimmed:,}; dropped ", _counts(k.dropped) if k.dropped else Text("0")))
    if report.flattened:
        console.print(Text(f"Flattened tool calls: {len(report.flattened)}", style="bold red"))
    if report.sessions is not None:
        _sessions(report.sessions, console)
    if compact:
        return

    for i in report.issues:
        if not i.examples:
            continue
        rows = []
        for e in i.examples:
            rows.append(Text.assemble((f"{e.outcome} ", "dim"), e.source, (" at ", "dim"), e.path))
            rows.append(Text("  " + e.message))
            if e.excerpt:
                rows.append(Text("  " + e.excerpt.replace("\n", " ")[:200], style="dim"))
        console.print(Panel(Group(*rows), title=Text(i.code), title_align="left", box=box.MINIMAL))

    for f in report.filtered:
        rows = [Text.assemble((f"{e.outcome} ", "dim"), e.source, ("  ", ""), e.message) for e in f.examples]
        console.print(Panel(Group(*rows), title=Text(f"{f.stage}: {f.reason}"), title_align="left", box=box.MINIMAL))

    if report.flattened:
        flat = _table("Flattened tool calls", "source", "family", "text")
        for f in report.flattened:
            flat.add_row(Text(f.source), Text(f.family), Text(f.text[:200]))
        console.print(flat)

    d = report.duplicates
    console.print(Text.assemble(("Duplicates  ", "bold"), f"removed {_n(d.removed)}; written rows sharing a hash "
                                f"{d.repeated_ids:,}"))

    _safety(console, report)

    ledger = _table("Conversion ledger", "kind", "entries", "rows", "by target", numeric=("entries", "rows"))
    for entry in report.ledger.kinds:
        ledger.add_row(entry.kind, _n(entry.entries), _n(entry.rows), _counts(entry.targets))
    console.print(ledger)

    g = report.reasoning
    console.print(Text.assemble(("Reasoning  ", "bold"), f"{g.blocks:,} blocks in {g.rows:,} conversations; dropped: ",
                                ", ".join(f"{x.target} {x.blocks:,}" for x in g.dropped) or "none"))
    if g.expanded:
        console.print(Text.assemble(("Expanded  ", "bold"), "past_reasoning=expand rows: ", ", ".join(
            f"{x.case} {x.rows:,} ({x.tokens:,} tokens, {x.trained_tokens:,} trained)" for x in g.expanded)))

    for title, items in (("Longest conversations", report.longest), ("Shortest conversations", report.shortest)):
        table = _table(title, "source", "tokens", "msgs", "calls", "opening user text",
                       numeric=("tokens", "msgs", "calls"))
        for c in items:
            table.add_row(Text(c.source), _n(c.tokens), _n(c.messages), _n(c.tool_calls),
                          Text(c.preview.replace("\n", " ")[:80]))
        console.print(table)


def _safety(console, report: Report) -> None:
    n = report.near_duplicates
    if n is not None and n.enabled:
        console.print(Text.assemble(("Near-duplicates  ", "bold"), f"{n.removed:,} filtered as near-duplicates of "
                                    f"{n.clusters:,} kept rows (similarity >= {n.threshold})"))
    s = report.safety
    if s is None or s.enabled is None:
        return
    if not s.enabled:
        console.print(Text.assemble(("Safety  ", "bold"), "scrub was off: rows may hold secrets and personal data"))
        return
    redacted = ", ".join(f"{c.key} {c.count:,}" for c in s.by_detector) or "nothing"
    where = ", ".join(f"{c.key} {c.count:,}" for c in s.by_where)
    rejected = ", ".join(f"{c.key} {c.count:,}" for c in s.rejected) or "none"
    console.print(Text.assemble(("Safety  ", "bold"), f"redacted: {redacted}" + (f" (in {where})" if where else "")
                                + f"; rejected: {rejected}"))


def _sessions(g, console: Console) -> None:
    roles = ", ".join(f"{x.role} {_pct(x.share)}" for x in g.role_tokens)
    console.print(Text.assemble(
        ("Sessions  ", "bold"), f"folded {_n(g.folded)} prefixes; {g.branched_sessions:,} of {g.sessions:,} sessions "
        f"branched; {g.windowed:,} conversations as {g.window_rows:,} windows",
        f" ({_n(g.lost_units)} units lost alone over the limit)" if g.lost_units else "",
        f"; {g.no_user_turn:,} rows with no user turn; {g.low_trained:,} training < {g.low_trained_threshold} tokens",
        ("\n  tokens by role: ", "dim"), roles))
