"""The train / validation split by content hash: the same rows in the same split on every rerun and with
any worker count, each split in its own files (data shards and every export), nothing lost or doubled."""

from __future__ import annotations

import hashlib

import export_runs
from pipeline.run.split import split_of


def test_split_share_follows_the_setting():
    digests = [hashlib.blake2b(str(k).encode(), digest_size=16).hexdigest() for k in range(20_000)]
    share = sum(split_of(d, 0.02) == "validation" for d in digests) / len(digests)
    assert abs(share - 0.02) < 0.004
    assert {split_of(d, 0.0) for d in digests} == {"train"} and {split_of(d, 1.0) for d in digests} == {"validation"}


def _files(out):
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in ("stats.json", "config.json")}


def test_splits_are_stable_across_reruns_and_worker_counts(tmp_path):
    paths = export_runs.inputs(corpus=False)
    settings = {"output.validation": 0.3}
    one = export_runs.run(tmp_path / "one", paths, **settings, **{"run.workers": 1})
    again = export_runs.run(tmp_path / "again", paths, **settings, **{"run.workers": 1})
    two = export_runs.run(tmp_path / "two", paths, **settings, **{"run.workers": 2, "run.batch_size": 3})
    assert _files(one) == _files(again) == _files(two)
    names = set(_files(one))
    assert {"data-00000.parquet", "validation-00000.parquet", "openai/validation.jsonl", "trl/validation.parquet",
            "sharegpt/validation.jsonl", "sharegpt/dataset_info.json"} <= names


def test_each_split_holds_its_own_rows(tmp_path):
    paths = export_runs.inputs(corpus=False)
    whole = export_runs.run(tmp_path / "whole", paths, **{"output.validation": 0})
    split = export_runs.run(tmp_path / "split", paths, **{"output.validation": 0.3})
    assert export_runs.splits(whole) == ["train"] and not list(whole.glob("validation-*"))
    train, validation = export_runs.rows(split, "train"), export_runs.rows(split, "validation")
    assert train and validation
    assert all(split_of(r["id"], 0.3) == "train" for r in train)
    assert all(split_of(r["id"], 0.3) == "validation" for r in validation)
    by_id = lambda rows: sorted(rows, key=lambda r: r["id"])  # noqa: E731
    assert by_id(train + validation) == by_id(export_runs.rows(whole))
    for fmt in export_runs.FORMATS:  # every export's records follow their rows into the split
        pairs = export_runs.paired(split, fmt)
        assert len(pairs) == len(train) + len(validation)


def test_a_rerun_without_split_or_exports_leaves_none_of_their_files(tmp_path):
    paths = export_runs.inputs(corpus=False)
    out = export_runs.run(tmp_path / "out", paths, **{"output.validation": 0.3})
    assert list(out.glob("validation-*.parquet")) and (out / "openai" / "validation.jsonl").is_file()
    export_runs.run(out, paths, **{"output.validation": 0, "export.formats": ["openai"]})
    assert not list(out.glob("validation-*"))
    assert sorted(p.name for p in (out / "openai").iterdir()) == ["train.jsonl"]
    assert not list((out / "trl").iterdir()) and not list((out / "sharegpt").iterdir())
