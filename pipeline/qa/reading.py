"""Reading what a run wrote, for the report: data files a chunk of rows at a time, and rejects.jsonl
with a short excerpt of each rejected record."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any, Iterator, Union

import msgspec
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .. import jsonpolicy
from ..run.writers import SCHEMA

PREVIEW = 240  # characters of transcript text in an excerpt

ROW_COLUMNS = ["id", "source", "source_format", "shape", "template", "tokenizer", "num_tokens",
               "num_trained_tokens", "num_messages", "num_tool_calls", "trimmed", "conversation", "issues", "ledger",
               "session", "folded", "window", "windows", "role_tokens",
               "reasoning_row"]

_FILE = r"^(.*):\d+(?:#.*)?$"  # sources are FILE:LINE or FILE:LINE#N

CHUNK_ROWS = 1024  # rows decoded at a time: the report's memory follows this, not the shard size


def read_chunks(path: Path, rows: int | None = None) -> Iterator[pl.DataFrame]:
    """A data file's rows, `rows` (CHUNK_ROWS) at a time; at least one frame, maybe empty."""
    rows = rows or CHUNK_ROWS
    if path.suffix == ".parquet":
        shard = pq.ParquetFile(path)
        # Shards of runs before a column existed: read what is there, the rest as nulls.
        present = [c for c in ROW_COLUMNS if c in shard.schema_arrow.names]
        batches = shard.iter_batches(batch_size=rows, columns=present)
        frames = (_with_columns(pl.from_arrow(pa.Table.from_batches([batch]))) for batch in batches)
    else:
        frames = (pl.read_ndjson(io.BytesIO(b"".join(lines)), schema=_row_schema()).select(ROW_COLUMNS)
                  for lines in _line_chunks(path, rows))
    empty = True
    for frame in frames:
        empty = False
        yield frame
    if empty:
        yield pl.DataFrame(schema=_row_schema()).select(ROW_COLUMNS)


def shard_problem(path: Path) -> str | None:
    """Why `path` is not a data shard of a run (None when it is one): a shard that cannot be opened,
    or whose columns are not the run's. Checked before reading, so a foreign file is named, not summed."""
    try:
        if path.suffix == ".parquet":
            names = set(pq.ParquetFile(path).schema_arrow.names)
        else:
            with open(path, "rb") as handle:
                first = next((line for line in handle if line.strip()), None)
            if first is None:
                return None  # an empty JSONL shard: a run that wrote nothing
            row = jsonpolicy.loads(first)
            names = set(row) if isinstance(row, dict) else set()
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"cannot be read ({exc})"
    missing = [c for c in ROW_COLUMNS if c not in names]
    return f"not a data shard of a run (no {', '.join(missing[:3])} column)" if missing else None


def _with_columns(frame: pl.DataFrame) -> pl.DataFrame:
    schema = _row_schema()
    missing = [pl.lit(None, dtype=schema[c]).alias(c) for c in ROW_COLUMNS if c not in frame.columns]
    return frame.with_columns(missing).select(ROW_COLUMNS) if missing else frame


def _line_chunks(path: Path, rows: int) -> Iterator[list[bytes]]:
    with open(path, "rb") as handle:
        chunk: list[bytes] = []
        for line in handle:
            if line.strip():
                chunk.append(line)
            if len(chunk) >= rows:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


def _row_schema() -> pl.Schema:
    return pl.DataFrame(pl.from_arrow(SCHEMA.empty_table())).schema


class _StageShape(msgspec.Struct):
    in_: int = msgspec.field(name="in")
    passed: int
    rejected: dict[str, int]
    filtered: dict[str, int]


class _StatsShape(msgspec.Struct):
    """What the report reads of stats.json (other keys are allowed): checked before use."""

    records: dict[str, Union[int, bool]]
    stages: dict[str, _StageShape]
    tallies: dict[str, dict[str, int]] = {}


def load_json(path: Path | None, problems: list[str], *, stats: bool = False) -> dict | None:
    """A JSON object file (stats.json, config.json), or None with a note in `problems` saying what is
    wrong with it (unreadable, truncated, not an object, not shaped like a run's stats)."""
    if path is None:
        return None
    try:
        value = jsonpolicy.loads(path.read_bytes())
        if not isinstance(value, dict):
            raise ValueError(f"a JSON {type(value).__name__}, not an object")
        if stats:
            msgspec.convert(value, _StatsShape)
    except OSError as exc:
        problems.append(f"{path}: cannot be read ({exc.strerror}); its figures are left out")
        return None
    except (ValueError, msgspec.ValidationError) as exc:  # JsonPolicyError is a ValueError
        problems.append(f"{path}: {exc} (truncated or not written by sftprep?); its figures are left out")
        return None
    return value


