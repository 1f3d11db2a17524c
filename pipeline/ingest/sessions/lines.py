"""Agent session files are JSONL written while the agent runs: lines in order, the last one possibly cut
off mid-write. Shared by the session readers: lines decoded one at a time, never the whole file."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, NamedTuple

import orjson

from ... import jsonpolicy
from ..readers import open_bytes


class Line(NamedTuple):
    number: int
    value: dict | None  # None when the line is not a JSON object
    problem: str | None = None  # why not
    last: bool = False  # the file's last non-empty line


def json_lines(path: str | Path, limit: int) -> Iterator[Line]:
    """Each non-empty line as a JSON object, or with the reason it is not one; `last` marks the final line
    (a cut-off last line is a session being written, not a broken one)."""
    pending: Line | None = None
    with open_bytes(path) as stream:
        number = 0
        while True:
            data = stream.readline(limit + 1)
            if not data:
                break
            number += 1
            if len(data) > limit and not data.endswith(b"\n"):
                while data and not data.endswith(b"\n"):  # skip the rest of the oversized line
                    data = stream.readline(1 << 20)
                line = Line(number, None, f"line is over the limit of {limit:,} bytes")
            elif not data.strip():
                continue
            else:
                line = _decode(number, data)
            if pending is not None:
                yield pending
            pending = line
    if pending is not None:
        yield pending._replace(last=True)


def _decode(number: int, data: bytes) -> Line:
    try:
        value = jsonpolicy.loads(data)
    except orjson.JSONDecodeError as exc:
        return Line(number, None, f"invalid JSON: {exc}")
    if not isinstance(value, dict):
        return Line(number, None, f"a JSON {type(value).__name__}, not an object")
    return Line(number, value)


def first_objects(path: str | Path, count: int = 4) -> list[dict]:
    """The first few lines that are JSON objects, for detection. Never raises."""
    out: list[dict] = []
    try:
        with open_bytes(path) as stream:
            for _ in range(count * 2):
                data = stream.readline(1 << 20)
                if not data:
                    break
                if data.strip():
                    try:
                        value = jsonpolicy.loads(data)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(value, dict):
                        out.append(value)
                    if len(out) >= count:
                        break
    except Exception:  # a detector answers, it does not fail
        return out
    return out
