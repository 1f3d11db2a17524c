"""Cross-format conversion of whole inputs: parsed records in, target bodies and ledgers out."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, NamedTuple, Protocol

from ..conversation import Conversation, to_builtins
from ..errors import InternalError, SftprepError
from ..ledger import LedgerEntry
from . import registry

TARGETS = (*registry.FORMATS, "canonical")


class Parsed(Protocol):
    """A record read by ingest: its source, the record, and the conversation or the error that stopped it."""

    source: str
    record: Any
    conversation: Conversation | None
    error: SftprepError | None


class Converted(NamedTuple):
    source: str
    record: Any
    body: Any | None  # None when rejected
    ledger: list[LedgerEntry]
    error: SftprepError | None = None
    detected: tuple[str | None, str | None] = (None, None)  # (format, shape) the record was read as


def convert_one(parsed: Parsed, target: str, *, shape: str | None = None, strict: bool = False) -> Converted:
    if parsed.error is not None or parsed.conversation is None:
        return Converted(parsed.source, parsed.record, None, [], parsed.error)
    meta = parsed.conversation.meta
    detected = (meta.provider, meta.shape)
    try:
        if target == "canonical":
            return Converted(parsed.source, parsed.record, to_builtins(parsed.conversation), [], detected=detected)
        body, ledger = registry.serialize(parsed.conversation, target, shape=shape, strict=strict)
    except SftprepError as exc:
        return Converted(parsed.source, parsed.record, None, [], exc.at(parsed.source), detected)
    except Exception as exc:  # noqa: BLE001 - one record's surprise is that record's rejection
        return Converted(parsed.source, parsed.record, None, [],
                         InternalError(exc, stage="convert", source=parsed.source), detected)
    return Converted(parsed.source, parsed.record, body, ledger, detected=detected)


def convert_all(parsed: Iterable[Parsed], target: str, **options: Any) -> Iterator[Converted]:
    for item in parsed:
        yield convert_one(item, target, **options)


def ledger_dicts(entries: list[LedgerEntry]) -> list[dict]:
    return [{"kind": e.kind, "path": e.path, "reason": e.reason} for e in entries]
