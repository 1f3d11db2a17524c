"""Splitting a logged stream into events, whatever framing the logger kept.

Three framings occur in real logs:
- server-sent events: `event:` / `data:` lines, events separated by a blank line (what went over the wire);
- a JSON array of chunks (Gemini `streamGenerateContent` without `alt=sse`);
- one JSON object per line (what SDK-level loggers and test fixtures write).

Every event gets its index in the stream, which is the `$.events[i]` of every error, and the line it
started on, which the error message names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from ... import jsonpolicy
from ...errors import InputError

Framing = Literal["sse", "json-array", "json-lines", "chunks"]


class _Done:
    """The `data: [DONE]` sentinel of OpenAI streams."""

    def __repr__(self) -> str:
        return "DONE"


DONE = _Done()


@dataclass(frozen=True)
class Event:
    index: int
    data: Any  # the parsed JSON payload, or DONE
    name: str | None = None  # the SSE `event:` field
    line: int | None = None  # 1-based line where the event starts in the text

    def where(self) -> str:
        return f"$.events[{self.index}]"


@dataclass(frozen=True)
class Split:
    framing: Framing
    events: tuple[Event, ...]


def split(stream: Any) -> Split:
    """The events of `stream`: raw text (str or UTF-8 bytes) or an already-split list of chunk dicts."""
    if isinstance(stream, (bytes, bytearray)):
        try:
            stream = bytes(stream).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"stream is not UTF-8 (byte {exc.start})", code="invalid_stream") from None
    if isinstance(stream, str):
        text = stream.lstrip("\ufeff")
        head = text.lstrip()
        if head.startswith("["):
            return Split("json-array", _split_array(text))
        if _looks_like_sse(text):
            return Split("sse", _split_sse(text))
        return Split("json-lines", _split_lines(text))
    if isinstance(stream, (list, tuple)):
        events = []
        for i, item in enumerate(stream):
            if isinstance(item, str) and item.strip() == "[DONE]":
                events.append(Event(i, DONE))
            elif isinstance(item, dict):
                events.append(Event(i, item))
            else:
                raise InputError(f"a stream chunk must be an object, got {type(item).__name__}",
                                 path=f"$.events[{i}]", code="invalid_stream")
        return Split("chunks", tuple(events))
    raise InputError(f"a stream is text or a list of chunks, got {type(stream).__name__}", code="invalid_stream")


def _looks_like_sse(text: str) -> bool:
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        return stripped.startswith(("data:", "event:", "id:", "retry:", ":"))
    return False


def _parse(payload: str, index: int, line: int, last: bool) -> Any:
    if payload.strip() == "[DONE]":
        return DONE
    try:
        return jsonpolicy.loads(payload)
    except jsonpolicy.JsonPolicyError as exc:
        # The last event broken means the log was cut mid-event; anywhere else the log is corrupt.
        code = "truncated_stream" if last else "invalid_stream"
        what = "cut off inside its JSON" if last else "not valid JSON"
        raise InputError(f"event on line {line} is {what}: {exc.msg} (column {exc.colno})",
                         path=f"$.events[{index}]", code=code) from None


def _split_sse(text: str) -> tuple[Event, ...]:
    # Per the SSE spec: lines end in \r\n, \n or \r; a blank line dispatches the event; `data` fields
    # of one event join with \n; a line starting with ':' is a comment (OpenRouter sends keep-alives).
    pending: list[tuple[str | None, list[tuple[int, str]]]] = []  # (event name, [(line, data)])
    data: list[tuple[int, str]] = []
    name: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line == "":
            if data:
                pending.append((name, data))
            data, name = [], None
            continue
        if line.startswith(":"):
            continue
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append((n, value))
        elif field == "event":
            name = value
    ended_cleanly = text.endswith(("\n\n", "\r\n\r\n", "\r\r"))
    if data:
        # Loggers often drop the final blank line: keep the event, but a broken one counts as a cut.
        pending.append((name, data))
        ended_cleanly = False
    entries = [piece for i, (ev_name, lines) in enumerate(pending)
               for piece in _unjoin(ev_name, lines, cut=i == len(pending) - 1 and not ended_cleanly)]
    events = []
    for i, (line, ev_name, payload) in enumerate(entries):
        last = i == len(entries) - 1 and not ended_cleanly
        events.append(Event(i, _parse(payload, i, line, last), ev_name, line))
    return tuple(events)


def _unjoin(name: str | None, data: list[tuple[int, str]], cut: bool) -> list[tuple[int, str | None, str]]:
    """Providers never spread one JSON payload over several `data:` lines, but a log that dropped the
    blank lines between events looks exactly like that: when the joined payload is not JSON and every
    line is (but the very last line of a cut log), each line is its own event."""
    joined = "\n".join(value for _, value in data)
    whole = [(data[0][0], name, joined)]
    if len(data) == 1:
        return whole
    try:
        jsonpolicy.loads(joined)
        return whole
    except jsonpolicy.JsonPolicyError:
        pass
    for i, (_, value) in enumerate(data):
        if value.strip() != "[DONE]":
            try:
                jsonpolicy.loads(value)
            except jsonpolicy.JsonPolicyError:
                if not (cut and i == len(data) - 1):
                    return whole
    return [(line, None, value) for line, value in data]


def _split_lines(text: str) -> tuple[Event, ...]:
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    cut = not text.endswith("\n")
    return tuple(Event(i, _parse(line, i, n, cut and i == len(numbered) - 1), None, n)
                 for i, (n, line) in enumerate(numbered))


def _split_array(text: str) -> tuple[Event, ...]:
    # Decode element by element so that a cut names the element it cut, and the ones before survive.
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    events: list[Event] = []
    while True:
        pos = _skip(text, pos)
        if pos >= len(text):
            index = len(events)
            raise InputError(f"the JSON array of chunks ends after {index} chunks without its closing ']'",
                             path=f"$.events[{max(index - 1, 0)}]", code="truncated_stream")
        if text[pos] == "]":
            if text[pos + 1:].strip():
                raise InputError("text after the closing ']' of the chunk array",
                                 path=f"$.events[{len(events)}]", code="invalid_stream")
            return tuple(events)
        line = text.count("\n", 0, pos) + 1
        try:
            _, end = decoder.raw_decode(text, pos)  # where the chunk ends; the policy decodes it
            value = jsonpolicy.loads(text[pos:end])
        except json.JSONDecodeError as exc:  # JsonPolicyError included
            cut = not text.rstrip().endswith("]")
            raise InputError(f"chunk starting on line {line} is {'cut off' if cut else 'not valid JSON'}: {exc.msg}",
                             path=f"$.events[{len(events)}]",
                             code="truncated_stream" if cut else "invalid_stream") from None
        events.append(Event(len(events), value, None, line))
        pos = _skip(text, end)
        if pos < len(text) and text[pos] == ",":
            pos += 1


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos
