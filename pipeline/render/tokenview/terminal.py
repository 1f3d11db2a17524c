"""The token view in a terminal: rich renderables built from `Text` pieces (never markup), trained and
masked tokens on two alternating shades each, templates side by side when there is room."""

from __future__ import annotations

from typing import Any, NamedTuple

from .model import CONTINUATION, Cell, Failure, RecordView, Row, View, _shown, aligned_rows, key_message, message_counts


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
        out.append("(no token of its own: shares the one before)", style="italic")
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


MIN_COLUMN = 48  # a template's span labels and tokens; narrower, the views are stacked


def _aligned_table(views: list[View], *, ids: bool, colors: str):
    """The views side by side, one row per line-up key: a span starts on the same line in every column,
    blank where a template writes nothing for it. Each message opens with its tokens and trained share."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.ASCII2 if colors == "plain" else box.SIMPLE_HEAD, show_header=True, show_edge=False,
                  pad_edge=False, expand=True, padding=(0, 1))
    for view in views:
        label_width = max((len(row.label) for row in view.rows), default=8)
        rendered = view.rendered
        table.add_column("span", no_wrap=True, width=label_width, header_style="bold")
        table.add_column(Text(f"{_short(rendered.template)} · {_short(rendered.tokenizer)} · "
                              f"{len(rendered.input_ids)} tokens, {view.trained} trained"),
                         header_style="bold", overflow="fold", ratio=1)
    headed: set[int] = set()
    for key, rows in aligned_rows(views):
        message = key_message(key)
        if message is not None and message not in headed:
            headed.add(message)
            table.add_row(*(cell for view in views for cell in _message_head(view, message)))
        cells: list[Any] = []
        for row in rows:
            if row is None:
                cells.extend(("", ""))
            else:
                cells.extend((Text(row.label, style=_KIND_STYLE.get(row.span.kind, "")),
                              row_text(row, ids=ids, colors=colors)))
        table.add_row(*cells)
    return table


def _message_head(view: View, message: int):
    """A message's heading in one column: its role, its tokens and the share trained."""
    from rich.text import Text

    role = next((row.role for row in view.rows if row.span.message == message and row.role), None)
    tokens, trained = message_counts(view, message)
    if not tokens:
        return Text(""), Text("")
    share = f"{trained / tokens:.0%}" if trained else "none"
    return (Text(f"m{message} {role or ''}".rstrip(), style="bold underline"),
            Text(f"{tokens} tokens, {trained} trained ({share})", style="italic"))


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
    """One record: a title, the templates' span tables lined up side by side (when there is room:
    MIN_COLUMN columns each, else one under the other, saying so), failures, then each ledger."""
    from rich.console import Group
    from rich.rule import Rule
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
    views = [r for r in record.results if isinstance(r, View)]
    if len(views) > 1 and width // len(views) < MIN_COLUMN:
        parts.append(Text(f"stacked: side by side needs {MIN_COLUMN * len(views)} columns, the terminal has {width}",
                          style="italic"))
        parts.extend(_aligned_table([view], ids=ids, colors=colors) for view in views)
    elif views:
        parts.append(_aligned_table(views, ids=ids, colors=colors))
    parts.extend(_failure_text(r) for r in record.results if isinstance(r, Failure))
    for result in record.results:
        if isinstance(result, View):
            parts.extend(_ledger_lines(result))
    return Group(*parts)


def _short(name: str) -> str:
    """A template or tokenizer given as a file path is headed by its file name: the column is narrow."""
    return name.rsplit("/", 1)[-1] if "/" in name else name
