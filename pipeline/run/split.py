"""Where a written row goes: the train or validation split (by its content hash, so the same row lands
in the same split on every rerun, with any number of workers), as a data shard and as a record of each
export format. Train shards keep the name `data-*`; validation shards are `validation-*`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import JobConfig
from .exports import FORMATS
from .exports.files import ExportFiles
from .writers import ShardWriter

_SCALE = 1 << 32


def split_of(digest: str, validation: float) -> str:
    """"validation" for the share `validation` of content hashes, "train" for the rest. The first 8 hex
    digits of the hash are uniform, so the share holds to within sampling error."""
    if validation <= 0 or not digest:
        return "train"
    return "validation" if int(digest[:8], 16) < validation * _SCALE else "train"


class Outputs:
    """The run's data writers, one per split, and its export files."""

    def __init__(self, directory: Path, config: JobConfig):
        output = config.output
        self.directory = directory
        self.validation = output.validation
        self.splits = ["train", "validation"] if self.validation > 0 else ["train"]
        self.shards = {split: ShardWriter(directory, output.format, output.shard_size,
                                          prefix="data" if split == "train" else split) for split in self.splits}
        formats = list(dict.fromkeys(config.export.formats))
        last_only = config.render.mask.split(",")[0].strip() == "last"
        self.exports = ExportFiles(directory, formats, self.splits, last_only) if formats else None
        self.counts: dict[str, int] = {}

    def write(self, row: dict[str, Any]) -> None:
        split = split_of(row["id"], self.validation)
        records = row.pop("exports", None)
        self.shards[split].write(row)
        if self.exports is not None and records is not None:
            self.exports.write(split, records)

    def close(self) -> list[Path]:
        shards = [path for split in self.splits for path in self.shards[split].close()]
        written = set(shards)
        if self.exports is not None:
            self.counts = self.exports.close()
            written |= self.exports.paths()
        self._remove_stale(written)
        return shards

    def _remove_stale(self, written: set[Path]) -> None:
        """Export files an earlier run left here and this one did not write: a loader globbing the folder
        would read them beside the new ones (shards of either split are cleared before the run)."""
        stale = []
        for name in FORMATS:
            stale += [self.directory / name / f"{split}.{ext}" for split in ("train", "validation")
                      for ext in ("jsonl", "parquet")]
            stale.append(self.directory / name / "dataset_info.json")
        for path in stale:
            if path not in written and path.is_file():
                path.unlink()

    def abort(self) -> None:
        for writer in self.shards.values():
            writer.abort()
        if self.exports is not None:
            self.exports.abort()
