"""The canonical conversation as an input: what `convert --to canonical` writes (the body, or its whole
output line) and what a run's `conversation` column holds reads back as the conversation it was.

Detected from shape: an object whose `messages` are all `{"role", "blocks": [...]}` (no wire format
writes `blocks`), optionally wrapped in a convert output line `{"source", "from", "shape", "body",
"ledger"}`. The provider and shape it was first read from stay in `meta`.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..conversation import Conversation
from ..errors import ParseError, ShapeError

NAME = "canonical"
_LINE_KEYS = {"body", "ledger"}  # a convert output line: the body is the conversation


def _messages_are_canonical(value: Any) -> bool:
    messages = value.get("messages") if isinstance(value, dict) else None
    return (isinstance(messages, list) and bool(messages)
            and all(isinstance(m, dict) and "role" in m and isinstance(m.get("blocks"), list) for m in messages))


def _unwrap(value: Any) -> tuple[Any, str]:
    """(the conversation object, its JSON path prefix)."""
    if isinstance(value, dict) and _LINE_KEYS <= value.keys() and isinstance(value.get("body"), dict):
        return value["body"], "$.body"
    return value, "$"


def is_canonical(value: Any) -> bool:
    return _messages_are_canonical(_unwrap(value)[0])


_AT = re.compile(r" - at `\$(.*)`$")


def parse(value: Any) -> Conversation:
    body, prefix = _unwrap(value)
    if not isinstance(body, dict):
        raise ShapeError(f"a canonical conversation is an object, got {type(body).__name__}", path=prefix)
    try:
        return msgspec.convert(body, Conversation)
    except msgspec.ValidationError as exc:
        text = str(exc)
        found = _AT.search(text)
        path = prefix + (found[1] if found else "")
        raise ParseError(f"not a canonical conversation: {_AT.sub('', text)}", path=path) from None
