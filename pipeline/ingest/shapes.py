"""From input paths to canonical conversations: which files, which records, which format and shape.

Every record read comes out as exactly one `Parsed`: a conversation, or the error that stopped it.
"""

from __future__ import annotations

import glob
import os
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from msgspec.structs import replace

from .. import formats, jsonpolicy
from ..conversation import Conversation
from ..errors import ConfigError, InputError, InternalError, ParseError, SftprepError, ShapeError
from . import batch, canonical, sharegpt, traces
from .exchange import check_finished, is_exchange, is_recording, parse_exchange, with_retrieved
from .readers import DEFAULT_MAX_RECORD_BYTES, RawRecord, open_bytes, read_records, source_name
from . import sessions
from .sessions import claude_code

INPUT_SUFFIXES = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz", ".eval", ".binpb")
# Logged streams (server-sent events or one chunk per line): each exchange in one is a record.
STREAM_SUFFIXES = (".sse", ".txt", ".sse.gz", ".txt.gz")


class Parsed(NamedTuple):
    source: str
    record: Any  # the original JSON value (None when it could not be decoded)
    conversation: Conversation | None
    error: SftprepError | None = None


def expand_paths(inputs: Iterable[str]) -> list[Path]:
    """Files named, matched by a glob, or found (recursively) under a directory, in a stable order.
    Globs apply only to names that are not existing paths. A name that matches nothing is an error
    before any work starts."""
    out: list[Path] = []
    for item in inputs:
        # An existing path is read as named, whatever it holds (`cassette[vercel].json` is no glob).
        if not os.path.exists(item) and any(ch in item for ch in "*?["):
            matches = sorted(Path(p) for p in glob.glob(item, recursive=True) if os.path.isfile(p))
            if not matches:
                raise ConfigError(f"no input files match '{item}'", code="no_input")
            out.extend(matches)
        elif os.path.isdir(item):
            found = sorted(p for p in Path(item).rglob("*") if p.is_file()
                           and (p.name.endswith(INPUT_SUFFIXES) or _is_stream_log(p)))
            if not found:
                raise ConfigError(f"directory '{item}' holds no input files ({', '.join(INPUT_SUFFIXES)})",
                                  code="no_input")
            out.extend(found)
        elif os.path.isfile(item):
            out.append(Path(item))
        else:
            raise ConfigError(f"input '{item}' does not exist", code="no_input")
    return out


RECORD_SHAPES = ("request", "messages", "response", "exchange", "session", "sharegpt", *traces.SHAPES,
                 *batch.SHAPES, *sessions.SHAPES)
# What --from accepts: the wire formats and the canonical form itself.
INPUT_FORMATS = (*formats.FORMATS, canonical.NAME)


def is_session_log(path: str | Path) -> bool:
    """A Claude Code session log: a whole file is one conversation, detected from its first lines."""
    name = str(path)
    if not name.endswith((".jsonl", ".jsonl.gz")):
        return False
    try:
        with open_bytes(path) as stream:
            head = [stream.readline(1 << 20).decode("utf-8", "replace") for _ in range(8)]
    except (OSError, EOFError, zlib.error):
        return False
    return claude_code.detect_session(head)


def _is_stream_log(path: Path) -> bool:
    """A .txt/.sse file found in a directory is an input only when it holds a provider's event stream."""
    if not path.name.endswith(STREAM_SUFFIXES):
        return False
    try:
        with open_bytes(path) as stream:
            head = stream.read(1 << 16).decode("utf-8", "replace")
    except (OSError, EOFError, zlib.error):
        return False
    from .streams import detect_stream

    return detect_stream(head) is not None


def _holds_chunk_lines(path: str | Path) -> bool:
    """A JSON-lines file whose first line is a stream chunk or event (an SDK logger writing each chunk it
    got): a logged stream, read like a .sse file, not a record per line."""
    if not str(path).endswith((".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")):
        return False
    try:
        with open_bytes(path) as stream:
            line = stream.readline(1 << 20)
            while line and not line.strip():
                line = stream.readline(1 << 20)
        first = jsonpolicy.loads(line)
    except (OSError, EOFError, zlib.error, ValueError):
        return False
    from .streams import is_chunk

    return is_chunk(first)


