"""Reading records from files without loading them whole: JSONL line by line, a JSON document or a
top-level JSON array element by element, gzip transparently. Every record carries `FILE:LINE`.

A bad record never stops the reader: it is yielded with its error, and the next one follows.
"""

from __future__ import annotations

import codecs
import gzip
import io
import os
import zlib
from pathlib import Path
from typing import IO, Any, Callable, Iterator, NamedTuple, cast

from .. import jsonpolicy
from ..errors import InputError, InternalError
from .json_array import array_elements

DEFAULT_MAX_RECORD_BYTES = 32 * 1024 * 1024
_CHUNK = 1 << 20


class RawRecord(NamedTuple):
    source: str  # FILE:LINE (FILE:LINE#N when several records start on one line)
    value: Any  # the decoded JSON value, or None when `error` is set or decoding is deferred
    error: InputError | None = None
    raw: bytes | None = None  # the undecodable bytes, kept for the rejects file (truncated)
    deferred: bool = False  # `raw` holds the record's whole bytes, not decoded yet (see `decoded`)

    def decoded(self) -> "RawRecord":
        """This record with its bytes decoded (itself when not deferred). Deferring lets a reader hand
        bytes to the process that will parse them: cheaper to ship than the decoded value."""
        return decode(self.raw, self.source) if self.deferred else self


Emit = Callable[[bytes, str], RawRecord]  # bytes + source -> record (decoded now, or deferred)


def open_bytes(path: str | Path) -> IO[bytes]:
    """The file's bytes as UTF-8, decompressed when it is gzip (by its magic number, not its name). A
    byte order mark is the file's, not its first record's: a UTF-8 one is skipped, and a UTF-16 or
    UTF-32 file (what Windows PowerShell's `>` writes) is read as the UTF-8 it encodes."""
    handle = open(path, "rb")
    magic = handle.read(2)
    handle.seek(0)
    stream: IO[bytes] = gzip.GzipFile(fileobj=handle, mode="rb") if magic == b"\x1f\x8b" else handle
    head = stream.read(4)
    stream.seek(0)
    if head.startswith(codecs.BOM_UTF8):
        return cast(IO[bytes], _Skipped(stream, len(codecs.BOM_UTF8)))
    for bom, encoding in _WIDE_BOMS:
        if head.startswith(bom):
            return cast(IO[bytes], _Transcoded(stream, encoding))
    return stream


# UTF-32 first: its little-endian mark begins with UTF-16's.
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
              (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


class _Skipped:
    """A byte stream past its first `skip` bytes: offsets, tell and seek count from there."""

    def __init__(self, inner: IO[bytes], skip: int):
        self._inner, self._skip = inner, skip
        inner.seek(skip)

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)

    def readline(self, size: int = -1) -> bytes:
        return self._inner.readline(size)

    def seekable(self) -> bool:
        return self._inner.seekable()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._inner.seek(offset + self._skip if whence == os.SEEK_SET else offset, whence) - self._skip

    def tell(self) -> int:
        return self._inner.tell() - self._skip

    def close(self) -> None:
        self._inner.close()

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def __enter__(self) -> "_Skipped":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Transcoded(_Skipped):
    """A UTF-16 or UTF-32 byte stream as UTF-8 bytes, decoded as it is read. An unpaired surrogate
    comes through as bytes that are not UTF-8, so its record is rejected like any other such bytes.
    Offsets count UTF-8 bytes, so only rewinding to the start is possible."""

    def __init__(self, inner: IO[bytes], encoding: str):
        self._inner, self._skip, self._encoding = inner, 0, encoding
        self._text = self._wrap()

    def _wrap(self) -> io.TextIOWrapper:
        return io.TextIOWrapper(self._inner, encoding=self._encoding, errors="surrogatepass", newline="")

    def read(self, size: int = -1) -> bytes:
        return self._text.read(size).encode("utf-8", "surrogatepass")

    def readline(self, size: int = -1) -> bytes:
        return self._text.readline(size).encode("utf-8", "surrogatepass")

    def seekable(self) -> bool:
        return False

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if offset != 0 or whence != os.SEEK_SET:
            raise io.UnsupportedOperation("a transcoded stream rewinds only to its start")
        self._text.detach()
        self._inner.seek(0)
        self._text = self._wrap()
        return 0

    def tell(self) -> int:
        raise io.UnsupportedOperation("a transcoded stream has no byte offsets")

    def close(self) -> None:
        self._text.close()


