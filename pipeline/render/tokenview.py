"""The token view of a render: every token, whether it is trained, and which message and block it came from.

`build_view` cuts a `Rendered` into rows, one per span, each a run of token cells; `terminal_view` turns
one record's views (one per template) into a rich renderable, side by side; `html_page` writes the same
view as one self-contained page; `json_line` is the machine form. `sftprep render` picks the records and
prints (pipeline/cli/render.py).

Transcript text is never interpreted: rich output is built from `Text` pieces (no markup parsing),
control characters are shown as symbols (a logged escape sequence must not drive the terminal), and
every string in the page is HTML-escaped.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple

import msgspec

from ..conversation import Conversation
from ..errors import RenderError, SftprepError
from .rendered import Rendered, Span, spans_json
from .tokenizers import Tokenizer

__all__ = ["Cell", "Row", "View", "Failure", "RecordView", "build_view", "span_label", "visible", "json_line",
           "error_line", "row_text", "terminal_view", "legend", "colors_for", "PALETTES", "html_page"]

CONTINUATION = "…"  # shown for a token that holds only the rest of a character begun by the token before


# --- the model -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    index: int  # position in input_ids
    id: int
    text: str  # this token's characters of the rendered text; "" when it only continues a character
    piece: str  # the vocabulary entry (byte-level form)
    trained: bool
    special: bool  # an added token: template structure, not text


@dataclass(frozen=True)
class Row:
    span: Span
    label: str  # "m3.b1 tool_call", "tools[0]", "scaffold"
    role: str | None  # the role of the span's message
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class View:
    rendered: Rendered
    rows: tuple[Row, ...]

    @property
    def template(self) -> str:
        return self.rendered.template

    @property
    def trained(self) -> int:
        return sum(self.rendered.loss_mask)


@dataclass(frozen=True)
class Failure:
    template: str
    error: SftprepError


@dataclass(frozen=True)
class RecordView:
    source: str
    conversation: Conversation | None
    results: tuple[View | Failure, ...] = ()
    error: SftprepError | None = None  # the record could not be read or parsed


def span_label(span: Span) -> str:
    """`m3.b1 tool_call` for a block of message 3, `m3 eot` for its template text, `tools[0]` for a
    tool definition (system, developer and tools blocks index those lists), `scaffold` otherwise."""
    if span.message is not None:
        where = f"m{span.message}" if span.block is None else f"m{span.message}.b{span.block}"
        return f"{where} {span.kind}"
    if span.block is not None:
        return f"{span.kind}[{span.block}]"
    return span.kind


def build_view(rendered: Rendered, tokenizer: Tokenizer, conv: Conversation | None = None) -> View:
    """Rows of token cells. Each token's characters come from the tokenizer's offsets over the rendered
    text; a token whose bytes end inside a character it shares with the token before gets "" so that
    the cells' texts concatenate to exactly the rendered text."""
    encoding = tokenizer.backend.encode(rendered.text, add_special_tokens=False)
    if encoding.ids != rendered.input_ids:
        raise RenderError(f"tokenizer '{tokenizer.name}' does not give the rendered ids for the rendered text",
                          code="render_ids")
    added = set(tokenizer.added_tokens.values())
    cells: list[Cell] = []
    cursor = 0
    for index, (token_id, (start, end)) in enumerate(zip(encoding.ids, encoding.offsets)):
        start = max(start, cursor)
        end = max(end, start)
        cells.append(Cell(index, token_id, rendered.text[start:end], tokenizer.backend.id_to_token(token_id) or "",
                          bool(rendered.loss_mask[index]), token_id in added))
        cursor = end
    if cursor < len(rendered.text) and cells:  # trailing characters no offset claimed (should not happen)
        last = cells[-1]
        cells[-1] = Cell(last.index, last.id, last.text + rendered.text[cursor:], last.piece, last.trained, last.special)
    rows = []
    for span in rendered.spans:
        role = None
        if conv is not None and span.message is not None and span.message < len(conv.messages):
            role = conv.messages[span.message].role
        rows.append(Row(span, span_label(span), role, tuple(cells[span.token_start:span.token_end])))
    return View(rendered, tuple(rows))


_CONTROL = {"\t": "⇥", "\r": "␍", "\x7f": "␡"}


