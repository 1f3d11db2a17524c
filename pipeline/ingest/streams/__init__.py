"""Streamed responses back into the objects the non-streamed APIs return.

Loggers keep what went over the wire: server-sent events, a JSON array of chunks, or one chunk per
line. `reassemble` turns one such stream into the provider's ordinary response JSON, which the codecs
in `pipeline.formats` then parse. A stream cut short or corrupt is an `InputError` naming the event
(`$.events[41]`), never a partial object:

    code "truncated_stream"  the log ends before the provider's end marker (message_stop, [DONE],
                             response.completed, finishReason), or inside an event's JSON
    code "invalid_stream"    an event that is not JSON or breaks the protocol
    code "stream_error"      the provider sent an error event instead of a response
    code "several_responses" the log holds several exchanges (use `reassemble_all`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ... import jsonpolicy
from ...errors import ConfigError, InputError, ShapeError
from . import anthropic, gemini, openai_chat, openai_responses
from .base import provider_error
from .framing import DONE, Event, split

__all__ = ["FORMATS", "Reassembled", "detect_stream", "is_chunk", "reassemble", "reassemble_all", "reassemble_one"]

# Detection order matters only for payloads two formats could claim; none known do.
_MODULES = {m.NAME: m for m in (openai_responses, anthropic, openai_chat, gemini)}
FORMATS: tuple[str, ...] = ("anthropic", "openai-chat", "openai-responses", "gemini")
_ALIASES = {"openai_chat": "openai-chat", "openai": "openai-chat", "openai_responses": "openai-responses",
            "google": "gemini"}
_PEEK = 32  # events looked at to detect the format


@dataclass(frozen=True)
class Reassembled:
    format: str
    body: dict  # what the non-streamed API returns
    first_event: int
    last_event: int
    notes: tuple[str, ...] = ()  # decisions taken (a repeated message_start ignored, ...)
    # Responses only: the object as built from the delta events, before response.completed replaced it.
    from_deltas: dict | None = None


def detect_stream(stream: Any) -> str | None:
    """The provider format of a logged stream, from its first events; None when unsure. Never raises."""
    try:
        for data in _peek(stream):
            for name, module in _MODULES.items():
                if module.claims(data):
                    return name
    except Exception:  # detection must never fail a caller that is only asking
        return None
    return None


def is_chunk(data: Any) -> bool:
    """A stream event that no API returns on its own: an array starting with one is a logged stream (a
    Gemini `streamGenerateContent` body without SSE, chunks a logger collected), not a list of records.
    Never raises."""
    if not isinstance(data, dict):
        return False
    if gemini.claims(data):
        return gemini.is_partial(data)
    if anthropic.claims(data):
        return data.get("type") != "error"  # an error event is also an error body, a record of its own
    return openai_chat.claims(data) or openai_responses.claims(data)


def reassemble(stream: Any, fmt: str | None = None) -> dict:
    """The non-streamed response object for a stream holding one exchange."""
    return reassemble_one(stream, fmt).body


def reassemble_one(stream: Any, fmt: str | None = None) -> Reassembled:
    found = reassemble_all(stream, fmt)
    if len(found) > 1:
        raise InputError(f"the stream holds {len(found)} responses, not one (events "
                         + ", ".join(f"{r.first_event}-{r.last_event}" for r in found)
                         + "); reassemble them with reassemble_all", path=f"$.events[{found[1].first_event}]",
                         code="several_responses")
    return found[0]


def reassemble_all(stream: Any, fmt: str | None = None) -> list[Reassembled]:
    """Every exchange in the stream, in order (agent loops are often logged as one file)."""
    parts = split(stream)
    events = parts.events
    if not events:
        raise InputError("the stream is empty", path="$.events", code="truncated_stream")
    name = _resolve(fmt) if fmt is not None else _detect(events)
    module = _MODULES[name]
    if module is openai_chat:
        # Raw SSE keeps OpenAI's [DONE]; chunk lists and per-line logs usually drop it.
        exchanges = openai_chat.reassemble(events, require_done=parts.framing == "sse")
    else:
        exchanges = module.reassemble(events)
    return [Reassembled(format=name, body=ex.body, first_event=ex.first, last_event=ex.last,
                        notes=tuple(ex.notes), from_deltas=ex.from_deltas) for ex in exchanges]


def _resolve(fmt: str) -> str:
    name = _ALIASES.get(fmt, fmt)
    if name not in _MODULES:
        raise ConfigError(f"unknown stream format '{fmt}'; valid: {', '.join(FORMATS)}", code="unknown_format")
    return name


def _detect(events: tuple[Event, ...]) -> str:
    for event in events[:_PEEK]:
        for name, module in _MODULES.items():
            if module.claims(event.data):
                return name
    for event in events[:_PEEK]:
        if isinstance(event.data, dict) and isinstance(event.data.get("error"), dict):
            # An error body in place of the stream (Gemini, OpenAI): no format to tell, nothing to rebuild.
            raise provider_error(event, event.data["error"])
    raise ShapeError(f"not a stream of any known format ({', '.join(FORMATS)}); name the format",
                     path="$.events[0]", code="unknown_stream")


def _peek(stream: Any) -> list[Any]:
    """The first parseable payloads, tolerating a broken or cut stream."""
    if isinstance(stream, (list, tuple)):
        return [item for item in stream[:_PEEK] if isinstance(item, dict)]
    if isinstance(stream, (bytes, bytearray)):
        stream = bytes(stream).decode("utf-8", "replace")
    if not isinstance(stream, str):
        return []
    try:
        return [e.data for e in split(stream).events[:_PEEK] if e.data is not DONE]
    except InputError:
        pass
    found = []
    for line in stream.splitlines():
        line = line.strip().removeprefix("data:").strip().lstrip("[").rstrip(",]")
        try:
            value = jsonpolicy.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
            if len(found) >= _PEEK:
                break
    return found
