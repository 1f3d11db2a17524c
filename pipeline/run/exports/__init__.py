"""`[export] formats`: each written row also as a record of each format its trainer documents, all made
from the one conversation the row's template rendered (`chat`). A worker builds the records (`build`);
the parent writes them, per split, beside the data (`files`)."""

from __future__ import annotations

from typing import Any, Callable

from ...ledger import Ledger
from . import openai, sharegpt, trl
from .chat import Chat, rendered_chat
from .openai import Skip

FORMATS: dict[str, tuple[str, Callable[[Chat, Ledger], dict[str, Any]]]] = {
    "openai": (openai.TARGET, openai.line),
    "trl": (trl.TARGET, trl.line),
    "sharegpt": (sharegpt.TARGET, sharegpt.line),
}


def build(chat: Chat, formats: list[str], entries: list) -> dict[str, dict[str, Any] | None]:
    """Each format's record for one row (None: not exported), its ledger entries appended to `entries`;
    a record a format cannot take gets one entry saying why."""
    out: dict[str, dict[str, Any] | None] = {}
    for name in formats:
        target, make = FORMATS[name]
        ledger = Ledger(target)
        try:
            out[name] = make(chat, ledger)
        except Skip as exc:
            out[name] = None
            ledger = Ledger(target)
            ledger.add("dropped", "$", f"not exported: {exc}")
        entries.extend(ledger.entries)
    return out


__all__ = ["FORMATS", "Chat", "build", "rendered_chat"]