def visible(text: str) -> str:
    """Text as shown: a newline as ↵ followed by the line break, control and bidi-override characters
    as symbols or escapes, everything else as is."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n":
            out.append("↵\n")
        elif ch in _CONTROL:
            out.append(_CONTROL[ch])
        elif code < 0x20:
            out.append(chr(0x2400 + code))  # ␀..␟
        elif 0x80 <= code < 0xA0 or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)  # other non-printables (zero-width, private use) are harmless to show
    return "".join(out)


def _shown(cell: Cell) -> str:
    return visible(cell.text) if cell.text else CONTINUATION


# --- JSON ------------------------------------------------------------------------------------------

def json_line(source: str, rendered: Rendered) -> dict[str, Any]:
    """One record and template: what the render API returned, spans as token ranges (with their
    character ranges too)."""
    return {"source": source, "template": rendered.template, "tokenizer": rendered.tokenizer, "text": rendered.text,
            "input_ids": rendered.input_ids, "loss_mask": rendered.loss_mask, "spans": spans_json(rendered),
            "ledger": msgspec.to_builtins(list(rendered.ledger))}


def error_line(source: str, template: str | None, error: SftprepError) -> dict[str, Any]:
    return {"source": source, "template": template,
            "error": {"code": error.code, "message": error.message, "path": error.path}}


# --- terminal ----------------------------------------------------------------------------------------

class Palette(NamedTuple):
    trained_bg: tuple[str, str]  # neighbouring tokens alternate the two shades, so each token's edges show
    masked_bg: tuple[str, str]
    trained_fg: str
    masked_fg: str
    special_fg: str  # added tokens (template structure)
    id_fg: tuple[str, str]  # on masked, on trained shades
    muted: str


# Trained tokens sit on greens, masked ones on greys; added tokens are bold magenta on their shade.
# Foreground and background are both set, so contrast does not depend on the terminal's theme. The
# 16-colour palette keeps trained and masked apart where rich would fold the fine shades together.
PALETTES = {
    "256": Palette(("dark_green", "green4"), ("grey15", "grey30"), "bold #d7ffd7", "grey66", "bold #ff87ff",
                   ("#87afd7", "#afd7ff"), "grey50"),
    "16": Palette(("green", "bright_green"), ("black", "bright_black"), "bold black", "white", "bold magenta",
                  ("cyan", "black"), "bright_black"),
}
_KIND_STYLE = {"text": "bold", "tool_call": "bold yellow", "tool_result": "cyan", "reasoning": "magenta",
               "media": "blue", "system": "bold", "developer": "bold", "tools": "bold", "eot": "magenta",
               "format": "bright_black", "scaffold": "bright_black"}


_SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def colors_for(console) -> str:
    """"plain", "16" or "256" (truecolor included) for a rich Console."""
    if console.color_system is None or console.no_color:
        return "plain"
    return "16" if console.color_system in ("standard", "windows") else "256"


def _token_style(cell: Cell, palette: Palette) -> str:
    shade = (palette.trained_bg if cell.trained else palette.masked_bg)[cell.index % 2]
    fg = palette.special_fg if cell.special else (palette.trained_fg if cell.trained else palette.masked_fg)
    if not cell.text:
        fg = palette.muted
    return f"{fg} on {shade}"


def row_text(row: Row, *, ids: bool = False, colors: str = "256"):
    """One span's tokens. In colour, shades mark token edges. Plain (no colour): `│` between tokens and
    ⟦ ⟧ around trained runs, the marks of the goldens' mask view."""
    from rich.text import Text

    plain = colors == "plain"
    palette = PALETTES.get(colors, PALETTES["256"])
    out = Text(no_wrap=False, overflow="fold")
    cells = row.cells
    last = len(cells) - 1
    line_start = True
    for k, cell in enumerate(cells):
        shown = _shown(cell)
        # A token ending in a newline breaks the line after its id and closing mark; the row's last
        # line break is the table's.
        shown, newline = (shown[:-1], "\n" if k < last else "") if shown.endswith("\n") else (shown, "")
        if plain:
            opens = cell.trained and (k == 0 or not cells[k - 1].trained)
            closes = cell.trained and (k == last or not cells[k + 1].trained)
            closed_before = k > 0 and cells[k - 1].trained and not cell.trained
            if opens:
                out.append("⟦")
            elif not line_start and not closed_before:
                out.append("│")
            out.append(shown)
            if ids:
                out.append(f"‹{cell.id}›")
            if closes:
                out.append("⟧")
        else:
            style = _token_style(cell, palette)
            out.append(shown, style=style)
            if ids:
                # Subscript digits: an id cannot be misread as digits of the text.
                out.append(str(cell.id).translate(_SUBSCRIPT),
                           style=f"{palette.id_fg[cell.trained]} on {style.split(' on ')[1]}")
        out.append(newline)
        line_start = bool(newline)
    if not cells:
        out.append("(no token of its own: its characters share the token before)", style="italic")
    return out


