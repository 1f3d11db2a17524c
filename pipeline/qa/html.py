"""The HTML report: one self-contained page from `templates/qa_report.html.jinja`.

Charts are inline SVG drawn here as plain geometry (rectangles, labels) that the template writes out;
no script, no network asset. The template environment autoescapes, and nothing is marked safe: every
string from a transcript or a file name reaches the page as escaped text, in element content and in
attributes alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from pathlib import PurePosixPath

import jinja2

from .report import Bin, Report

from ..resources import TEMPLATES_DIR  # noqa: E402
TEMPLATE = "qa_report.html.jinja"

MAX_BARS = 20  # bars in one chart at most: a laptop screen high
HALF = 540  # charts set side by side: drawn at the width they are shown, so text stays 12 px

# Series colours, named by meaning (CSS classes in the template).
WRITTEN, REJECTED, FILTERED, NEUTRAL, WARNING = "s-written", "s-rejected", "s-filtered", "s-neutral", "s-warning"


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str  # the tooltip: label and exact value


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "start"
    css: str = ""
    title: str = ""


@dataclass
class Chart:
    width: int
    height: int
    title: str  # the accessible name of the figure
    rects: list[Rect] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    lines: list[tuple[float, float, float, float]] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css, name)

    @property
    def empty(self) -> bool:
        return not self.rects


def _short(text: str, limit: int, *, tail: bool = False) -> str:
    """Clipped to `limit` characters; paths keep their end (the file name) rather than their start."""
    if len(text) <= limit:
        return text
    return "…" + text[-(limit - 1):] if tail else text[: limit - 1] + "…"


def hbars(title: str, rows: list[tuple[str, list[tuple[str, int, str]]]], *, label_width: int = 230,
          width: int = 760, legend: list[tuple[str, str]] | None = None, paths: bool = False) -> Chart:
    """Horizontal bars, one per row, each stacked from (series name, value, css) segments; the total
    is printed after the bar."""
    row_h, gap, top = 20, 6, 4
    bar_w = width - label_width - 70
    high = max((sum(v for _, v, _ in segs) for _, segs in rows), default=0) or 1
    chart = Chart(width, top + len(rows) * (row_h + gap) + 4, title, legend=legend or [])
    for i, (label, segments) in enumerate(rows):
        y = top + i * (row_h + gap)
        shown = _short(label, label_width // 7, tail=paths)  # ~7 px per character at 12 px
        chart.labels.append(Label(label_width - 8, y + row_h * 0.7, shown, "end", "axis", label))
        x = float(label_width)
        total = 0
        for name, value, css in segments:
            if value <= 0:
                continue
            w = max(bar_w * value / high, 1.5)
            chart.rects.append(Rect(round(x, 2), y, round(w, 2), row_h, css, f"{label}: {name} {value:,}"))
            x += w
            total += value
        chart.labels.append(Label(x + 6, y + row_h * 0.7, f"{total:,}", "start", "value"))
    return chart


def columns(title: str, bins: list[Bin], *, css: str = NEUTRAL, width: int = 760, height: int = 230,
            x_title: str = "", every: int | None = None, edges: bool = True) -> Chart:
    """Vertical bars over bins (a histogram): a y axis with a few round ticks, every n-th bin labelled."""
    left, right, top, bottom = 56, 12, 10, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    high = max((b.count for b in bins), default=0)
    chart = Chart(width, height, title)
    if not bins:
        return chart
    step = _tick_step(high)
    ticks = list(range(0, high + step, step)) if high else [0]
    scale_top = ticks[-1] or 1
    for t in ticks:
        y = top + plot_h - plot_h * t / scale_top
        chart.lines.append((left, round(y, 2), width - right, round(y, 2)))
        chart.labels.append(Label(left - 6, y + 4, f"{t:,}", "end", "axis"))
    slot = plot_w / len(bins)
    every = every or (max(1, round(len(bins) / 8)) if edges else 1)
    for i, b in enumerate(bins):
        h = plot_h * b.count / scale_top
        x = left + i * slot
        if b.count:
            chart.rects.append(Rect(round(x + 1, 2), round(top + plot_h - h, 2), round(max(slot - 2, 1), 2),
                                    round(max(h, 1), 2), css, f"{b.label}: {b.count:,}"))
        if i % every == 0:  # on a continuous axis a bin is marked at its lower edge, else named at its centre
            chart.labels.append(Label(x, height - bottom + 16, f"{b.low:,}", "middle", "axis") if edges else
                                Label(x + slot / 2, height - bottom + 16, b.label, "middle", "axis"))
    if x_title:
        chart.labels.append(Label(left + plot_w / 2, height - 6, x_title, "middle", "axis-title"))
    return chart


def _tick_step(high: int) -> int:
    if high <= 5:
        return 1
    raw = high / 4
    scale = 10 ** (len(str(int(raw))) - 1)
    for m in (1, 2, 5, 10):
        if m * scale >= raw:
            return int(m * scale)
    return int(10 * scale)


def common_folder(folders: list[str]) -> str:
    """The folder all inputs share, so labels can leave it out ("" when they share none)."""
    if len(folders) < 2:
        return str(PurePosixPath(folders[0]).parent) if folders else ""
    try:
        return os.path.commonpath(folders)
    except ValueError:  # absolute and relative paths mixed
        return ""


def _under(folder: str, root: str) -> str:
    if not root or root == ".":
        return folder
    return os.path.relpath(folder, root) if folder != root else "."


def charts(report: Report) -> dict[str, Chart]:
    t = report.totals
    out: dict[str, Chart] = {}
    stage_rows = [(s.name, [("passed", s.passed, WRITTEN), ("rejected", sum(c.count for c in s.rejected), REJECTED),
                            ("filtered", sum(c.count for c in s.filtered), FILTERED)]) for s in report.stages]
    out["stages"] = hbars("Records per stage: passed, rejected, filtered", stage_rows, label_width=110,
                          legend=[(WRITTEN, "passed"), (REJECTED, "rejected"), (FILTERED, "filtered")])
    if t.read is not None:
        out["accounting"] = hbars("Accounting: written, rejected, filtered", [
            ("read", [("written", t.written or 0, WRITTEN), ("rejected", t.rejected or 0, REJECTED),
                      ("filtered", t.filtered or 0, FILTERED)])], label_width=110,
            legend=[(WRITTEN, "written"), (REJECTED, "rejected"), (FILTERED, "filtered")])
    out["formats"] = hbars("Written conversations by provider format",
                           [(f.name, [("written", f.written, NEUTRAL)]) for f in report.formats], label_width=130,
                           width=HALF)
    root = common_folder([s.file for s in report.source_folders])
    folders = [(_under(s.file, root), s.written, s.rejected) for s in report.source_folders]
    if len(folders) > MAX_BARS:  # the rest as one bar, so the chart stays one screen high
        rest = folders[MAX_BARS - 1:]
        folders = folders[: MAX_BARS - 1] + [(f"{len(rest)} more folders", sum(f[1] for f in rest),
                                              sum(f[2] for f in rest))]
    out["folders"] = hbars("Records by input folder", [
        (name, [("written", written, WRITTEN), ("rejected", rejected, REJECTED)]) for name, written, rejected in folders],
        legend=[(WRITTEN, "written"), (REJECTED, "rejected")], label_width=230, width=HALF, paths=True)
    out["calls"] = columns("Tool calls per conversation", report.tools.calls_per_conversation, edges=False,
                           x_title="tool calls in the conversation", width=HALF)
    out["tools"] = hbars("Most used tools", [(c.key, [("calls", c.count, NEUTRAL)]) for c in report.tools.top_tools],
                         label_width=200, width=HALF)
    out["issues"] = hbars("Validation issues by code", [
        (i.code, [("kept (warning)", i.kept, WARNING), ("rejected", i.rejected, REJECTED)]) for i in report.issues],
        legend=[(WARNING, "kept on written rows"), (REJECTED, "records rejected")])
    for tpl in report.tokens.templates:
        out[f"tokens:{tpl.template}:{tpl.tokenizer}"] = columns(
            f"Token lengths, {tpl.template} with {tpl.tokenizer}", tpl.histogram, x_title="tokens per conversation")
    if report.sessions is not None:
        out.update(session_charts(report.sessions))
    palette = {c.key: _TARGET_CSS[i % len(_TARGET_CSS)] for i, c in enumerate(report.ledger.targets)}
    out["ledger"] = hbars("Ledger entries by kind", [(k.kind, [(c.key, c.count, palette[c.key]) for c in k.targets])
                                                     for k in report.ledger.kinds],
                          legend=[(css, target) for target, css in palette.items()], label_width=130)
    return out


_TARGET_CSS = ("s-t0", "s-t1", "s-t2", "s-t3", "s-t4")  # ledger targets, largest first


def session_charts(g) -> dict[str, Chart]:
    """The sessions section: trained tokens per row, conversations per session, windows, folds, roles."""
    scale = " (logarithmic bins)" if g.trained_log_scale else ""
    return {
        # log bins: each bin marked at its lower edge (1, 2, 5, 10, ...), all of them
        "trained": columns(f"Trained tokens per row{scale}", g.trained_histogram,
                           every=1 if g.trained_log_scale else None, x_title="trained tokens in the row" + scale),
        "branches": columns("Conversations per session", g.branches, edges=False, width=HALF,
                            x_title="written conversations sharing a session"),
        "windows": columns("Windows per windowed conversation", g.windows_per_conversation, edges=False,
                           width=HALF, x_title="rows the conversation was split into"),
        "folded": hbars("Records folded into a longer conversation, by source file",
                        [(f.file, [("folded", f.folded, FILTERED)]) for f in g.folded_by_source], paths=True),
        "roles": hbars("Tokens by role", [(x.role, [("tokens", x.tokens, NEUTRAL)]) for x in g.role_tokens],
                       label_width=110, width=HALF),
    }


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda v: "–" if v is None else f"{v:,}"
    env.filters["pct"] = lambda v, digits=1: "–" if v is None else f"{100 * v:.{digits}f}%"
    env.filters["counts"] = lambda items: ", ".join(f"{c.key} {c.count:,}" for c in items)
    return env


def render_html(report: Report) -> str:
    root = common_folder([s.file for s in report.source_folders])
    return environment().get_template(TEMPLATE).render(r=report, charts=charts(report), folder_root=root)
