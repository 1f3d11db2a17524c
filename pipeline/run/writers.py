"""Output files that appear complete or not at all: each is written under a temporary name and renamed
when closed. Parquet shards use an explicit schema, so heterogeneous tool schemas and arguments (JSON
strings here) never disturb Arrow type inference."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .. import jsonpolicy
from ..errors import ConfigError
from .arrow_columns import arrow_array, list_array
from .features import json_array, with_features

SCHEMA = with_features(pa.schema([
    ("id", pa.string()),
    ("source", pa.string()),
    ("source_format", pa.string()),
    ("shape", pa.string()),
    ("template", pa.string()),
    ("tokenizer", pa.string()),
    ("input_ids", pa.list_(pa.int32())),
    ("attention_mask", pa.list_(pa.int8())),  # all ones: what pre-tokenized trainers read beside the ids
    ("labels", pa.list_(pa.int32())),
    ("loss_mask", pa.list_(pa.int8())),
    ("num_tokens", pa.int32()),
    ("num_trained_tokens", pa.int32()),
    ("num_messages", pa.int32()),
    ("num_tool_calls", pa.int32()),
    ("trimmed", pa.bool_()),
    # JSON values (Arrow's JSON type, declared Json to `datasets`): the conversation exactly as the template
    # was handed it, chat messages with tool_calls (arguments as objects), and its tool list
    ("messages", pa.json_()),
    ("tools", pa.json_()),
    ("conversation", pa.string()),  # JSON: the canonical conversation
    ("issues", pa.string()),  # JSON: warnings the record kept
    ("ledger", pa.string()),  # JSON: what rendering or export could not carry
    ("export", pa.string()),  # JSON: the [convert] target body, or null
    ("reasoning_row", pa.string()),  # JSON under past_reasoning="expand": case, row, rows, messages, trained
    # sessions and windows (fold.py, window.py)
    ("session", pa.string()),  # the session's id: rows sharing it are branches of one session
    ("folded", pa.int32()),  # records folded into this row (prefixes of it, filtered as prefix_of)
    ("window", pa.int32()),  # this row's index among the windows of its conversation (0 when not windowed)
    ("windows", pa.int32()),  # windows of its conversation (1 when not windowed)
    ("role_tokens", pa.string()),  # JSON: tokens by ROLE_KEYS
]))
# role_tokens: instructions, tool definitions, user and assistant turns, tool results, template scaffolding
ROLE_KEYS = ("system", "tools", "user", "assistant", "tool", "template")
# Derived from a row's ids and mask when the row does not carry them.
_DERIVED = ("labels", "attention_mask")


# What a run writes into its output directory. A new run removes these first (never other files), so
# `data-*.parquet` never picks up a stale shard of an earlier, longer run beside the new ones.
_SHARD_NAME = re.compile(r"(?:data|validation)-\d{5}\.(?:parquet|jsonl)")
RUN_FILES = ("rejects.jsonl", "filtered.jsonl", "near_duplicates.jsonl", "stats.json", "config.json", "qa_report.html")


def clear_earlier_run(directory: Path) -> list[Path]:
    """Remove an earlier run's outputs from `directory`; returns what was removed."""
    removed = []
    for path in sorted(directory.iterdir()):
        if path.is_file() and (path.name in RUN_FILES or _SHARD_NAME.fullmatch(path.name)):
            path.unlink()
            removed.append(path)
    return removed


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


# Rows are written as they come, a row group at a time, so memory holds one row group, never a shard.
ROW_GROUP_ROWS = 256
ROW_GROUP_TOKENS = 1_000_000
# Dictionary encoding only where values repeat (it costs more than it saves on token ids).
_DICTIONARY_COLUMNS = ["source_format", "shape", "template", "tokenizer", "tools", "issues", "ledger", "session"]
# Min/max statistics for the scalar columns only: those of token ids and masks serve no reader (nothing
# filters rows on a token id), and computing them over every token was a sixth of the Parquet write.
_LIST_COLUMNS = ("input_ids", "attention_mask", "labels", "loss_mask")
_STATISTICS_COLUMNS = [name for name in SCHEMA.names if name not in _LIST_COLUMNS]


