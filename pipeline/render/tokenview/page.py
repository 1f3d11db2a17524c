"""The token view as one self-contained HTML page: inline CSS, no scripts, every string escaped."""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from ...errors import SftprepError
from .model import CONTINUATION, Cell, Failure, RecordView, Row, View, _shown, aligned_rows, key_message, message_counts


_CSS = """
:root { --trained-a: #c4f0bf; --trained-b: #8fd987; --masked-a: #eceff3; --masked-b: #d3d9e0; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem; color: #1f2328; background: #fff; }
h1 { font-size: 1.3rem; margin: 0 0 .4rem; } h2 { font-size: 1.05rem; margin: 1.6rem 0 .2rem; }
.meta { color: #57606a; margin-bottom: .6rem; }
.legend { display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; align-items: center; padding: .5rem .7rem;
  border: 1px solid #d0d7de; border-radius: 6px; background: #f6f8fa; margin-bottom: 1rem; }
.cols { display: grid; column-gap: 1.2rem; align-items: stretch; }
.colhead { min-width: 0; font-size: .95rem; margin: 0; padding: .45rem .7rem; background: #f6f8fa;
  border: 1px solid #d0d7de; border-radius: 6px 6px 0 0; }
.colhead .error { padding: 0; font-size: 14px; font-weight: 400; }
.rows, .pad, .mhead { min-width: 0; border-left: 1px solid #d0d7de; border-right: 1px solid #d0d7de; }
.rows { display: grid; font: 12px/1.6 ui-monospace, monospace; }
.mhead { padding: .3rem .6rem .1rem; border-top: 1px solid #d0d7de; background: #fbfcfd; font-size: 13px; color: #57606a; }
.mhead b { color: #1f2328; }
.label { font: 12px/1.6 ui-monospace, monospace; padding: .15rem .6rem; border-top: 1px solid #eaeef2;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; color: #57606a; }
.toks { font: 13px/1.6 ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap; overflow-wrap: anywhere;
  padding: .15rem .6rem .15rem 0; border-top: 1px solid #eaeef2; }
.k-text, .k-tool_call, .k-reasoning { color: #1f2328; font-weight: 600; }
.k-tool_call { color: #9a6700; } .k-tool_result { color: #0969da; } .k-reasoning { color: #8250df; }
.k-scaffold, .k-format { color: #8c959f; }
.t { border-radius: 2px; color: #6e7781; }
.t.m0 { background: var(--masked-a); } .t.m1 { background: var(--masked-b); }
.t.tr { color: #0b3d0b; font-weight: 600; } .t.tr.m0 { background: var(--trained-a); } .t.tr.m1 { background: var(--trained-b); }
.t.sp { color: #a0119e; font-weight: 700; }
.t.cont { color: #8c959f; }
.t sub { color: #0969da; font-weight: 400; font-size: 10px; }
.note { color: #8c959f; font-style: italic; }
.ledger { margin: 0 0 .7rem; padding: .6rem .7rem .7rem; border: 1px solid #d0d7de; border-top: 0;
  border-radius: 0 0 6px 6px; display: block; }
table.ledger { border-spacing: 0; } .ledger td { padding: .1rem .6rem .1rem 0; vertical-align: top; }
.ledger code { color: #0969da; } .kind { color: #9a6700; }
.error { color: #cf222e; padding: .6rem .7rem; } .error code { color: #1f2328; }
table.index { border-collapse: collapse; width: 100%; font-size: 13px; }
.index th, .index td { text-align: left; padding: .25rem .6rem; border-bottom: 1px solid #eaeef2; vertical-align: top; }
.index th { background: #f6f8fa; position: sticky; top: 0; } .index .n { text-align: right; font-variant-numeric: tabular-nums; }
.index td a { font: 12px ui-monospace, monospace; overflow-wrap: anywhere; } .index td.error { padding: .25rem .6rem; }
.index .warning { color: #9a6700; } .index span.error { color: #cf222e; padding: 0; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_cell(cell: Cell, row: Row, ids: bool) -> str:
    classes = ["t", f"m{cell.index % 2}"]
    if cell.trained:
        classes.append("tr")
    if cell.special:
        classes.append("sp")
    if not cell.text:
        classes.append("cont")
    where = row.label + (f" ({row.role})" if row.role else "")
    # Titles are most of a long page's size: the vocabulary piece only where the text cannot show it.
    piece = f" · piece {cell.piece!r}" if not cell.text else ""
    title = f"#{cell.index} id {cell.id}{piece} · {where} · {'trained' if cell.trained else 'masked'}"
    shown = _shown(cell)
    newline = "\n" if shown.endswith("\n") else ""  # the id goes before the line break
    sub = f"<sub>{cell.id}</sub>" if ids else ""
    return (f'<span class="{" ".join(classes)}" title="{_e(title)}">{_e(shown.removesuffix(newline))}{sub}'
            f'{newline}</span>')


def _html_row(row: Row | None, ids: bool, label_width: int) -> str:
    """One span in its column (an empty cell where this template writes nothing for the line-up key)."""
    if row is None:
        return '<div class="pad"></div>'
    cells = "".join(_html_cell(cell, row, ids) for cell in row.cells)
    if not row.cells:
        cells = '<span class="note">(no token of its own: shares the one before)</span>'
    title = row.label + (f" ({row.role})" if row.role else "")
    return (f'<div class="rows" style="grid-template-columns: calc({label_width}ch + 1.4rem) minmax(0, 1fr)">'
            f'<div class="label k-{_e(row.span.kind)}" title="{_e(title)}">{_e(row.label)}</div>'
            f'<div class="toks">{cells}</div></div>')


def _html_head(view: View | None, message: int) -> str:
    if view is None:
        return '<div class="pad"></div>'
    tokens, trained = message_counts(view, message)
    if not tokens:
        return '<div class="pad"></div>'
    role = next((row.role for row in view.rows if row.span.message == message and row.role), "")
    share = f"{trained / tokens:.0%}" if trained else "none"
    return f'<div class="mhead"><b>m{message} {_e(role)}</b> · {tokens} tokens, {trained} trained ({share})</div>'


def _html_ledger(view: View) -> str:
    entries = view.rendered.ledger
    if not entries:
        return '<div class="ledger"><b>ledger</b>: nothing lost</div>'
    out = [f'<table class="ledger"><caption style="text-align:left"><b>ledger</b>: {len(entries)} '
           f'entr{"y" if len(entries) == 1 else "ies"}</caption>']
    out.extend(f'<tr><td class="kind">{_e(e.kind)}</td><td><code>{_e(e.path)}</code></td><td>{_e(e.reason)}</td></tr>'
               for e in entries)
    out.append("</table>")
    return "".join(out)


def _html_views(results: tuple[View | Failure, ...], ids: bool) -> str:
    """The templates in columns of one grid, a line per line-up key, so a span starts at the same height
    in every column; each message headed by its tokens and trained share; ledgers at the foot."""
    views = [r for r in results if isinstance(r, View)]
    out = []
    for result in results:
        if isinstance(result, View):
            rendered = result.rendered
            out.append(f'<h3 class="colhead">{_e(rendered.template)} · {_e(rendered.tokenizer)} · '
                       f'{len(rendered.input_ids)} tokens, {result.trained} trained</h3>')
        else:
            out.append(_html_error(result.template, result.error))
    widths = [max((len(row.label) for row in view.rows), default=8) for view in views]
    headed: set[int] = set()
    for key, rows in aligned_rows(views):
        message = key_message(key)
        if message is not None and message not in headed:
            headed.add(message)
            out.extend(_html_head(view, message) if isinstance(r, View) else '<div class="pad"></div>'
                       for r, view in zip(results, _spread(results, views)))
        by_view = iter(zip(rows, widths))
        for result in results:
            if isinstance(result, View):
                row, width = next(by_view)
                out.append(_html_row(row, ids, width))
            else:
                out.append('<div class="pad"></div>')
    out.extend(_html_ledger(r) if isinstance(r, View) else '<div class="pad"></div>' for r in results)
    return "".join(out)


def _spread(results: tuple[View | Failure, ...], views: list[View]) -> list[View | None]:
    """The views at their result's position (None where a template failed)."""
    found = iter(views)
    return [next(found) if isinstance(r, View) else None for r in results]


