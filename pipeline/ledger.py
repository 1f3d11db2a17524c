"""The loss ledger: one entry per thing a target format could not carry exactly."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from .errors import ConversionError

LedgerKind = Literal["dropped", "folded", "moved", "reordered", "synthesized", "redacted"]


class LedgerEntry(Struct, frozen=True):
    kind: LedgerKind
    path: str  # where in the canonical conversation, e.g. $.messages[3].blocks[1]
    reason: str
    target: str | None = None  # the format (or template) that could not carry it
    detector: str | None = None  # for `redacted`: what found the value (never the value itself)


class Ledger:
    """Collects entries while a serializer or renderer runs; `strict` turns the first into an error."""

    def __init__(self, target: str, *, strict: bool = False):
        self.target = target
        self.strict = strict
        self.entries: list[LedgerEntry] = []

    def add(self, kind: LedgerKind, path: str, reason: str) -> None:
        entry = LedgerEntry(kind=kind, path=path, reason=reason, target=self.target)
        if self.strict:
            raise ConversionError(f"{self.target} cannot carry this exactly ({kind}): {reason}", path=path,
                                  code="strict_ledger")
        self.entries.append(entry)

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