def read_records(path: str | Path, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                 defer: bool = False, whole_if: Callable[[Any], bool] | None = None) -> Iterator[RawRecord]:
    """Records of one file. `.jsonl` (or `.jsonl.gz`, `.ndjson`): one per line. Anything else: one JSON
    document, which is a record, or a top-level array whose elements are records, unless `whole_if`
    holds for its first element (a message, not a record): then the array is one record. With
    `defer`, records come undecoded (`RawRecord.decoded()` decodes them)."""
    emit = _deferred if defer else decode
    name = source_name(path)
    stem = name[:-3] if name.endswith(".gz") else name
    try:
        with open_bytes(path) as stream:
            if stem.endswith((".jsonl", ".ndjson")):
                yield from _jsonl(stream, name, max_record_bytes, emit)
            else:
                yield from _json_document(stream, name, max_record_bytes, emit, whole_if)
    except (OSError, EOFError, zlib.error) as exc:
        # A corrupt or truncated gzip surfaces mid-read: report it and stop this file only.
        yield RawRecord(f"{name}:?", None, InputError(f"cannot read file: {exc}", source=name, code="unreadable_file"))
    except Exception as exc:  # noqa: BLE001 - a reader bug: this file stops here, and a reject says why
        yield RawRecord(f"{name}:?", None, InternalError(exc, stage="read", source=name))


def source_name(path: str | Path) -> str:
    """The file's name as sources print it: bytes that are not UTF-8 (a name from another system) as
    `\\xff` escapes, so every writer can carry the source."""
    name = os.fspath(path)
    return name if name.isprintable() or not any(0xDC80 <= ord(c) <= 0xDCFF for c in name) else \
        os.fsencode(name).decode("utf-8", "backslashreplace")


def decode(data: bytes, source: str) -> RawRecord:
    try:
        return RawRecord(source, jsonpolicy.loads(data))
    except jsonpolicy.JsonPolicyError as exc:
        return RawRecord(source, None, _decode_error(data, exc, source), data[:4096])


def _deferred(data: bytes, source: str) -> RawRecord:
    return RawRecord(source, None, None, data, deferred=True)


def _decode_error(data: bytes, exc: jsonpolicy.JsonPolicyError, source: str) -> InputError:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as bad:
        return InputError(f"not valid UTF-8: byte 0x{data[bad.start]:02x} at offset {bad.start}",
                          source=source, code="invalid_utf8")
    if exc.code != "invalid_json":  # valid JSON the policy refuses (too deep, a number too large)
        return InputError(exc.message, source=source, code=exc.code, path=exc.path)
    return InputError(f"invalid JSON: {exc}", source=source, code="invalid_json")


def _jsonl(stream: IO[bytes], name: str, limit: int, emit: Emit) -> Iterator[RawRecord]:
    line_no = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        line_no += 1
        source = f"{name}:{line_no}"
        if len(line) > limit and not line.endswith(b"\n"):
            size = len(line) + _skip_line(stream)
            yield RawRecord(source, None, InputError(
                f"record is {size:,} bytes, over the limit of {limit:,} bytes", source=source,
                code="record_too_large"))
            continue
        if line.strip():
            yield emit(line, source)


def _skip_line(stream: IO[bytes]) -> int:
    skipped = 0
    while True:
        piece = stream.readline(_CHUNK)
        skipped += len(piece)
        if not piece or piece.endswith(b"\n"):
            return skipped


def _json_document(stream: IO[bytes], name: str, limit: int, emit: Emit,
                   whole_if: Callable[[Any], bool] | None) -> Iterator[RawRecord]:
    head = stream.read(_CHUNK)
    if head.lstrip()[:1] != b"[":
        yield _whole_document(head, stream, name, limit, emit)
        return
    elements = _array_elements(head, stream, name, limit, emit)
    first = next(elements, None)
    if first is None:
        return
    probe = first.decoded() if whole_if is not None else first
    if probe.error is None and whole_if is not None and whole_if(probe.value):
        elements.close()
        stream.seek(0)  # plain and gzip streams both rewind
        yield _whole_document(stream.read(_CHUNK), stream, name, limit, emit)
        return
    yield first
    yield from elements


def _whole_document(head: bytes, stream: IO[bytes], name: str, limit: int, emit: Emit) -> RawRecord:
    data = head + stream.read(limit + 1 - len(head)) if len(head) <= limit else head
    if len(data) > limit:
        return RawRecord(f"{name}:1", None, InputError(
            f"document is over the limit of {limit:,} bytes", source=f"{name}:1", code="record_too_large"))
    return emit(data, f"{name}:1")


def _array_elements(head: bytes, stream: IO[bytes], name: str, limit: int, emit: Emit) -> Iterator[RawRecord]:
    for source, data in array_elements(head, stream, name, limit):
        yield RawRecord(source, None, data) if isinstance(data, InputError) else emit(data, source)
