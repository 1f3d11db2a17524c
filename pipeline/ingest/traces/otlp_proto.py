"""OTLP protobuf trace files, as the collector's file exporter writes them with `format: proto`: each
ExportTraceServiceRequest preceded by its size as a big-endian uint32. Messages are decoded with
opentelemetry-proto and turned into the OTLP JSON mapping (trace and span ids in hex, as the JSON encoding
writes them), so the same span readers apply. One message at a time is in memory."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ..readers import RawRecord, open_bytes

SUFFIXES = (".binpb", ".pb", ".binpb.gz", ".pb.gz")
_IDS = ("traceId", "spanId", "parentSpanId")


def detect(path: str | Path) -> bool:
    """A length-prefixed OTLP message: the size, then field 1 (resource_spans) as a length-delimited field."""
    if not str(path).endswith(SUFFIXES):
        return False
    try:
        with open_bytes(path) as stream:
            head = stream.read(5)
    except OSError:
        return False
    return len(head) == 5 and int.from_bytes(head[:4], "big") > 0 and head[4] == 0x0A


def read_messages(path: str | Path, limit: int) -> Iterator[RawRecord]:
    """One record per message, sourced `FILE:N` (the N-th message), each an OTLP JSON export."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    with open_bytes(path) as stream:
        number = 0
        while True:
            prefix = stream.read(4)
            if not prefix:
                return
            number += 1
            source = f"{path}:{number}"
            size = int.from_bytes(prefix, "big") if len(prefix) == 4 else -1
            if size < 0:
                yield RawRecord(source, None, InputError("the file ends inside a message's size prefix (truncated?)",
                                                         source=source, code="truncated_file"))
                return
            if size > limit:
                yield RawRecord(source, None, InputError(f"message is {size:,} bytes, over the limit of {limit:,}",
                                                         source=source, code="record_too_large"))
                stream.read(size)
                continue
            data = stream.read(size)
            if len(data) < size:
                yield RawRecord(source, None, InputError(f"the file ends {size - len(data):,} bytes into a message "
                                                         "(truncated?)", source=source, code="truncated_file"))
                return
            message = ExportTraceServiceRequest()
            try:
                message.ParseFromString(data)
            except DecodeError as exc:
                yield RawRecord(source, None, InputError(f"not an OTLP ExportTraceServiceRequest: {exc}", source=source,
                                                         code="invalid_protobuf"), data[:4096])
                continue
            yield RawRecord(source, _hex_ids(MessageToDict(message)))


def _hex_ids(export: dict) -> dict:
    """The JSON mapping of protobuf writes bytes as base64; OTLP JSON writes trace and span ids as hex."""
    for rs in export.get("resourceSpans") or []:
        for ss in rs.get("scopeSpans") or []:
            for span in ss.get("spans") or []:
                _fix(span)
                for link in span.get("links") or []:
                    _fix(link)
    return export


def _fix(obj: dict[str, Any]) -> None:
    for key in _IDS:
        if isinstance(obj.get(key), str):
            obj[key] = base64.b64decode(obj[key]).hex()
