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

from . import jsonpolicy

_PREFIX = "call_"
_TEXT_DIGESTS: dict[tuple[str, str], str] = {}  # (name, arguments text) -> digest; see CallIds.from_text
_TEXT_DIGESTS_MAX = 4096
_TEXT_DIGESTS_LONGEST = 1024


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
            return jsonpolicy.dumps(arguments, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            pass
    return (raw or "").encode("utf-8", "surrogatepass")


class CallIds:
    """Issues canonical ids for the calls of one conversation, in order of appearance."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def new(self, name: str, arguments: Any = UNSET, *, raw_arguments: str | None = None) -> str:
        return self._issue(_digest(name.encode("utf-8", "surrogatepass"), _arguments_bytes(arguments, raw_arguments)))

    def from_text(self, name: str, raw: str, arguments: Any) -> str:
        """`new(name, arguments, raw_arguments=raw)` where `arguments` is what the JSON policy reads from
        `raw` (UNSET when it refuses it): the digest is then a function of (name, raw) alone, so it is
        remembered by them. A log's conversations repeat the same calls; the sorted dump and the hash
        run once per distinct call."""
        if len(raw) > _TEXT_DIGESTS_LONGEST:  # long texts are seldom repeated: not worth their memory
            return self.new(name, arguments, raw_arguments=raw)
        key = _TEXT_DIGESTS.get((name, raw))
        if key is None:
            key = _digest(name.encode("utf-8", "surrogatepass"), _arguments_bytes(arguments, raw))
            if len(_TEXT_DIGESTS) >= _TEXT_DIGESTS_MAX:
                _TEXT_DIGESTS.clear()
            _TEXT_DIGESTS[(name, raw)] = key
        return self._issue(key)

    def _issue(self, key: str) -> str:
        n = self._seen.get(key, 0)
        self._seen[key] = n + 1
        return _PREFIX + (key if n == 0 else _digest(key.encode(), str(n).encode()))


def renumber(conv):
    """The conversation with every call id recomputed in order, results following their calls.
    Needed when conversations are joined (a request's history plus its response's turn): each part
    numbered identical calls from zero, and the join must not hold one id twice."""
    from msgspec.structs import replace

    from .conversation import ToolCall, ToolResult

    ids = CallIds()
    latest: dict[str, str] = {}  # old id -> new id of the most recent call that had it
    messages = []
    changed = False
    for message in conv.messages:
        blocks = []
        for block in message.blocks:
            if isinstance(block, ToolCall):
                new_id = ids.new(block.name, block.arguments, raw_arguments=block.raw_arguments)
                latest[block.id] = new_id
                if new_id != block.id:
                    block, changed = replace(block, id=new_id), True
            elif isinstance(block, ToolResult) and block.call_id is not None:
                new_id = latest.get(block.call_id, block.call_id)
                if new_id != block.call_id:
                    block, changed = replace(block, call_id=new_id), True
            blocks.append(block)
        messages.append(replace(message, blocks=tuple(blocks)))
    return replace(conv, messages=tuple(messages)) if changed else conv
