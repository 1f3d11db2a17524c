"""The token view's model: a render cut into rows, one per span, each a run of token cells; and the
machine form of a render (`json_line`, `error_line`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from ...conversation import Conversation
from ...display import visible
from ...errors import RenderError, SftprepError
from ..rendered import Rendered, Span, spans_json
from ..tokenizers import Tokenizer

CONTINUATION = "…"  # shown for a token that holds only the rest of a character begun by the token before


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


# --- lining templates up ---------------------------------------------------------------------------

def row_keys(rows: tuple[Row, ...]) -> list[tuple]:
    """What each row stands for, comparable across templates. A content row (a message's block, a
    system or tool entry) is ("c", message, block, kind). Template text (scaffold, format, eot) is
    ("t", message, the content row it leads into, kind, n): its own message, or for a scaffold the
    message it leads into; so a header before message 3 lines up with the other template's."""
    anchors: list[tuple] = []
    following: tuple = ("end",)
    for row in reversed(rows):
        if row.span.block is not None:
            following = ("c", row.span.message, row.span.block, row.span.kind)
        anchors.append(following)
    anchors.reverse()
    keys: list[tuple] = []
    seen: dict[tuple, int] = {}
    for row, anchor in zip(rows, anchors):
        span = row.span
        if span.block is not None:
            key = anchor
        else:
            message = span.message if span.message is not None else anchor[1] if anchor[0] == "c" else None
            key = ("t", message, anchor, span.kind)
        seen[key] = seen.get(key, -1) + 1
        keys.append(key + (seen[key],))
    return keys


def aligned_rows(views: list[View]) -> list[tuple[tuple, list[Row | None]]]:
    """One line-up of every view's rows: each entry is a key and, per view, its row for that key or
    None (the template writes nothing there). Every row appears once, in its view's order; views are
    merged one by one on difflib's matching blocks, so a row a template moved (llama3 puts a result
    right after its call) gets an entry of its own instead of pulling the others out of order."""
    import difflib

    entries: list[tuple[tuple, dict[int, Row]]] = []
    for index, view in enumerate(views):
        keys = row_keys(view.rows)
        matcher = difflib.SequenceMatcher(None, [key for key, _ in entries], keys, autojunk=False)
        merged: list[tuple[tuple, dict[int, Row]]] = []
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                for (key, rows), row in zip(entries[i1:i2], view.rows[j1:j2]):
                    rows[index] = row
                    merged.append((key, rows))
                continue
            merged.extend(entries[i1:i2])
            merged.extend((key, {index: row}) for key, row in zip(keys[j1:j2], view.rows[j1:j2]))
        entries = merged
    return [(key, [rows.get(index) for index in range(len(views))]) for key, rows in entries]


def key_message(key: tuple) -> int | None:
    """The message a line-up key belongs to (a scaffold belongs to the message it leads into)."""
    return key[1]


def message_counts(view: View, message: int) -> tuple[int, int]:
    """(tokens, trained tokens) of one message's spans in a view."""
    cells = [cell for row in view.rows if row.span.message == message for cell in row.cells]
    return len(cells), sum(cell.trained for cell in cells)
