"""The export files, per format and split, each written whole or not at all (renamed into place on
close): `openai/train.jsonl`, `trl/train.parquet`, `sharegpt/train.jsonl` with `sharegpt/dataset_info.json`,
and `validation.*` beside each when the run splits."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ... import jsonpolicy
from ..features import json_array, with_features
from ..writers import JsonlFile, atomic_path, write_json
from .sharegpt import dataset_info

_ROWS_PER_GROUP = 256


class TrlFile:
    """TRL rows as Parquet whose columns are declared JSON values to `datasets` (Json features): loaded
    messages keep each call's own argument keys, never one merged struct."""

    def __init__(self, path: Path, columns: tuple[str, ...]):
        self.path, self.columns = path, columns
        self.schema = with_features(pa.schema([(name, pa.json_()) for name in columns]))
        self.writer = pq.ParquetWriter(atomic_path(path), self.schema, compression="zstd")
        self.rows: list[dict[str, Any]] = []

    def write(self, record: dict[str, Any]) -> None:
        self.rows.append(record)
        if len(self.rows) >= _ROWS_PER_GROUP:
            self._flush()

    def _flush(self) -> None:
        arrays = [json_array([jsonpolicy.dumps_text(row[name]) for row in self.rows]) for name in self.columns]
        self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.rows = []

    def close(self) -> None:
        if self.rows:
            self._flush()
        self.writer.close()
        os.replace(atomic_path(self.path), self.path)

    def abort(self) -> None:
        self.writer.close()
        atomic_path(self.path).unlink(missing_ok=True)


class ExportFiles:
    def __init__(self, directory: Path, formats: list[str], splits: list[str], last_only: bool):
        self.directory = directory
        self.files: dict[tuple[str, str], Any] = {}
        self.counts: dict[tuple[str, str], int] = {}
        for name in formats:
            folder = directory / name
            folder.mkdir(exist_ok=True)
            for split in splits:
                if name == "trl":
                    columns = ("prompt", "completion", "tools") if last_only else ("messages", "tools")
                    self.files[name, split] = TrlFile(folder / f"{split}.parquet", columns)
                else:
                    self.files[name, split] = JsonlFile(folder / f"{split}.jsonl")
                self.counts[name, split] = 0
        self.splits = splits

    def write(self, split: str, records: dict[str, dict[str, Any] | None]) -> None:
        for name, record in records.items():
            if record is not None:
                self.files[name, split].write(record)
                self.counts[name, split] += 1

    def close(self) -> dict[str, int]:
        for file in self.files.values():
            file.close()
        if any(name == "sharegpt" for name, _ in self.files):
            write_json(self.directory / "sharegpt" / "dataset_info.json",
                       dataset_info({split: f"{split}.jsonl" for split in self.splits}))
        return {f"{name}:{split}": count for (name, split), count in sorted(self.counts.items())}

    def paths(self) -> set[Path]:
        found = {file.path for file in self.files.values()}
        if any(name == "sharegpt" for name, _ in self.files):
            found.add(self.directory / "sharegpt" / "dataset_info.json")
        return found

    def abort(self) -> None:
        for file in self.files.values():
            file.abort()
