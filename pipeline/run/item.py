"""A record on its way through a run: the `Item` the stages pass along, how its journey can end
(`Outcome`: rejected or filtered, with code and where), and the canonical JSON that keys and stores it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from ..conversation import Conversation
from ..errors import SftprepError
from ..validate import Issue

# Dedup digests sort the keys of every object: two records that differ only in the key order of some
# arguments or schema are the same content. The conversation column keeps user data's key order, so it
# renders to the tokens stored beside it.
_DIGEST_ENCODER = msgspec.json.Encoder(order="deterministic")
_ENCODER = msgspec.json.Encoder()


class Outcome(NamedTuple):
    kind: str  # "rejected" | "filtered"
    stage: str
    code: str  # rejection code, or filter reason
    message: str
    path: str = "$"
    detail: dict | None = None  # extra facts for the rejects file (a flattened call's text)


@dataclass(slots=True)
class Item:
    source: str
    record: Any
    conversation: Conversation | None = None
    issues: list[Issue] = field(default_factory=list)
    rendered: Any = None  # the render result (ids, mask, spans, ledger)
    extra_rows: list = field(default_factory=list)  # more rows of the same record (past_reasoning="expand")
    export: Any = None  # the [convert] body
    ledger: list = field(default_factory=list)
    trimmed: bool = False
    digest: str = ""
    tallies: list[tuple[str, str]] = field(default_factory=list)
    outcome: Outcome | None = None
    error: SftprepError | None = None  # a read error carried from the reader
    minhash: Any = None  # the rendered row's MinHash signature, when [shape] near_dedup is on
    scrubbed: Any = None  # the scrub stage's Redactor: what it found, and the placeholders it gave
    # Sessions and windows (fold.py, window.py): every row of a windowed conversation (`rendered` is the
    # first); the session it belongs to and its rolling message digests; counted tallies (group, key, n).
    windows: list | None = None
    session: str = ""
    chain: tuple[bytes, ...] = ()
    shape_tallies: list[tuple[str, str, int]] = field(default_factory=list)


def reject(item: Item, stage: str, code: str, message: str, path: str = "$", detail: dict | None = None) -> Item:
    item.outcome = Outcome("rejected", stage, code, message, path, detail)
    return item


def drop(item: Item, stage: str, reason: str, message: str, detail: dict | None = None) -> Item:
    item.outcome = Outcome("filtered", stage, reason, message, detail=detail)
    return item


def content_digest(conv: Conversation) -> str:
    """Exact-duplicate key: the canonical content, without where it came from."""
    core = msgspec.structs.replace(conv, meta=type(conv.meta)(), original=msgspec.UNSET,
                                  **_raw_header(conv, header_json(conv).sorted))
    return hashlib.blake2b(_DIGEST_ENCODER.encode(core), digest_size=16).hexdigest()


def conversation_json(conv: Conversation) -> bytes:
    """The conversation column, as UTF-8 (msgspec refuses lone surrogates: always valid)."""
    return _ENCODER.encode(msgspec.structs.replace(conv, original=msgspec.UNSET,
                                                   **_raw_header(conv, header_json(conv).plain)))


# --- the header (system, developer, tools), encoded once per conversation ---------------------------
# A log's conversations share their instructions and tool list, a third of each conversation's JSON: the
# digest, the conversation column and the session chain (fold.py) all need it, in key order as written
# (plain) and sorted. Each is encoded once (msgspec.Raw splices the bytes in), the sorted form looked up
# by the plain bytes: conversations come from JSON, so every key is a str, and equal plain bytes are
# equal values, hence equal sorted bytes.

class Header(NamedTuple):
    parts: tuple  # (system, developer, tools): the conversation's own objects
    plain: tuple[bytes, bytes, bytes]
    sorted: tuple[bytes, bytes, bytes]


_HEADER_FIELDS = ("system", "developer", "tools")
_SORTED: dict[tuple[bytes, bytes, bytes], tuple[bytes, bytes, bytes]] = {}
_SORTED_MAX = 256
_last: list[Header] = []  # the latest conversation's: its stages (and its trimmed prefixes) ask again


def header_json(conv: Conversation) -> Header:
    parts = (conv.system, conv.developer, conv.tools)
    last = _last[0] if _last else None
    if last is not None and all(a is b for a, b in zip(last.parts, parts)):  # the same objects, held here
        return last
    plain = tuple(_ENCODER.encode(part) for part in parts)
    sorted_ = _SORTED.get(plain)
    if sorted_ is None:
        sorted_ = _SORTED[plain] = tuple(_DIGEST_ENCODER.encode(part) for part in parts)
        if len(_SORTED) > _SORTED_MAX:
            _SORTED.pop(next(iter(_SORTED)), None)
    header = Header(parts, plain, sorted_)
    _last[:] = [header]
    return header


def _raw_header(conv: Conversation, encoded: tuple[bytes, bytes, bytes]) -> dict[str, Any]:
    # An empty part stays (): omitted from the JSON as its default, as it was before.
    return {name: msgspec.Raw(raw) for name, raw, part in zip(_HEADER_FIELDS, encoded, (conv.system, conv.developer,
                                                                                        conv.tools)) if part}
