"""`sftprep run`: a job config to a training set. The parent process reads and writes, in input order;
worker processes parse, validate, shape and render batches of records."""

from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
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
    reporter = _Progress(progress, sum(p.stat().st_size for p in paths))
    out = ensure_dir(config.output.dir)
    ctx = Context(config)
    ctx.renderer  # unknown template or tokenizer fails before any work

    stats = Stats()
    writer = ShardWriter(out, config.output.format, config.output.shard_size)
    rejects = JsonlFile(out / "rejects.jsonl")
    seen_digests: set[str] | None = set() if config.shape.dedup else None  # None: shape.dedup is off
    # What exists now (tokenizer, template, modules, the caller's objects) outlives the loop: the cyclic
    # garbage collector need not walk it over and over while results stream through (a fifth of the
    # parent's time otherwise). Undone at the end, unless the caller had frozen objects of its own.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        for items, worker_stats in _execute(_batches(paths, config, reporter), config):
            stats.merge(worker_stats)
            for item in items:
                _finish(item, stats, writer, rejects, seen_digests)
            reporter.update(stats)
        shards = writer.close()
    except BaseException:
        # Interrupted or failed: no half file stays behind (finished shards are whole).
        rejects.abort()
        writer.abort()
        for partial in out.glob(".*.partial"):
            partial.unlink(missing_ok=True)
        reporter.done(stats)
        raise
    finally:
        if freeze:
            gc.unfreeze()
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


def _batches(paths: list[Path], config: JobConfig, reporter: "_Progress") -> Iterator[list[RawRecord]]:
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
        reporter.bytes_read += path.stat().st_size
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


def _init_worker(config: JobConfig, ignore_interrupt: bool = False, own_process: bool = False) -> None:
    global _worker_ctx
    if ignore_interrupt:
        # Ctrl-C reaches the whole process group: the parent alone handles it, stopping the pool;
        # a worker dying mid-task would leave the parent waiting for its result.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_ctx = Context(config)
    if own_process:
        # The tokenizer, template and modules live as long as the worker: keep the cyclic garbage
        # collector from walking them again and again (about a seventh of a worker's time otherwise).
        try:
            _worker_ctx.renderer
        except Exception:  # the parent checked this config; if it still fails, the batches will say why
            return
        gc.collect()
        gc.freeze()


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
    pool = _Workers(workers, config)
    try:
        yield from pool.map(batches)
    finally:
        pool.close()


class _Workers:
    """Worker processes, each fed over a pipe of its own by this thread alone: no pool threads and no
    shared, locked queues between the parent and the workers (multiprocessing.Pool's machinery cost the
    parent about five times the CPU of the transfers themselves). Results come back in submission order,
    so outputs are identical whatever the worker count; at most two batches per worker are in flight,
    so memory stays flat however large the input (or slow the writing) is."""

    def __init__(self, count: int, config: JobConfig):
        context = multiprocessing.get_context(_start_method())
        self.connections: list[Any] = []
        self.processes: list[Any] = []
        self.finished = False
        try:
            for _ in range(count):
                here, there = context.Pipe()
                process = context.Process(target=_worker_main, args=(there, config), daemon=True)
                process.start()
                there.close()
                self.connections.append(here)
                self.processes.append(process)
        except BaseException:
            self.close()
            raise

    def map(self, batches: Iterable[list[RawRecord]]) -> Iterator[tuple[list[Item], Stats]]:
        busy = [0] * len(self.connections)
        window: deque[int] = deque()  # worker of each batch in flight, in submission order
        for batch in batches:
            if len(window) >= 2 * len(self.connections):
                yield self._result(window, busy)
            index = min(range(len(busy)), key=busy.__getitem__)  # least busy; ties to the lowest index
            self.connections[index].send_bytes(ForkingPickler.dumps(batch))
            busy[index] += 1
            window.append(index)
        while window:
            yield self._result(window, busy)
        self.finished = True

    def _result(self, window: deque[int], busy: list[int]) -> tuple[list[Item], Stats]:
        index = window.popleft()
        busy[index] -= 1
        try:
            ok, value = ForkingPickler.loads(self.connections[index].recv_bytes())
        except EOFError:
            raise RuntimeError(f"worker process {self.processes[index].pid} died "
                               f"(exit code {self.processes[index].exitcode})") from None
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Stop the workers: politely after a complete run, at once otherwise (Ctrl-C, an error)."""
        for connection in self.connections:
            if self.finished:
                try:
                    connection.send_bytes(b"")  # no pickle is empty: the stop signal
                except OSError:
                    pass
            connection.close()
        for process in self.processes:
            if not self.finished:
                process.terminate()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()


def _start_method() -> str:
    """fork on Linux when this process runs no other thread: the workers start with the modules,
    tokenizer and template already loaded (a second each otherwise). forkserver otherwise: forking a
    process whose other threads may hold locks is not safe."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return "fork"
    return "forkserver" if sys.platform != "win32" else "spawn"


def _worker_main(connection: Any, config: JobConfig) -> None:
    """A worker's life: batches in, (ok, result or exception) out, until the stop signal. A thread takes
    batches off the pipe as they arrive, so the parent never waits on a worker busy sending a result."""
    _init_worker(config, ignore_interrupt=True, own_process=True)
    inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def receive() -> None:
        try:
            while True:
                inbox.put(connection.recv_bytes())
        except (EOFError, OSError):  # the parent went away
            inbox.put(b"")

    threading.Thread(target=receive, daemon=True).start()
    while data := inbox.get():
        try:
            reply: tuple[bool, Any] = (True, _work(ForkingPickler.loads(data)))
        except Exception as exc:  # a bug, not a bad record (those are rejects): the parent raises it
            reply = (False, _picklable(exc))
        try:
            connection.send_bytes(ForkingPickler.dumps(reply))
        except (BrokenPipeError, OSError):
            return


def _picklable(exc: Exception) -> Exception:
    try:
        ForkingPickler.dumps(exc)
        return exc
    except Exception:
        return RuntimeError("".join(traceback.format_exception(exc)))


# --- progress -------------------------------------------------------------------------------------

class _Progress:
    """A live bar with records/s and an ETA (from input bytes read) on a terminal; a plain line every
    ten seconds otherwise."""

    def __init__(self, enabled: bool | None, total_bytes: int):
        self.enabled = enabled is not False
        self.tty = sys.stderr.isatty() if enabled is None else bool(enabled)
        self.total_bytes = max(total_bytes, 1)
        self.bytes_read = 0
        self.started = time.perf_counter()
        self.last = 0.0

    def update(self, stats: Stats) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < (0.2 if self.tty else 10.0):
            return
        self.last = now
        elapsed = max(now - self.started, 1e-9)
        done = min(self.bytes_read / self.total_bytes, 1.0)
        eta = f"ETA {elapsed * (1 - done) / done:,.0f}s" if done > 0 else "ETA ?"
        rate = f"{stats.read / elapsed:,.0f} records/s"
        if self.tty:
            width = 24
            bar = "#" * int(done * width) + "-" * (width - int(done * width))
            print(f"\r[{bar}] {done:4.0%} {rate}, {eta}  {stats.summary_line()}", end="", file=sys.stderr,
                  flush=True)
        else:
            print(f"sftprep run: {done:.0%} of input, {rate}, {eta}, {stats.summary_line()}", file=sys.stderr,
                  flush=True)

    def done(self, stats: Stats) -> None:
        if self.enabled and self.tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
