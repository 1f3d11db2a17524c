"""Deterministic canonical call ids, derived from content so runs are reproducible.

The id depends on the call's name, its parsed arguments and how many identical calls came before it:
not on message positions or the provider's own id, so converting between formats keeps ids.
The result is short and matches every provider's id pattern (`^[a-zA-Z0-9_-]+$`, <= 40 chars).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from msgspec import UNSET

_PREFIX = "call_"


def _digest(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=12)
    for part in parts:
        h.update(len(part).to_bytes(4, "little"))
        h.update(part)
    return h.hexdigest()


def _arguments_bytes(arguments: Any, raw: str | None) -> bytes:
    # Parsed arguments first: the same call has the same id whether it came as a string or an object.
    if arguments is not UNSET:
        try:
            return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            pass
    return (raw or "").encode("utf-8", "surrogatepass")


class CallIds:
    """Issues canonical ids for the calls of one conversation, in order of appearance."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def new(self, name: str, arguments: Any = UNSET, *, raw_arguments: str | None = None) -> str:
        key = _digest(name.encode("utf-8", "surrogatepass"), _arguments_bytes(arguments, raw_arguments))
        n = self._seen.get(key, 0)
        self._seen[key] = n + 1
        return _PREFIX + (key if n == 0 else _digest(key.encode(), str(n).encode()))