def _stream_records(path: Path, limit: int) -> Iterator[RawRecord]:
    """The response objects a logged stream reassembles into, one record per exchange."""
    from .streams import reassemble_all

    source = f"{source_name(path)}:1"
    try:
        with open_bytes(path) as stream:
            data = stream.read(limit + 1)
        if len(data) > limit:
            raise InputError(f"stream log is over the limit of {limit:,} bytes", code="record_too_large")
        found = reassemble_all(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        yield RawRecord(source, None, InputError(f"not valid UTF-8 at byte {exc.start}", source=source,
                                                 code="invalid_utf8"))
        return
    except (OSError, EOFError, zlib.error) as exc:
        yield RawRecord(source, None, InputError(f"cannot read file: {exc}", source=source, code="unreadable_file"))
        return
    except SftprepError as exc:
        yield RawRecord(source, None, exc.at(source))
        return
    for i, exchange in enumerate(found):
        yield RawRecord(source if len(found) == 1 else f"{source}#responses[{i}]", exchange.body)


def _session_record(path: str | Path) -> RawRecord:
    name = source_name(path)
    try:
        result = claude_code.read_session(_numbered(path), name)
    except SftprepError as exc:
        return RawRecord(exc.source or name, None, exc)
    except (OSError, EOFError, zlib.error) as exc:
        return RawRecord(f"{name}:1", None, InputError(f"cannot read file: {exc}", source=f"{name}:1",
                                                       code="unreadable_file"))
    except Exception as exc:  # noqa: BLE001 - one file's surprise is that file's rejection
        return RawRecord(f"{name}:1", None, InternalError(exc, stage="read", source=f"{name}:1"))
    return RawRecord(f"{name}:1", result)


def _numbered(path: str | Path) -> Iterator[tuple[int, str]]:
    """Lines as text. Bytes that are not UTF-8 become lone surrogates, which no JSON reader accepts: the
    line is then broken like any other (a rejection naming it; a note when it is the cut-off last line),
    where replacing them would change the session's text unseen."""
    with open_bytes(path) as stream:
        for number, line in enumerate(stream, start=1):
            yield number, line.decode("utf-8", "surrogateescape")


def parse_record(value: Any, source: str, *, fmt: str | None = None, shape: str | None = None,
                 strict: bool = False, keep_original: bool = False) -> Conversation:
    """One decoded record to a conversation; errors carry the source."""
    try:
        if isinstance(value, claude_code.SessionResult):
            conv = claude_code.to_conversation(value, strict=strict)
            value = value.body
        elif traces.is_trace_record(value) or shape in traces.SHAPES:
            conv = traces.parse(value, shape, fmt=fmt, strict=strict)
        elif isinstance(value, batch.BatchResult):
            conv = batch.parse(value, fmt=fmt, strict=strict)
        elif (session := sessions.record_source(value)) is not None:
            conv = session.to_conversation(value, strict=strict)
        elif fmt == canonical.NAME or (fmt is None and shape is None and canonical.is_canonical(value)):
            conv = canonical.parse(value)
        elif shape is None and _is_error_body(value):
            error = value["error"]
            text = error.get("message") if isinstance(error, dict) else error
            raise ParseError(f"the record is an API error, not a conversation: {str(text)[:200]}",
                             path="$.error", code="error_response")
        elif shape == "sharegpt" or (shape is None and sharegpt.is_sharegpt(value)):
            conv = sharegpt.parse(value if isinstance(value, dict) else {}, strict=strict)
        elif shape is None and isinstance(value, dict) and isinstance(value.get("traj"), list):
            # Agent-benchmark trajectory files (tau-bench): the messages under `traj`, the rest is metadata.
            conv = formats.parse(value["traj"], fmt, "messages", strict=strict)
            conv = replace(conv, meta=replace(conv.meta, shape="trajectory"))
        elif shape == "exchange" or (shape is None and is_exchange(value)):
            if not is_exchange(value):
                raise ShapeError("not an exchange: expected an object with 'request' and 'response'")
            conv = parse_exchange(value, fmt=fmt, strict=strict)
        else:
            conv = formats.parse(value, fmt, shape, strict=strict)
            check_finished(conv, value)
    except SftprepError as exc:
        raise exc.at(source)
    changes: dict[str, Any] = {"meta": replace(conv.meta, source=source)}
    if keep_original:
        changes["original"] = value
    return replace(conv, **changes)


def iter_raw(paths: Iterable[str | Path], *, shape: str | None = None,
             max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, defer: bool = False) -> Iterator[RawRecord]:
    """Every record of every file, undecoded ones included. An HTTP recording's exchanges are records
    of their own, each with its own source; a session log is one record. With `defer`, records of JSON
    files come as bytes, to be decoded and split where they are parsed (`expand`)."""
    for path in paths:
        if shape == "session" or (shape is None and is_session_log(path)):
            yield _session_record(path)
            continue
        if str(path).endswith(STREAM_SUFFIXES) or (shape is None and _holds_chunk_lines(path)):
            yield from _stream_records(path, max_record_bytes)
            continue
        if traces.otlp_proto.detect(path):
            for raw in traces.otlp_proto.read_messages(path, max_record_bytes):
                yield from expand(raw)
            continue
        session = sessions.source_for(path, shape)
        if session is not None:
            yield from session.read(path, max_record_bytes)
            continue
        kind = shape if shape in batch.SHAPES else (batch.results_kind(path) if shape is None else None)
        if kind is not None:
            yield from batch.read_results(path, kind, max_record_bytes)
            continue
        if shape is None and batch.is_index_of_results(path):
            continue  # the requests of a batch whose results file beside it is read (joined there)
        for raw in read_records(path, max_record_bytes=max_record_bytes, defer=defer, whole_if=_whole_if(shape)):
            if raw.deferred:
                yield raw
            else:
                yield from expand(raw)


def _whole_if(shape: str | None) -> Callable[[Any], bool] | None:
    """When a top-level JSON array is one conversation rather than a list of records: its elements
    are messages (decided from the first), or `--shape messages` says so."""
    if shape == "messages":
        return lambda _first: True
    if shape is None:
        from .streams import is_chunk

        return lambda first: formats.is_message(first) or is_chunk(first)
    return None


def expand(raw: RawRecord) -> Iterator[RawRecord]:
    """A record decoded, an HTTP recording split into one record per exchange, a trace export into one
    record per span."""
    raw = raw.decoded()
    if raw.error is None and is_recording(raw.value):
        for i, interaction in enumerate(with_retrieved(raw.value["interactions"])):
            yield RawRecord(f"{raw.source}#interactions[{i}]", interaction)
    elif raw.error is None and isinstance(raw.value, list) and raw.value and _is_chunk(raw.value[0]):
        yield from _chunk_records(raw)
    elif raw.error is None and traces.is_trace_export(raw.value):
        for path, span, record in traces.split(raw.value):
            source = raw.source if path == "$" else f"{raw.source}#{path[2:]}"
            if isinstance(record, SftprepError):
                yield RawRecord(source, None, record.at(source), traces.span_bytes(span))
            else:
                yield RawRecord(source, record)
    else:
        yield raw


def _is_chunk(value: Any) -> bool:
    from .streams import is_chunk

    return is_chunk(value)


def _chunk_records(raw: RawRecord) -> Iterator[RawRecord]:
    """A JSON array of stream chunks: the responses it reassembles into, one record each (one, usually;
    an agent loop logged as one stream holds several). A broken stream is one rejection, at its chunk."""
    from .streams import reassemble_all

    try:
        found = reassemble_all(raw.value)
    except SftprepError as exc:
        if exc.path.startswith("$.events"):  # the events are the array's elements
            exc.path = "$" + exc.path[len("$.events"):]
        yield RawRecord(raw.source, None, exc.at(raw.source), raw.raw or jsonpolicy.dumps(raw.value)[:4096])
        return
    for i, response in enumerate(found):
        yield RawRecord(raw.source if len(found) == 1 else f"{raw.source}#responses[{i}]", response.body)


def iter_parsed(paths: Iterable[str | Path], *, fmt: str | None = None, shape: str | None = None,
                strict: bool = False, keep_original: bool = False,
                max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator[Parsed]:
    for raw in iter_raw(paths, shape=shape, max_record_bytes=max_record_bytes):
        yield _parse_raw(raw, fmt=fmt, shape=shape, strict=strict, keep_original=keep_original)


def _is_error_body(value: Any) -> bool:
    return (isinstance(value, dict) and "error" in value and value["error"] is not None
            and not ({"messages", "contents", "input", "choices", "candidates", "output", "content"} & value.keys()))


def _parse_raw(raw: RawRecord, **options: Any) -> Parsed:
    if raw.error is not None:
        return Parsed(raw.source, _undecoded(raw), None, raw.error)
    try:
        return Parsed(raw.source, raw.value, parse_record(raw.value, raw.source, **options))
    except SftprepError as exc:
        return Parsed(raw.source, raw.value, None, exc)
    except Exception as exc:  # noqa: BLE001 - one record's surprise is that record's rejection
        return Parsed(raw.source, raw.value, None, InternalError(exc, stage="parse", source=raw.source))


def _undecoded(raw: RawRecord) -> Any:
    if raw.raw is None:
        return None
    return raw.raw.decode("utf-8", "replace")

