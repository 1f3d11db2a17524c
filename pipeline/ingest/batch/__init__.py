"""Batch API results joined with their requests on `custom_id`.

OpenAI Batch (platform.openai.com/docs/guides/batch): the input file has one request per line,
`{"custom_id", "method", "url", "body"}`; the output and error files one result per line,
`{"id", "custom_id", "response": {"status_code", "request_id", "body"} | null, "error": {"code", "message"} | null}`.
Anthropic Message Batches (docs.anthropic.com, Message Batches API): requests `{"custom_id", "params"}` (JSONL,
or the create body `{"requests": [...]}`), results `{"custom_id", "result": {"type": "succeeded", "message"} |
{"type": "errored", "error"} | {"type": "canceled"} | {"type": "expired"}}`.

A results file is the input: each line is one record, its conversation the request's history plus the
result's answer. Results come in any order, so the requests files beside it (same directory) are indexed
first, by `custom_id` -> byte offset: requests are read one at a time when their result comes, never all
in memory. The requests files are that index, not records of their own, when a results file sits beside
them; alone, their lines are ordinary request records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import orjson

from ...errors import InputError
from ..readers import RawRecord, open_bytes, read_records
from .results import SHAPES, BatchResult, parse

_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".json", ".json.gz")


def _first_value(path: str | Path) -> Any:
    try:
        with open_bytes(path) as stream:
            for _ in range(4):
                line = stream.readline(1 << 20)
                if not line:
                    return None
                if line.strip():
                    return orjson.loads(line)
    except Exception:  # a detector answers, it does not fail
        return None
    return None


def results_kind(path: str | Path) -> str | None:
    """'openai-batch' or 'anthropic-batch' when the file's first line is a batch result."""
    if not str(path).endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        return None
    value = _first_value(path)
    if not isinstance(value, dict) or not isinstance(value.get("custom_id"), str):
        return None
    if isinstance(value.get("result"), dict) and "type" in value["result"]:
        return "anthropic-batch"
    if "response" in value and "error" in value and "body" not in value:
        return "openai-batch"
    return None


def requests_kind(path: str | Path) -> str | None:
    """'openai-batch' or 'anthropic-batch' when the file holds batch requests."""
    name = str(path)
    if name.endswith((".json", ".json.gz")):
        value = _head_document(path)
        return "anthropic-batch" if value else None
    value = _first_value(path) if name.endswith(_SUFFIXES) else None
    if not isinstance(value, dict) or not isinstance(value.get("custom_id"), str):
        return None
    if isinstance(value.get("params"), dict):
        return "anthropic-batch"
    if isinstance(value.get("body"), dict) and isinstance(value.get("url"), str):
        return "openai-batch"
    return None


def _head_document(path: str | Path) -> bool:
    """A JSON document that starts like the Anthropic create body `{"requests": [{"custom_id", ...`."""
    try:
        with open_bytes(path) as stream:
            head = stream.read(4096)
    except Exception:
        return False
    compact = b"".join(head.split())
    return compact.startswith(b'{"requests":[{"custom_id"') or compact.startswith(b'{"requests":[{"params"')


def is_index_of_results(path: str | Path) -> bool:
    """A requests file with a results file of its kind beside it: read as that file's index only."""
    kind = requests_kind(path)
    return kind is not None and any(results_kind(p) == kind for p in _siblings(path))


def _siblings(path: str | Path) -> list[Path]:
    folder = Path(path).parent
    try:
        return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_SUFFIXES) and p != Path(path))
    except OSError:
        return []


@dataclass
class _Where:
    path: Path
    offset: int  # -1: held in `value` (a JSON document's element)
    size: int
    line: int
    value: Any = None


class RequestIndex:
    """`custom_id` -> where its request is, over every requests file of one kind in a directory."""

    def __init__(self, kind: str, files: list[Path], limit: int):
        self.kind, self.limit = kind, limit
        self.entries: dict[str, _Where] = {}
        self.duplicates: dict[str, list[str]] = {}
        for path in files:
            self._add_file(path)

    def _add(self, custom_id: Any, where: _Where) -> None:
        if not isinstance(custom_id, str):
            return
        if custom_id in self.entries:
            first = self.entries[custom_id]
            self.duplicates.setdefault(custom_id, [f"{first.path}:{first.line}"]).append(f"{where.path}:{where.line}")
            return
        self.entries[custom_id] = where

    def _add_file(self, path: Path) -> None:
        if str(path).endswith((".json", ".json.gz")):
            for raw in read_records(path, max_record_bytes=self.limit):
                requests = raw.value.get("requests") if isinstance(raw.value, dict) else None
                for i, item in enumerate(requests if isinstance(requests, list) else []):
                    if isinstance(item, dict):
                        self._add(item.get("custom_id"), _Where(path, -1, 0, 1, {**item, "_at": f"$.requests[{i}]"}))
            return
        offset, line = 0, 0
        with open_bytes(path) as stream:
            for text in stream:
                line += 1
                if text.strip() and len(text) <= self.limit:
                    try:
                        value = orjson.loads(text)
                    except orjson.JSONDecodeError:
                        value = None  # a broken request line: its result is rejected as unmatched
                    if isinstance(value, dict):
                        self._add(value.get("custom_id"), _Where(path, offset, len(text), line))
                offset += len(text)

    def request(self, custom_id: str) -> tuple[str, Any] | None:
        """(source, request) of one custom_id, read from its file now."""
        where = self.entries.get(custom_id)
        if where is None:
            return None
        if where.offset < 0:
            return f"{where.path}:{where.line}#{where.value['_at'][2:]}", {k: v for k, v in where.value.items()
                                                                           if k != "_at"}
        with open_bytes(where.path) as stream:
            if stream.seekable():
                stream.seek(where.offset)
            else:  # gzip without random access: read forward to the offset
                stream.read(where.offset)
            return f"{where.path}:{where.line}", orjson.loads(stream.read(where.size))


def read_results(path: str | Path, kind: str, limit: int) -> Iterator[RawRecord]:
    """One record per result line, each carrying its request (or None when no request has its id)."""
    files = [p for p in _siblings(path) if requests_kind(p) == kind]
    index = RequestIndex(kind, files, limit)
    for raw in read_records(path, max_record_bytes=limit):
        if raw.error is not None:
            yield raw
            continue
        value = raw.value
        custom_id = value.get("custom_id") if isinstance(value, dict) else None
        if not isinstance(custom_id, str):
            yield RawRecord(raw.source, BatchResult(kind, None, value, None, None, [os.fspath(p) for p in files]))
            continue
        found = None
        try:
            found = index.request(custom_id)
        except (OSError, orjson.JSONDecodeError) as exc:
            yield RawRecord(raw.source, None, InputError(f"cannot read the request of '{custom_id}': {exc}",
                                                         source=raw.source, code="unreadable_file"))
            continue
        yield RawRecord(raw.source, BatchResult(kind, custom_id, value, found[1] if found else None,
                                                found[0] if found else None, [os.fspath(p) for p in files],
                                                index.duplicates.get(custom_id)))


__all__ = ["SHAPES", "BatchResult", "is_index_of_results", "parse", "read_results", "requests_kind", "results_kind"]
