"""The token view of a render: every token, whether it is trained, and which message and block it came from.

`build_view` cuts a `Rendered` into rows, one per span, each a run of token cells; `terminal_view` turns
one record's views (one per template) into a rich renderable, side by side; `html_page` writes the same
view as one self-contained page; `json_line` is the machine form. `sftprep render` picks the records and
prints (pipeline/cli/render.py).

Transcript text is never interpreted: rich output is built from `Text` pieces (no markup parsing),
control characters are shown as symbols (a logged escape sequence must not drive the terminal), and
every string in the page is HTML-escaped.
"""

from .model import (CONTINUATION, Cell, Failure, RecordView, Row, View, aligned_rows, build_view, error_line, json_line,
                    message_counts, row_keys, span_label, visible)
from .page import IndexRow, html_page, index_page, index_row
from .terminal import PALETTES, colors_for, legend, row_text, terminal_view

__all__ = ["CONTINUATION", "Cell", "Row", "View", "Failure", "RecordView", "build_view", "span_label", "visible", "json_line",
           "error_line", "row_keys", "aligned_rows", "message_counts", "row_text", "terminal_view", "legend", "colors_for", "PALETTES", "html_page",
           "IndexRow", "index_row", "index_page"]
