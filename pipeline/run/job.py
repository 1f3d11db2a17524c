"""A job config to a training set. The parent process reads and writes, in input order; worker
processes (the local engine's or Ray's) parse, validate, shape and render batches of records."""

from __future__ import annotations

import gc
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from msgspec.structs import replace

from ..ingest import RawRecord, expand_paths, iter_raw
from .config import JobConfig, to_dict
from .fold import Folder
from .item import Item, drop
from .local import Workers
from .lock import OutputLock, remove_leftovers
from .progress import Progress
from .stages import Context
from .split import Outputs
from .stats import Stats
from .worker import GC_THRESHOLD, init_worker, work
from .writers import JsonlFile, clear_earlier_run, ensure_dir, write_json


@dataclass
class RunResult:
    stats: Stats
    output_dir: Path
    shards: list[Path]
    seconds: float
    report: Any = None  # the QA report (pipeline.qa.Report), built after the run by `pipeline.run_job`


def execute_job(config: JobConfig, *, progress: bool | None = None) -> RunResult:
    """Run the job without its QA report (`pipeline.run_job` adds it when the config asks)."""
    started = time.perf_counter()
    paths = expand_paths(config.input.paths)  # missing inputs fail before any work
    reporter = Progress(progress, sum(_size(p) for p in paths))
    config = resolved(config)
    ctx = Context(config)  # unknown validation codes fail here, before any work
    renderer = ctx.renderer  # unknown template or tokenizer, or a misfit of the two, fails before any work
    out = ensure_dir(config.output.dir)
    with OutputLock(out):  # a second run into this directory refuses here, before any work
        clear_earlier_run(out)  # only now: a job that fails its checks leaves the earlier run whole
        remove_leftovers(out)  # half files of a killed run
        return _execute_into(out, paths, config, renderer, reporter, started)


def _execute_into(out: Path, paths: list[Path], config: JobConfig, renderer, reporter: Progress,
                  started: float) -> RunResult:
    stats = Stats()
    encoder = renderer.tokenizer.segment_encoder
    stats.tally("tokenizer_backend", encoder.fast.name if encoder.fast is not None else "hf")
    if encoder.fast is None and config.render.tokenizer_backend == "auto":
        print(f"sftprep run: {renderer.backend_note}", file=sys.stderr)
    writer = Outputs(out, config)  # data shards per split, and the [export] files
    rejects = JsonlFile(out / "rejects.jsonl")
    filtered = JsonlFile(out / "filtered.jsonl")
    # digest -> the source first written with it; None: shape.dedup is off
    seen_digests: dict[str, str] | None = {} if config.shape.dedup else None
    near = _NearDedup(out, config.shape.near_dedup_threshold) if config.shape.near_dedup else None
    # What exists now (tokenizer, template, modules, the caller's objects) outlives the loop: the cyclic
    # garbage collector need not walk it over and over while results stream through (a fifth of the
    # parent's time otherwise). Undone at the end, unless the caller had frozen objects of its own.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    threshold = gc.get_threshold()  # and the collector seldom runs while results stream (see worker.py)
    gc.set_threshold(max(threshold[0], GC_THRESHOLD), *threshold[1:])
    try:
        folder = Folder(config.shape.sessions, config.shape.session_window, stats)
        for items, worker_stats in _execute(_batches(paths, config, reporter), config):
            stats.merge(worker_stats)
            for item in items:
                _dedup(item, stats, seen_digests, near)
                for ready in folder.push(item):
                    _finish(ready, stats, writer, (rejects, filtered))
            reporter.update(stats)
        for ready in folder.close():
            _finish(ready, stats, writer, (rejects, filtered))
        shards = writer.close()
        rejects.close()
        filtered.close()
        if near is not None:
            near.file.close()
        stats.tally("output", "shards", len(shards))
        for key, count in writer.counts.items():
            stats.tally("export", key, count)
        write_json(out / "stats.json", stats.to_dict())
        write_json(out / "config.json", to_dict(config))
    except BaseException:
        # Interrupted or failed (Ctrl-C, SIGTERM, the disk full): no half file stays behind (finished
        # shards are whole), and cleaning up never raises over the error that stopped the run.
        sinks = (rejects, filtered, *([near.file] if near is not None else []))
        for abort in (*(sink.abort for sink in sinks), writer.abort, lambda: remove_leftovers(out)):
            try:
                abort()
            except OSError:
                pass
        reporter.done(stats)
        raise
    finally:
        gc.set_threshold(*threshold)
        if freeze:
            gc.unfreeze()
    reporter.done(stats)
    return RunResult(stats, out, shards, time.perf_counter() - started)


