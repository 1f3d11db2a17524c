"""The local engine's worker processes: results in submission order whatever the worker count, a bug in a
worker raised in the parent, a worker that dies reported rather than waited for."""

from __future__ import annotations

import os
import signal

import pytest

from corpus import ROOT
from pipeline.run.config import load_config
from pipeline.ingest import iter_raw
from pipeline.run.local import Workers

DATA = ROOT / "data"


@pytest.fixture(scope="module")
def config():
    return load_config(ROOT / "configs" / "default.toml", {"output.qa_report": False})


@pytest.fixture(scope="module")
def batches():
    raws = list(iter_raw(sorted(DATA.glob("*.jsonl"))))
    return [raws[i:i + 3] for i in range(0, len(raws), 3)]


def _sources(results):
    return [item.source for items, _ in results for item in items]


def test_results_come_back_in_submission_order(config, batches):
    pool = Workers(3, config)
    try:
        results = list(pool.map(iter(batches)))
    finally:
        pool.close()
    assert _sources(results) == [raw.source for batch in batches for raw in batch]
    assert sum(stats.stages["read"].seen for _, stats in results) == sum(map(len, batches))
    assert all(not p.is_alive() for p in pool.processes)


def test_a_bug_in_a_worker_is_raised_in_the_parent(config, batches):
    pool = Workers(2, config)
    try:
        with pytest.raises(AttributeError):  # not a record: run_stages fails, as a bug would
            list(pool.map(iter([batches[0], [object()], batches[1]])))
    finally:
        pool.close()
    assert all(not p.is_alive() for p in pool.processes)


def test_a_dead_worker_is_reported_not_waited_for(config, batches):
    pool = Workers(1, config)
    try:
        os.kill(pool.processes[0].pid, signal.SIGKILL)
        pool.processes[0].join(timeout=30)
        with pytest.raises((RuntimeError, OSError)):
            list(pool.map(iter(batches)))
    finally:
        pool.close()