def read_rejects(path: Path | None, problems: list[str] | None = None) -> pl.DataFrame:
    """rejects.jsonl as a frame. Read as JSON line by line: `record` is any JSON (or undecodable text),
    which no columnar schema holds; only a short excerpt of it is kept. A line that is not a JSON
    object is left out, with a note in `problems` naming it."""
    rows: dict[str, list[Any]] = {k: [] for k in ("line", "source", "stage", "code", "message", "path",
                                                  "family", "text", "excerpt")}
    for n, obj in _objects(path, problems, "a reject"):
        detail = obj.get("detail") if isinstance(obj.get("detail"), dict) else {}
        rows["line"].append(n)
        for key in ("source", "stage", "code", "message", "path"):
            rows[key].append(str(obj.get(key) or ""))
        rows["family"].append(_string_or_none(detail.get("family")))
        rows["text"].append(_string_or_none(detail.get("text")))
        rows["excerpt"].append(_record_excerpt(obj.get("record"), obj.get("path"), obj.get("stage")))
    schema = {"line": pl.Int64, "family": pl.String, "text": pl.String} | {
        k: pl.String for k in ("source", "stage", "code", "message", "path", "excerpt")}
    return pl.DataFrame(rows, schema=schema).with_columns(file=_file(pl.col("source")))


def read_filtered(path: Path | None, problems: list[str] | None = None) -> pl.DataFrame:
    """filtered.jsonl as a frame: one line per filtered record (source, stage, reason, message). A line
    that is not a JSON object is left out, with a note in `problems` naming it."""
    keys = ("source", "stage", "reason", "message")
    rows: dict[str, list[Any]] = {"line": []} | {k: [] for k in keys}
    for n, obj in _objects(path, problems, "a filtered record"):
        rows["line"].append(n)
        for key in keys:
            rows[key].append(str(obj.get(key) or ""))
    schema = {"line": pl.Int64} | {k: pl.String for k in keys}
    return pl.DataFrame(rows, schema=schema).with_columns(file=_file(pl.col("source")))


def _objects(path: Path | None, problems: list[str] | None, what: str) -> Iterator[tuple[int, dict]]:
    """(0-based line, object) of each JSON-object line of a JSONL file; other lines noted and skipped."""
    if path is None:
        return
    with open(path, "rb") as handle:
        for n, line in enumerate(handle):
            if not line.strip():
                continue
            try:
                obj = jsonpolicy.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError(f"a JSON {type(obj).__name__}, not an object")
            except ValueError as exc:
                if problems is not None:
                    problems.append(f"{path}:{n + 1}: not {what} ({exc}); line left out")
                continue
            yield n, obj


def _string_or_none(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else str(value)


def _record_excerpt(record: Any, path: Any, stage: Any) -> str:
    """What the rejected record holds at the error's path; paths of read and parse errors point into
    the record itself (later stages point into the canonical form, so show the record's start)."""
    if isinstance(record, str):
        return _clip(record)
    if record is None:
        return ""
    if stage in ("read", "parse") and isinstance(path, str) and path != "$":
        found = _resolve(record, path)
        if found is not _MISSING:
            return _clip(f"{path} = " + jsonpolicy.dumps(found).decode())
    return _clip(jsonpolicy.dumps(record).decode())


_MISSING = object()


def _resolve(value: Any, path: str) -> Any:
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path[1:]):
        if name and isinstance(value, dict) and name in value:
            value = value[name]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _MISSING
    return value


def _clip(text: str, limit: int = PREVIEW) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _file(source: pl.Expr) -> pl.Expr:
    return source.str.extract(_FILE, 1).fill_null(source)


def _folder(file: pl.Expr) -> pl.Expr:
    return file.str.extract(r"^(.*)/[^/]*$", 1).fill_null(".")


def _clip_expr(text: pl.Expr, limit: int = PREVIEW) -> pl.Expr:
    return pl.when(text.str.len_chars() > limit).then(text.str.slice(0, limit - 1) + "…").otherwise(text)