def _html_error(template: str | None, error: SftprepError) -> str:
    head = f"{_e(template)}: could not render" if template else "could not read this record"
    return (f'<div class="colhead"><div class="error"><b>{head}</b><br>at <code>{_e(error.path)}</code>: '
            f'{_e(error.message)} [{_e(error.code)}]</div></div>')


_LEGEND = ('<div class="legend"><span><span class="t tr m0">trained</span><span class="t tr m1"> token</span></span>'
           '<span><span class="t m0">masked</span><span class="t m1"> token</span></span>'
           '<span><span class="t sp m0">&lt;|added|&gt;</span> special token</span>'
           '<span><span class="t m0">↵</span> newline</span>'
           f'<span><span class="t cont m0">{CONTINUATION}</span> rest of a multi-byte character</span>'
           '<span>shades alternate at token edges · hover a token for its id, message and block · '
           'span labels: <code>m&lt;message&gt;.b&lt;block&gt; kind</code></span></div>')


def html_page(records: Iterable[RecordView], *, ids: bool = False, mask: str | None = None,
              title: str = "sftprep render", index: str | None = None) -> str:
    """The token view as one page: inline CSS, no scripts, no network assets. `index`: the relative
    address of the index page this one belongs to, linked at the top."""
    body: list[str] = []
    for record in records:
        conv = record.conversation
        details = []
        if conv is not None:
            details = [x for x in (conv.meta.provider, conv.meta.shape) if x] + [f"{len(conv.messages)} messages"]
        body.append(f"<h2>{_e(record.source)}</h2><div class=\"meta\">{_e(', '.join(details))}</div>")
        if record.error is not None:
            body.append(f'<div class="cols">{_html_error(None, record.error)}</div>')
            continue
        columns = len(record.results) or 1
        body.append(f'<div class="cols" style="grid-template-columns: repeat({columns}, minmax(0, 1fr))">')
        body.append(_html_views(record.results, ids))
        body.append("</div>")
    subtitle = f"mask policy {_e(mask)}" if mask else ""
    back = f'<p class="meta"><a href="{_e(index)}">← all records</a></p>' if index else ""
    return _document(title, subtitle, back + _LEGEND + "".join(body))


