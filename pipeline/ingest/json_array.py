"""A top-level JSON array split into its elements as the file is read, in time linear in its size.

Each element comes out as its `FILE:LINE` and its bytes (or the InputError that stands for it); memory holds one element (at most the record
limit) plus a chunk. An element over the limit is skipped to its end, not kept, and reported with its
size; the elements after it are read as usual. Nothing is decoded here: the scan only needs to know
where strings and brackets are.
"""

from __future__ import annotations

import re
from typing import IO, Iterator

from ..errors import InputError

CHUNK = 1 << 20
_STRUCTURE = re.compile(rb'[\[\]{}"\n]')
_SCALAR = re.compile(rb"[^\s,\[\]{}\"]+")
_QUOTE, _NEWLINE, _BACKSLASH = 0x22, 0x0A, 0x5C
_OPEN, _CLOSE = (0x5B, 0x7B), (0x5D, 0x7D)


def string_end(buf: bytearray, start: int) -> tuple[int, int]:
    """(index of the closing quote, -1) of the string whose bytes continue at `start` (a position not
    right after an escaping backslash), or (-1, where to resume) when the buffer ends first. Each byte
    is looked at a bounded number of times, however the string is cut."""
    while True:
        quote = buf.find(b'"', start)
        if quote < 0:
            return -1, len(buf) + _odd_backslashes(buf, start, len(buf))  # an escape cut in two: skip its byte
        if not _odd_backslashes(buf, start, quote):
            return quote, -1
        start = quote + 1


def _odd_backslashes(buf: bytearray, low: int, end: int) -> int:
    """1 when an odd run of backslashes ends at `end` (not looking before `low`)."""
    k = end
    while k > low and buf[k - 1] == _BACKSLASH:
        k -= 1
    return (end - k) & 1


class _Scan:
    """Where the scan is: offsets into `buf`, which drops what is no longer needed at each refill."""

    def __init__(self, head: bytes):
        self.buf = bytearray(head)
        self.dropped = 0  # bytes of the file before buf[0]
        self.pos = 0
        self.line = 1
        self.depth = 0
        self.start: int | None = None  # offset of the element being kept, None between elements
        self.start_line = 1
        self.start_at = 0  # absolute offset of the current element (for its size)
        self.skipping = False  # the current element is over the limit: scanned, not kept
        self.in_string = False
        self.resume = 0  # inside a string: where its scan continues

    def refill(self, more: bytes) -> None:
        if self.start is not None:
            keep = self.start
        elif self.in_string:
            keep = min(self.resume, len(self.buf))
        else:
            keep = self.pos
        del self.buf[:keep]
        self.dropped += keep
        self.pos -= keep
        self.resume -= keep
        if self.start is not None:
            self.start -= keep
        self.buf += more

    def begin(self, at: int) -> None:
        self.start, self.start_line, self.start_at = at, self.line, self.dropped + at


def array_elements(head: bytes, stream: IO[bytes], name: str, limit: int) -> Iterator[tuple[str, bytes | InputError]]:
    """(source, bytes or error) of each element of the array that starts in `head` (the file's first
    bytes) and continues in `stream`."""
    s = _Scan(head)
    per_line: dict[int, int] = {}
    eof = False

    def element(end: int) -> Iterator[tuple[str, bytes | InputError]]:
        source = _source(name, s.start_line, per_line)
        size = s.dropped + end - s.start_at
        if s.skipping or size > limit:
            yield source, InputError(f"record is {size:,} bytes, over the limit of {limit:,} bytes",
                                     source=source, code="record_too_large")
            s.skipping = False
        else:
            yield source, bytes(s.buf[s.start:end])
        s.start = None

    while True:
        if s.in_string:
            end, resume = string_end(s.buf, s.resume)
            if end < 0:
                s.line += s.buf.count(b"\n", s.resume)
                s.resume = resume
            else:
                s.line += s.buf.count(b"\n", s.resume, end)
                s.in_string, s.pos = False, end + 1
                if s.depth == 1:  # a string directly inside the array is a record
                    yield from element(end + 1)
                continue
            match = None
        else:
            match = _STRUCTURE.search(s.buf, s.pos)
        if match is None:
            if eof:
                break
            more = stream.read(CHUNK)
            eof = not more
            s.refill(more)
            if s.start is not None and len(s.buf) - s.start > limit:
                s.skipping, s.start = True, None  # scanned to its end, never kept whole
            continue
        at = match.start()
        if s.depth == 1 and s.start is None and not s.skipping:
            # Scalars directly inside the array are records too (the shape check rejects them).
            for scalar in _SCALAR.finditer(s.buf, s.pos, at):
                yield _source(name, s.line, per_line), bytes(scalar.group())
        byte, s.pos = s.buf[at], at + 1
        if byte == _QUOTE:
            s.in_string, s.resume = True, at + 1
            if s.depth == 1:
                s.begin(at)
        elif byte == _NEWLINE:
            s.line += 1
        elif byte in _OPEN:
            s.depth += 1
            if s.depth == 2:
                s.begin(at)
        elif byte in _CLOSE:
            s.depth -= 1
            if s.depth == 1:
                yield from element(at + 1)
            elif s.depth == 0:
                return
    source = f"{name}:{s.line}"
    yield source, InputError("file ends inside a JSON array (truncated?)", source=source, code="invalid_json")


def _source(name: str, line: int, per_line: dict[int, int]) -> str:
    """FILE:LINE, and #N for the Nth further record starting on the same line."""
    n = per_line.get(line, 0)
    per_line[line] = n + 1
    return f"{name}:{line}" if n == 0 else f"{name}:{line}#{n}"
