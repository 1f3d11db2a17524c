"""A long conversation's windows (`window.plan_windows`) rendered into rows, one per window, each with
its own id, [convert] export and ledger; units lost because they alone exceed the limit are reported."""

from __future__ import annotations

from ..ledger import LedgerEntry
from .item import content_digest, drop
from .window import plan_windows


def window_item(renderer, item, shape, export=None):
    """`item` (over `shape.max_tokens`) as window rows in `item.windows`, or filtered when no window fits."""
    conv = item.conversation

    def measure(window):
        rendered, *buffers = renderer.render_buffers(window)
        return len(rendered.input_ids), (rendered, buffers)

    plan = plan_windows(conv, shape.max_tokens, shape.window_overlap, measure)
    lost_turns = sum(unit.assistant_turns for unit in plan.lost)
    if not plan.windows:
        return drop(item, "render", "too_long_unwindowable",
                    f"no unit of the conversation fits in {shape.max_tokens} tokens")
    base = list(item.ledger)
    item.export = None  # the whole conversation's body describes no row: each window has its own
    lost = [LedgerEntry("dropped", f"$.messages[{u.start}:{u.end}]",
                        f"{u.assistant_turns} assistant turn(s) in a unit of "
                        f"{u.tokens if u.tokens is not None else 'unrenderable'} tokens, over max_tokens "
                        f"{shape.max_tokens} alone", "window") for u in plan.lost]
    rows, ledgers = [], []
    for index, window in enumerate(plan.windows):
        rendered, buffers = window.result
        item.ledger = base + (lost if index == 0 else []) + list(rendered.ledger)
        body = None
        if export is not None:
            body, entries = export(window.conversation)
            item.ledger.extend(entries)
        rows.append(renderer.row(item, window.conversation, rendered, buffers, window=(index, len(plan.windows)),
                                 row_id=content_digest(window.conversation), export=body))
        ledgers.extend(item.ledger[len(base):])
    item.ledger = base + ledgers
    item.rendered, item.windows = rows[0], rows
    item.shape_tallies += [("window", "conversations", 1), ("window", "rows", len(rows)),
                          ("window", "lost_units", len(plan.lost)), ("window", "lost_assistant_turns", lost_turns)]
    return item
