"""Output files that appear complete or not at all: each is written under a temporary name and renamed
when closed. Parquet shards use an explicit schema, so heterogeneous tool schemas and arguments (JSON
strings here) never disturb Arrow type inference."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import ConfigError

SCHEMA = pa.schema([
    ("id", pa.string()),
    ("source", pa.string()),
    ("source_format", pa.string()),
    ("shape", pa.string()),
    ("template", pa.string()),
    ("tokenizer", pa.string()),
    ("input_ids", pa.list_(pa.int32())),
    ("labels", pa.list_(pa.int32())),
    ("loss_mask", pa.list_(pa.int8())),
    ("num_tokens", pa.int32()),
    ("num_trained_tokens", pa.int32()),
    ("num_messages", pa.int32()),
    ("num_tool_calls", pa.int32()),
    ("trimmed", pa.bool_()),
    ("messages", pa.string()),  # JSON: chat messages with tool_calls, arguments as objects (TRL style)
    ("tools", pa.string()),  # JSON: [{"type": "function", "function": {...}}]
    ("conversation", pa.string()),  # JSON: the canonical conversation
    ("issues", pa.string()),  # JSON: warnings the record kept
    ("ledger", pa.string()),  # JSON: what rendering or export could not carry
    ("export", pa.string()),  # JSON: the [convert] target body, or null
])


def atomic_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.partial")


def ensure_dir(path: str | Path) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".sftprep-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"cannot write to output directory '{out}': {exc.strerror}",
                          code="unwritable_output") from None
    return out


class ShardWriter:
    """Rows to `data-00000.parquet` (or `.jsonl`) shards of at most `shard_size` rows each."""

    def __init__(self, directory: Path, fmt: str, shard_size: int):
        self.directory, self.fmt, self.shard_size = directory, fmt, max(1, shard_size)
        self.rows: list[dict[str, Any]] = []
        self.shards: list[Path] = []

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.shard_size:
            self._flush()

    def close(self) -> list[Path]:
        if self.rows or not self.shards:
            self._flush()  # an empty run still writes one empty shard: the schema is the contract
        return self.shards

    def _flush(self) -> None:
        path = self.directory / f"data-{len(self.shards):05d}.{self.fmt}"
        tmp = atomic_path(path)
        if self.fmt == "parquet":
            table = pa.Table.from_pylist(self.rows, schema=SCHEMA)
            pq.write_table(table, tmp, compression="zstd")
        else:
            with open(tmp, "wb") as handle:
                for row in self.rows:
                    handle.write(orjson.dumps(row) + b"\n")
        os.replace(tmp, path)
        self.shards.append(path)
        self.rows = []


class JsonlFile:
    """A JSONL file renamed into place on close; removed on abort."""

    def __init__(self, path: Path):
        self.path = path
        self.tmp = atomic_path(path)
        self.handle = open(self.tmp, "wb")

    def write(self, obj: Any) -> None:
        self.handle.write(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS) + b"\n")

    def close(self) -> None:
        self.handle.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.handle.close()
        self.tmp.unlink(missing_ok=True)


def write_json(path: Path, obj: Any) -> None:
    tmp = atomic_path(path)
    tmp.write_bytes(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    os.replace(tmp, path)
