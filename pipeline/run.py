"""`sftprep run`: a job config to a training set. The parent process reads and writes, in input order;
worker processes parse, validate, shape and render batches of records."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from .config import JobConfig, to_dict
from .ingest import expand_paths, iter_raw
from .readers import RawRecord
from .stages import Context, Item, run_stages
from .stats import Stats
from .writers import JsonlFile, ShardWriter, ensure_dir, write_json


@dataclass
class RunResult:
    stats: Stats
    output_dir: Path
    shards: list[Path]
    seconds: float
    report: Any = None  # the QA report (pipeline.qa.Report) when output.qa_report is on


def run_job(config: JobConfig, *, progress: bool | None = None) -> RunResult:
    started = time.perf_counter()
    paths = expand_paths(config.input.paths)  # missing inputs fail before any work
    out = ensure_dir(config.output.dir)
    ctx = Context(config)
    ctx.renderer  # unknown template or tokenizer fails before any work

    stats = Stats()
    writer = ShardWriter(out, config.output.format, config.output.shard_size)
    rejects = JsonlFile(out / "rejects.jsonl")
    seen_digests: set[str] | None = set() if config.shape.dedup else None  # None: shape.dedup is off
    reporter = _Progress(progress)
    try:
        for items, worker_stats in _execute(_batches(paths, config, stats, rejects), config):
            stats.merge(worker_stats)
            for item in items:
                _finish(item, stats, writer, rejects, seen_digests)
            reporter.update(stats)
        shards = writer.close()
    except BaseException:
        rejects.abort()
        raise
    rejects.close()
    stats.tally("output", "shards", len(shards))
    write_json(out / "stats.json", stats.to_dict())
    write_json(out / "config.json", to_dict(config))
    reporter.done(stats)
    report = None
    if config.output.qa_report:  # built from the files just written, like `sftprep qa` would
        from .qa import build_report, write_html

        report = build_report(out)
        write_html(report, out / "qa_report.html")
    return RunResult(stats, out, shards, time.perf_counter() - started, report)


def _batches(paths: list[Path], config: JobConfig, stats: Stats, rejects: JsonlFile) -> Iterator[list[RawRecord]]:
    """Read stage, in the parent: undecodable records are rejected here, the rest go out in batches."""
    batch: list[RawRecord] = []
    read = stats.stages["read"]
    shape = None if config.input.shape == "auto" else config.input.shape
    for raw in iter_raw(paths, shape=shape, max_record_bytes=config.input.max_record_mb * 1024 * 1024):
        read.seen += 1
        if raw.error is not None:
            read.rejected[raw.error.code] += 1
            rejects.write({"source": raw.source, "stage": "read", "code": raw.error.code,
                           "message": raw.error.message, "path": raw.error.path,
                           "record": raw.raw.decode("utf-8", "replace") if raw.raw else None})
            continue
        read.passed += 1
        batch.append(raw)
        if len(batch) >= config.run.batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _finish(item: Item, stats: Stats, writer: ShardWriter, rejects: JsonlFile, seen: set[str] | None) -> None:
    if item.outcome is not None:
        if item.outcome.kind == "rejected":
            o = item.outcome
            reject = {"source": item.source, "stage": o.stage, "code": o.code, "message": o.message,
                      "path": o.path, "record": item.record}
            if o.detail is not None:  # e.g. the text of a flattened call, for the QA report
                reject["detail"] = o.detail
            rejects.write(reject)
        return
    dedup = stats.stages["dedup"]
    dedup.seen += 1
    if seen is not None and item.digest:
        if item.digest in seen:
            dedup.filtered["duplicate"] += 1
            return
        seen.add(item.digest)
    dedup.passed += 1
    stats.stages["write"].seen += 1
    writer.write(item.rendered)
    stats.stages["write"].passed += 1
    for group, key in item.tallies:
        stats.tally(group, key)


# --- engines --------------------------------------------------------------------------------------

_worker_ctx: Context | None = None


def _init_worker(config: JobConfig) -> None:
    global _worker_ctx
    _worker_ctx = Context(config)


def _work(batch: list[RawRecord]) -> tuple[list[Item], Stats]:
    items, stats = run_stages(batch, _worker_ctx)
    for item in items:  # ship back only what the parent writes
        item.conversation = None
        if item.outcome is None:
            item.record = None
    return items, stats


def _execute(batches: Iterable[list[RawRecord]], config: JobConfig) -> Iterator[tuple[list[Item], Stats]]:
    workers = config.run.workers or os.cpu_count() or 1
    if config.run.engine == "ray":
        from .ray_engine import execute_ray

        yield from execute_ray(batches, config)
        return
    if workers <= 1:
        _init_worker(config)
        for batch in batches:
            yield _work(batch)
        return
    context = multiprocessing.get_context("forkserver" if sys.platform != "win32" else "spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(config,)) as pool:
        # imap keeps input order, so outputs are identical whatever the worker count.
        yield from pool.imap(_work, batches, chunksize=1)


# --- progress -------------------------------------------------------------------------------------

class _Progress:
    """A live line on a terminal; a plain line every few seconds otherwise."""

    def __init__(self, enabled: bool | None):
        self.tty = sys.stderr.isatty() if enabled is None else enabled
        self.enabled = enabled is not False
        self.started = time.perf_counter()
        self.last = 0.0

    def update(self, stats: Stats) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < (0.2 if self.tty else 10.0):
            return
        self.last = now
        rate = stats.read / max(now - self.started, 1e-9)
        line = f"sftprep run: {stats.read} records, {rate:,.0f}/s, {stats.summary_line()}"
        print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)

    def done(self, stats: Stats) -> None:
        if self.enabled and self.tty:
            print("\r", end="", file=sys.stderr)