def _document(title: str, subtitle: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{_e(title)}</h1><div class=\"meta\">{subtitle}</div>{body}</body></html>\n")


@dataclass(frozen=True)
class IndexRow:
    """One record's line in the index: where its page is, what each template made of it, its issues."""

    source: str
    href: str  # relative to the index page
    results: tuple[tuple[str, int, int] | tuple[str | None, str], ...]  # (template, tokens, trained) or (template, error code)
    issues: tuple[tuple[str, str], ...]  # (severity, code), a record that could not be read: ("error", its code)


def index_row(record: RecordView, href: str, issues: Iterable[tuple[str, str]]) -> IndexRow:
    results = tuple((r.template, len(r.rendered.input_ids), r.trained) if isinstance(r, View)
                    else (r.template, r.error.code) for r in record.results)
    return IndexRow(record.source, href, results, tuple(issues))


def index_page(rows: Iterable[IndexRow], *, mask: str | None = None, title: str = "sftprep render") -> str:
    """The index of a many-record render: a table linking to each record's page."""
    rows = list(rows)
    lines = ['<table class="index"><thead><tr><th>#</th><th>source</th><th>template</th><th class="n">tokens</th>'
             '<th class="n">trained</th><th>issues</th></tr></thead><tbody>']
    for n, row in enumerate(rows, start=1):
        results = row.results or ((None, "could not be read"),)
        issues = Counter(row.issues)
        shown = ", ".join(f'<span class="{_e(sev)}">{_e(code)}{f" ×{k}" if k > 1 else ""}</span>'
                          for (sev, code), k in sorted(issues.items(), key=lambda kv: (kv[0][0] != "error", kv[0][1])))
        for k, result in enumerate(results):
            head = (f'<td rowspan="{len(results)}">{n}</td><td rowspan="{len(results)}"><a href="{_e(row.href)}">'
                    f'{_e(row.source)}</a></td>') if k == 0 else ""
            tail = f'<td rowspan="{len(results)}">{shown or "none"}</td>' if k == 0 else ""
            if len(result) == 3:
                name, tokens, trained = result
                share = f" ({trained / tokens:.0%})" if tokens else ""
                cells = f'<td>{_e(name)}</td><td class="n">{tokens}</td><td class="n">{trained}{share}</td>'
            elif result[0] is None:
                cells = f'<td colspan="3" class="error">{_e(result[1])}</td>'
            else:
                cells = f'<td>{_e(result[0])}</td><td colspan="2" class="error">could not render: {_e(result[1])}</td>'
            lines.append(f"<tr>{head}{cells}{tail}</tr>")
    lines.append("</tbody></table>")
    subtitle = f"{len(rows)} records" + (f" · mask policy {_e(mask)}" if mask else "") + " · each source opens its page"
    return _document(title, subtitle, "".join(lines))
