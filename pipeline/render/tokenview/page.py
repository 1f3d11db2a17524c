"""The token view as one self-contained HTML page: inline CSS, no scripts, every string escaped."""

from __future__ import annotations

import html
from typing import Any, Iterable

from ...errors import SftprepError
from .model import CONTINUATION, Cell, RecordView, Row, View, _shown


_CSS = """
:root { --trained-a: #c4f0bf; --trained-b: #8fd987; --masked-a: #eceff3; --masked-b: #d3d9e0; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5rem; color: #1f2328; background: #fff; }
h1 { font-size: 1.3rem; margin: 0 0 .4rem; } h2 { font-size: 1.05rem; margin: 1.6rem 0 .2rem; }
.meta { color: #57606a; margin-bottom: .6rem; }
.legend { display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; align-items: center; padding: .5rem .7rem;
  border: 1px solid #d0d7de; border-radius: 6px; background: #f6f8fa; margin-bottom: 1rem; }
.cols { display: grid; gap: 1.2rem; align-items: start; }
.col { min-width: 0; border: 1px solid #d0d7de; border-radius: 6px; }
.col h3 { font-size: .95rem; margin: 0; padding: .45rem .7rem; background: #f6f8fa; border-bottom: 1px solid #d0d7de; }
.rows { display: grid; grid-template-columns: max-content minmax(0, 1fr); }
.label { font: 12px/1.6 ui-monospace, monospace; padding: .15rem .6rem; border-top: 1px solid #eaeef2;
  white-space: nowrap; color: #57606a; }
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
.ledger { margin: .6rem .7rem .7rem; } .ledger td { padding: .1rem .6rem .1rem 0; vertical-align: top; }
.ledger code { color: #0969da; } .kind { color: #9a6700; }
.error { color: #cf222e; padding: .6rem .7rem; } .error code { color: #1f2328; }
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


def _html_view(view: View, ids: bool) -> str:
    rendered = view.rendered
    out = [f'<div class="col"><h3>{_e(rendered.template)} · {_e(rendered.tokenizer)} · '
           f'{len(rendered.input_ids)} tokens, {view.trained} trained</h3><div class="rows">']
    for row in view.rows:
        cells = "".join(_html_cell(cell, row, ids) for cell in row.cells)
        if not row.cells:
            cells = '<span class="note">(no token of its own: its characters share the token before)</span>'
        title = row.label + (f" ({row.role})" if row.role else "")
        out.append(f'<div class="label k-{_e(row.span.kind)}" title="{_e(title)}">{_e(row.label)}</div>'
                   f'<div class="toks">{cells}</div>')
    out.append("</div>")
    entries = rendered.ledger
    if entries:
        out.append(f'<table class="ledger"><caption style="text-align:left"><b>ledger</b>: {len(entries)} '
                   f'entr{"y" if len(entries) == 1 else "ies"}</caption>')
        out.extend(f'<tr><td class="kind">{_e(e.kind)}</td><td><code>{_e(e.path)}</code></td><td>{_e(e.reason)}</td></tr>'
                   for e in entries)
        out.append("</table>")
    else:
        out.append('<div class="ledger"><b>ledger</b>: nothing lost</div>')
    out.append("</div>")
    return "".join(out)


def _html_error(template: str | None, error: SftprepError) -> str:
    head = f"{_e(template)}: could not render" if template else "could not read this record"
    return (f'<div class="col"><div class="error"><b>{head}</b><br>at <code>{_e(error.path)}</code>: '
            f'{_e(error.message)} [{_e(error.code)}]</div></div>')


_LEGEND = ('<div class="legend"><span><span class="t tr m0">trained</span><span class="t tr m1"> token</span></span>'
           '<span><span class="t m0">masked</span><span class="t m1"> token</span></span>'
           '<span><span class="t sp m0">&lt;|added|&gt;</span> special token</span>'
           '<span><span class="t m0">↵</span> newline</span>'
           f'<span><span class="t cont m0">{CONTINUATION}</span> rest of a multi-byte character</span>'
           '<span>shades alternate at token edges · hover a token for its id, message and block · '
           'span labels: <code>m&lt;message&gt;.b&lt;block&gt; kind</code></span></div>')


def html_page(records: Iterable[RecordView], *, ids: bool = False, mask: str | None = None,
              title: str = "sftprep render") -> str:
    """The token view as one page: inline CSS, no scripts, no network assets."""
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
        for result in record.results:
            body.append(_html_view(result, ids) if isinstance(result, View)
                        else _html_error(result.template, result.error))
        body.append("</div>")
    subtitle = f"mask policy {_e(mask)}" if mask else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
            f"<h1>{_e(title)}</h1><div class=\"meta\">{subtitle}</div>{_LEGEND}{''.join(body)}</body></html>\n")
