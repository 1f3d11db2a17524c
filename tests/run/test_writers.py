"""Shard writing: token columns given as numpy arrays or as lists give the same files; row groups bound
memory without changing the rows; shards split by row count; unfinished shards never stay behind."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.run import writers
from pipeline.run.writers import SCHEMA, ShardWriter


def _row(k: int, *, arrays: bool) -> dict:
    n = 5 + k % 9
    ids = [151644 + (k * 7 + i) % 3 if i == 0 else (k * 31 + i * 17) % 151000 for i in range(n)]
    mask = [1 if i % 3 == 2 else 0 for i in range(n)]
    labels = [t if m else -100 for t, m in zip(ids, mask)]
    row = {"id": f"{k:032x}", "source": f"in.jsonl:{k + 1}", "source_format": "openai-chat", "shape": "request",
           "template": "chatml", "tokenizer": "qwen2.5", "input_ids": ids, "labels": labels, "loss_mask": mask,
           "num_tokens": n, "num_trained_tokens": sum(mask), "num_messages": 2, "num_tool_calls": k % 2,
           "trimmed": False, "messages": json.dumps([{"role": "user", "content": f"q{k} ü"}]), "tools": "[]",
           "conversation": "{}", "issues": "[]", "ledger": "[]", "export": None if k % 3 else "{}",
           "reasoning_row": None,
           "session": f"s{k // 4}", "folded": k % 2, "window": 0, "windows": 1, "role_tokens": "{}"}
    if arrays:
        row["input_ids"] = np.array(ids, dtype=np.int32)
        row["labels"] = np.array(labels, dtype=np.int32)
        row["loss_mask"] = np.array(mask, dtype=np.int8)
    return row


def _write(directory, rows, fmt="parquet", shard_size=10_000):
    writer = ShardWriter(directory, fmt, shard_size)
    for row in rows:
        writer.write(row)
    return writer.close()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_arrays_and_lists_give_the_same_bytes(tmp_path, fmt):
    (tmp_path / "a").mkdir()
    (tmp_path / "l").mkdir()
    from_arrays = _write(tmp_path / "a", [_row(k, arrays=True) for k in range(40)], fmt)
    from_lists = _write(tmp_path / "l", [_row(k, arrays=False) for k in range(40)], fmt)
    assert [p.read_bytes() for p in from_arrays] == [p.read_bytes() for p in from_lists]


def test_rows_survive_row_groups_and_shards(tmp_path, monkeypatch):
    monkeypatch.setattr(writers, "ROW_GROUP_ROWS", 4)
    monkeypatch.setattr(writers, "ROW_GROUP_TOKENS", 30)  # some groups close on tokens, before 4 rows
    rows = [_row(k, arrays=True) for k in range(23)]
    shards = _write(tmp_path, rows, shard_size=10)
    assert [p.name for p in shards] == ["data-00000.parquet", "data-00001.parquet", "data-00002.parquet"]
    tables = [pq.read_table(p) for p in shards]
    assert [t.num_rows for t in tables] == [10, 10, 3]
    assert all(t.schema.equals(SCHEMA) for t in tables)
    assert pq.ParquetFile(shards[0]).metadata.num_row_groups > 2
    written = [r for t in tables for r in t.to_pylist()]
    expected = [_row(k, arrays=False) for k in range(23)]
    for row in expected:  # written as all ones: every token is attended
        row["attention_mask"] = [1] * len(row["input_ids"])
    assert written == [{name: row[name] for name in SCHEMA.names} for row in expected]
    assert not list(tmp_path.glob(".*.partial"))


def test_an_empty_run_writes_one_empty_shard_with_the_schema(tmp_path):
    (shard,) = _write(tmp_path, [])
    table = pq.read_table(shard)
    assert table.num_rows == 0 and table.schema.equals(SCHEMA)


def test_abort_leaves_only_finished_shards(tmp_path):
    writer = ShardWriter(tmp_path, "parquet", 3)
    for k in range(5):
        writer.write(_row(k, arrays=True))
    writer.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data-00000.parquet"]
    assert pq.read_table(tmp_path / "data-00000.parquet").num_rows == 3


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_labels_are_derived_when_a_row_has_none(tmp_path, fmt):
    """Workers leave labels to the writer: the file is the one written from rows that carry them."""
    (tmp_path / "given").mkdir()
    (tmp_path / "derived").mkdir()
    given = _write(tmp_path / "given", [_row(k, arrays=True) for k in range(30)], fmt)
    rows = [_row(k, arrays=True) for k in range(30)]
    for row in rows:
        del row["labels"]
    derived = _write(tmp_path / "derived", rows, fmt)
    assert [p.read_bytes() for p in derived] == [p.read_bytes() for p in given]


_JSON_COLUMNS = ("messages", "tools", "conversation", "issues", "ledger", "export", "reasoning_row")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_json_columns_as_utf8_bytes_give_the_same_bytes(tmp_path, fmt):
    # The workers ship JSON columns as the encoder's UTF-8 bytes: the files equal those of str values.
    (tmp_path / "b").mkdir()
    (tmp_path / "s").mkdir()
    as_bytes = [_row(k, arrays=True) for k in range(40)]
    for row in as_bytes:
        row.update({name: row[name].encode() for name in _JSON_COLUMNS if row[name] is not None})
    from_bytes = _write(tmp_path / "b", as_bytes, fmt)
    from_str = _write(tmp_path / "s", [_row(k, arrays=True) for k in range(40)], fmt)
    assert [p.read_bytes() for p in from_bytes] == [p.read_bytes() for p in from_str]


def test_statistics_are_kept_for_every_column_but_the_token_lists(tmp_path):
    (shard,) = _write(tmp_path, [_row(k, arrays=True) for k in range(40)])
    group = pq.ParquetFile(shard).metadata.row_group(0)
    kept = {group.column(c).path_in_schema: group.column(c).is_stats_set for c in range(group.num_columns)}
    assert {path for path, is_set in kept.items() if not is_set} == {
        f"{name}.list.element" for name in ("input_ids", "attention_mask", "labels", "loss_mask")}
    assert kept["num_tokens"] and kept["id"] and kept["conversation"]