class ShardWriter:
    """Rows to `data-00000.parquet` (or `.jsonl`) shards of at most `shard_size` rows each. Token columns
    (input_ids, labels, loss_mask) may be lists or numpy arrays; Arrow columns are built from them in
    bulk. A row without `labels` gets them here, from its ids and mask (-100 where masked), which spares
    shipping them from the workers. Row groups close after ROW_GROUP_ROWS rows or ROW_GROUP_TOKENS
    tokens: a function of the rows alone, so the bytes written do not depend on how rows were batched."""

    def __init__(self, directory: Path, fmt: str, shard_size: int, prefix: str = "data"):
        self.directory, self.fmt, self.shard_size, self.prefix = directory, fmt, max(1, shard_size), prefix
        self.rows: list[dict[str, Any]] = []  # the current row group (Parquet)
        self.tokens = 0  # in self.rows
        self.in_shard = 0  # rows written to the open shard
        self.shards: list[Path] = []
        self._sink: Any = None  # the open shard: a ParquetWriter or a file

    def write(self, row: dict[str, Any]) -> None:
        if self._sink is None:
            self._open()
        if self.fmt == "parquet":
            self.rows.append(row)
            self.tokens += len(row["input_ids"])
            if len(self.rows) >= ROW_GROUP_ROWS or self.tokens >= ROW_GROUP_TOKENS:
                self._write_group()
        else:
            if any(name not in row for name in _DERIVED):
                row = {name: row[name] if name not in _DERIVED else _derived(name, row) for name in SCHEMA.names}
            row = {name: value.decode() if type(value) is bytes else value for name, value in row.items()}
            self._sink.write(jsonpolicy.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        self.in_shard += 1
        if self.in_shard >= self.shard_size:
            self._close_shard()

    def close(self) -> list[Path]:
        if self._sink is not None or not self.shards:
            if self._sink is None:
                self._open()  # an empty run still writes one shard with the schema and no row group
            self._close_shard()
        return self.shards

    def abort(self) -> None:
        """Close and remove the shard being written (finished shards stay)."""
        if self._sink is not None:
            sink, self._sink, self.rows = self._sink, None, []
            sink.close()
            atomic_path(self._path()).unlink(missing_ok=True)

    def _path(self) -> Path:
        return self.directory / f"{self.prefix}-{len(self.shards):05d}.{self.fmt}"

    def _open(self) -> None:
        tmp = atomic_path(self._path())
        if self.fmt == "parquet":
            self._sink = pq.ParquetWriter(tmp, SCHEMA, compression="zstd", use_dictionary=_DICTIONARY_COLUMNS,
                                         write_statistics=_STATISTICS_COLUMNS)
        else:
            self._sink = open(tmp, "wb")

    def _write_group(self) -> None:
        if self.rows:
            self._sink.write_table(rows_table(self.rows), row_group_size=len(self.rows))
        self.rows, self.tokens = [], 0

    def _close_shard(self) -> None:
        path = self._path()
        if self.fmt == "parquet":
            # No empty row group: `datasets` reads a row group's size as its batch size, and 0 fails.
            if self.rows:
                self._sink.write_table(rows_table(self.rows), row_group_size=len(self.rows))
            self.rows, self.tokens = [], 0
        self._sink.close()
        self._sink = None
        os.replace(atomic_path(path), path)
        self.shards.append(path)
        self.in_shard = 0


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows as a table of SCHEMA, column by column; list columns from one concatenated buffer each."""
    lists = {name: _list_values([row[name] for row in rows], SCHEMA.field(name).type.value_type)
             for name in ("input_ids", "loss_mask")}
    if any("labels" not in row for row in rows):  # derived for the whole group at once
        offsets, ids = lists["input_ids"]
        lists["labels"] = offsets, _labels(ids, lists["loss_mask"][1])
    else:
        lists["labels"] = _list_values([row["labels"] for row in rows], pa.int32())
    offsets, mask = lists["loss_mask"]
    lists["attention_mask"] = offsets, np.ones(len(mask), dtype=np.int8)
    columns = []
    for field in SCHEMA:
        if isinstance(field.type, pa.JsonType):
            columns.append(json_array([row[field.name] for row in rows]))
        elif field.name in lists:
            offsets, values = lists[field.name]
            columns.append(list_array(offsets, values, field.type.value_type))
        else:
            columns.append(arrow_array([row[field.name] for row in rows], field.type))
    return pa.Table.from_arrays(columns, schema=SCHEMA)


_NUMPY_TYPES = {pa.int32(): np.dtype(np.int32), pa.int8(): np.dtype(np.int8)}


def _list_values(values: list[Any], item: pa.DataType) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, concatenated values) of a list column."""
    dtype = _NUMPY_TYPES[item]  # not item.to_pandas_dtype(): that imports pandas
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum([len(v) for v in values], out=offsets[1:])
    flat = np.concatenate([np.asarray(v, dtype=dtype) for v in values]) if values else np.empty(0, dtype=dtype)
    return offsets, flat


def _derived(name: str, row: dict[str, Any]) -> np.ndarray:
    if name == "attention_mask":
        return np.ones(len(row["input_ids"]), dtype=np.int8)
    return row_labels(row)


def row_labels(row: dict[str, Any]) -> np.ndarray:
    """The row's training labels: its ids, -100 where the mask is 0."""
    return _labels(np.asarray(row["input_ids"], dtype=np.int32), np.asarray(row["loss_mask"], dtype=np.int8))


def _labels(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask != 0, ids, np.int32(-100)).astype(np.int32, copy=False)  # int32 already: no copy


class JsonlFile:
    """A JSONL file renamed into place on close; removed on abort."""

    def __init__(self, path: Path):
        self.path = path
        self.tmp = atomic_path(path)
        self.handle = open(self.tmp, "wb")

    def write(self, obj: Any) -> None:
        self.handle.write(jsonpolicy.dumps(obj, option=orjson.OPT_NON_STR_KEYS) + b"\n")

    def close(self) -> None:
        self.handle.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.handle.close()
        self.tmp.unlink(missing_ok=True)


def write_json(path: Path, obj: Any) -> None:
    tmp = atomic_path(path)
    tmp.write_bytes(jsonpolicy.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    os.replace(tmp, path)