def resolved(config: JobConfig) -> JobConfig:
    """The job with the tokenizer its template implies written in, so config.json says what was used."""
    from ..render import tokenizer_for

    render = replace(config.render, tokenizer=tokenizer_for(config.render.template, config.render.tokenizer))
    return replace(config, render=render)


def _batches(paths: list[Path], config: JobConfig, reporter: "Progress") -> Iterator[list[RawRecord]]:
    """Records in input order, in batches. It only reads: every count and every file write happens as
    results come back, in order."""
    batch: list[RawRecord] = []
    shape = None if config.input.shape == "auto" else config.input.shape
    limit = config.input.max_record_mb * 1024 * 1024
    for path in paths:
        # Deferred: the workers decode the bytes (shipping bytes costs far less than pickled values).
        for raw in iter_raw([path], shape=shape, max_record_bytes=limit, defer=True):
            batch.append(raw)
            if len(batch) >= config.run.batch_size:
                yield batch
                batch = []
        reporter.bytes_read += _size(path)
    if batch:
        yield batch


def _size(path: Path) -> int:
    """For progress only: a file gone since it was listed is the reader's to report, not a crash here."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _NearDedup:
    """The near-duplicate index and `near_duplicates.jsonl`: each filtered row beside the row it keeps."""

    def __init__(self, out: Path, threshold: float):
        from .near_dedup import NearDuplicates

        self.index = NearDuplicates(threshold)
        self.file = JsonlFile(out / "near_duplicates.jsonl")

    def check(self, item: Item) -> tuple[str, str, float] | None:
        """(kept row id, its source, similarity) for a near-duplicate, listed in the file; else None."""
        row = item.rendered
        kept = self.index.check(row["id"], item.source, item.minhash)
        if kept is not None:
            self.file.write({"source": item.source, "id": row["id"], "reason": "near_duplicate_of",
                             "kept_source": kept[1], "kept_id": kept[0], "similarity": round(kept[2], 4),
                             "num_tokens": row["num_tokens"]})
        return kept


def _dedup(item: Item, stats: Stats, seen: dict[str, str] | None, near: _NearDedup | None = None) -> None:
    if item.outcome is not None:
        return
    dedup = stats.stages["dedup"]
    dedup.seen += 1
    if seen is not None and item.digest:
        first = seen.get(item.digest)
        if first is not None:
            dedup.filtered["duplicate"] += 1
            drop(item, "dedup", "duplicate", f"same content as {first}")
            return
        seen[item.digest] = item.source
    if near is not None and item.minhash is not None:
        kept = near.check(item)
        if kept is not None:
            dedup.filtered["near_duplicate_of"] += 1
            drop(item, "dedup", "near_duplicate_of", f"{kept[2]:.0%} similar to {kept[1]}")
            return
    dedup.passed += 1


def _finish(item: Item, stats: Stats, writer: Outputs, sinks: tuple[JsonlFile, JsonlFile]) -> None:
    rejects, filtered = sinks
    if item.outcome is not None:
        o = item.outcome
        if o.kind == "rejected":
            reject = {"source": item.source, "stage": o.stage, "code": o.code, "message": o.message,
                      "path": o.path, "record": item.record}
            if o.detail is not None:  # e.g. the text of a flattened call, for the QA report
                reject["detail"] = o.detail
            rejects.write(reject)
        else:
            entry = {"source": item.source, "stage": o.stage, "reason": o.code, "message": o.message}
            if o.detail is not None:  # a folded record's keeper
                entry["detail"] = o.detail
            filtered.write(entry)
        return
    stats.stages["write"].seen += 1
    for row in [*(item.windows or [item.rendered]), *item.extra_rows]:
        writer.write(row)
        stats.tally("output", "rows")
    stats.stages["write"].passed += 1
    for group, key, *n in item.tallies:
        stats.tally(group, key, *n)


# --- engines --------------------------------------------------------------------------------------

def _execute(batches: Iterable[list[RawRecord]], config: JobConfig) -> Iterator[tuple[list[Item], Stats]]:
    workers = config.run.workers or os.cpu_count() or 1
    if config.run.engine == "ray":
        from .ray_engine import execute_ray

        yield from execute_ray(batches, config)
        return
    if workers <= 1:
        init_worker(config)
        for batch in batches:
            yield work(batch)
        return
    pool = Workers(workers, config)
    try:
        yield from pool.map(batches)
    finally:
        pool.close()