def legend(colors: str):
    from rich.text import Text

    if colors == "plain":
        return Text("⟦trained⟧ masked │ token edge ↵ newline … rest of a character ‹id› --ids; "
                    "spans: m<message>.b<block> kind")
    p = PALETTES.get(colors, PALETTES["256"])
    return Text.assemble(
        ("trained", f"{p.trained_fg} on {p.trained_bg[0]}"), (" tokens", f"{p.trained_fg} on {p.trained_bg[1]}"), "  ",
        ("masked", f"{p.masked_fg} on {p.masked_bg[0]}"), (" tokens", f"{p.masked_fg} on {p.masked_bg[1]}"), "  ",
        ("<|added|>", f"{p.special_fg} on {p.masked_bg[0]}"), " special  ", ("↵", f"{p.masked_fg} on {p.masked_bg[0]}"),
        " newline  ", (CONTINUATION, f"{p.muted} on {p.masked_bg[0]}"), " rest of a character  ",
        ("spans: m<message>.b<block> kind", p.muted))


def _view_table(view: View, *, ids: bool, colors: str):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    label_width = max((len(row.label) for row in view.rows), default=8)
    table = Table(box=box.ASCII2 if colors == "plain" else box.SIMPLE_HEAD, show_header=True, show_edge=False, pad_edge=False,
                  expand=True, padding=(0, 1))
    table.add_column("span", no_wrap=True, width=label_width, header_style="bold")
    rendered = view.rendered
    table.add_column(Text(f"{_short(rendered.template)} · {_short(rendered.tokenizer)} · "
                          f"{len(rendered.input_ids)} tokens, {view.trained} trained"),
                     header_style="bold", overflow="fold", ratio=1)
    for row in view.rows:
        table.add_row(Text(row.label, style=_KIND_STYLE.get(row.span.kind, "")), row_text(row, ids=ids, colors=colors))
    return table


def _failure_text(failure: Failure):
    from rich.text import Text

    error = failure.error
    return Text.assemble((f"{failure.template}: could not render", "bold red"),
                         f"\n  at {error.path}: {error.message} [{error.code}]")


def _ledger_lines(view: View):
    from rich.text import Text

    entries = view.rendered.ledger
    head = Text.assemble(("ledger ", "bold"), (view.template, "bold"),
                         (f": {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}" if entries
                          else ": nothing lost", "" if entries else "green"))
    lines = [head]
    for entry in entries:
        lines.append(Text.assemble("  ", (f"{entry.kind:<12}", "yellow"), (entry.path, "cyan"), "  ", entry.reason))
    return lines


def terminal_view(record: RecordView, *, ids: bool = False, colors: str = "256", width: int = 120,
                  mask: str | None = None):
    """One record: a title, each template's span table (side by side when there is room: at least 48
    columns each, else one under the other), then each template's ledger."""
    from rich.console import Group
    from rich.rule import Rule
    from rich.table import Table
    from rich.text import Text

    conv = record.conversation
    title = Text(record.source, style="bold")
    if conv is not None:
        details = [x for x in (conv.meta.provider, conv.meta.shape) if x]
        details.append(f"{len(conv.messages)} messages")
        if mask:
            details.append(f"mask {mask}")
        title.append(f"  ({', '.join(details)})", style="bright_black")
    parts: list[Any] = [Rule(title, align="left", style="bright_black")]
    if record.error is not None:
        parts.append(Text.assemble(("could not read this record", "bold red"),
                                   f"\n  at {record.error.path}: {record.error.message} [{record.error.code}]"))
        return Group(*parts)
    blocks = [_view_table(r, ids=ids, colors=colors) if isinstance(r, View) else _failure_text(r) for r in record.results]
    if len(blocks) > 1 and width // len(blocks) >= 48:
        grid = Table.grid(expand=True, padding=(0, 2))
        for _ in blocks:
            grid.add_column(ratio=1)
        grid.add_row(*blocks)
        parts.append(grid)
    else:
        parts.extend(blocks)
    for result in record.results:
        if isinstance(result, View):
            parts.extend(_ledger_lines(result))
    return Group(*parts)


# --- HTML --------------------------------------------------------------------------------------------

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


def _short(name: str) -> str:
    """A template or tokenizer given as a file path is headed by its file name: the column is narrow."""
    return name.rsplit("/", 1)[-1] if "/" in name else name
