"""The Ray engine for `sftprep run`: the worker stages (parse..render) on Ray actors, the parent still
reading, deduplicating and writing in input order, so the outputs are byte-identical to the local engine's.

Why actors and not Ray Data: Ray Data builds a dataset from data it can read itself (`read_*` in its own
tasks) or from an in-memory list (`from_items`); neither takes the parent's lazy stream of batches, whose
read stage counts and rejects records in the parent. `from_items` would hold the whole input in the
object store. So: one actor per worker (each builds its `Context`, tokenizer and template, once) and a
bounded window of batches in flight, results taken in submission order. Memory stays bounded by
`2 * workers * batch_size` records, whatever the input size.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import ConfigError
from ..ingest import RawRecord
from .config import JobConfig
from .item import Item
from .stats import Stats
from .worker import init_worker, work

INSTALL_HINT = "pip install sftprep[ray]"
CONNECT_TIMEOUT_S = 5.0
BATCHES_PER_ACTOR = 2  # one running, one queued: actors never idle while the parent reads


def execute_ray(batches: Iterable[list[RawRecord]], config: JobConfig) -> Iterator[tuple[list[Item], Stats]]:
    """(items, stats) per batch, in input order, with the stages run by Ray actors."""
    ray = _import_ray()
    with _connected(ray, config.run) as cluster_cpus:
        wanted = config.run.workers or cluster_cpus
        # An actor asking for more CPUs than the cluster has would wait forever, and so would its batches.
        count = max(1, min(wanted, cluster_cpus))
        actor_class = ray.remote(num_cpus=1, max_restarts=2, max_task_retries=2)(_StageActor)
        actors = [actor_class.remote(config) for _ in range(count)]
        window: deque[tuple[Any, int]] = deque()
        try:
            yield from _ordered(ray, actors, batches, window)
        finally:
            for ref, _ in window:  # stopped early (Ctrl-C, an error): the work queued is not wanted
                with suppress(Exception):
                    ray.cancel(ref)
            for actor in actors:
                with suppress(Exception):  # already gone with its cluster: nothing to end
                    ray.kill(actor)


class _StageActor:
    """Holds one worker's Context; `work` is the local engine's worker function, in a Ray process."""

    def __init__(self, config: JobConfig):
        init_worker(config)

    def work(self, batch: list[RawRecord]) -> tuple[list[Item], Stats]:
        return work(batch)


def _ordered(ray: Any, actors: list, batches: Iterable[list[RawRecord]],
             window: deque[tuple[Any, int]]) -> Iterator[tuple[list[Item], Stats]]:
    """Each batch to the least busy actor; at most BATCHES_PER_ACTOR per actor in flight (`window`: task
    refs and actor indexes, oldest first); results in the order submitted (a result that finishes early
    waits for the ones before it)."""
    busy = {index: 0 for index in range(len(actors))}
    limit = BATCHES_PER_ACTOR * len(actors)
    source = iter(batches)
    exhausted = False
    while True:
        while not exhausted and len(window) < limit:
            batch = next(source, None)
            if batch is None:
                exhausted = True
                break
            index = min(busy, key=busy.__getitem__)  # ties go to the lowest index: deterministic
            window.append((actors[index].work.remote(batch), index))
            busy[index] += 1
        if not window:
            return
        ref, index = window[0]
        result = ray.get(ref)  # interrupted here, the ref stays in the window, to be cancelled
        window.popleft()
        busy[index] -= 1
        yield result


# --- connecting -----------------------------------------------------------------------------------

def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"engine = \"ray\" needs Ray, which is not installed ({exc.msg}): {INSTALL_HINT}",
                          code="ray_missing") from None
    return ray


@contextmanager
def _connected(ray: Any, run: Any) -> Iterator[int]:
    """Use the Ray this process is already connected to, or connect to `ray_address`, or ("") start a
    local instance. Yields the cluster's CPU count; shuts down only an instance it started or joined."""
    if ray.is_initialized():
        yield _cpus(ray)
        return
    address = run.ray_address.strip()
    if address:
        _probe(address)
        kwargs: dict[str, Any] = {"address": address}
    else:
        # A batch job's local instance: no dashboard, no usage reporting, worker logs not interleaved
        # with the progress line. "local" never attaches to some other instance left on the machine.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        kwargs = {"address": "local", "num_cpus": run.workers or None,
                  "runtime_env": {"env_vars": {"PYTHONPATH": _pythonpath()}}}
    try:
        ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING, **kwargs)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError, SystemExit) as exc:
        where = f"the Ray cluster at '{address}'" if address else "a local Ray instance"
        raise ConfigError(f"cannot connect to {where}: {exc}", code="ray_connect") from None
    try:
        yield _cpus(ray)
    finally:
        ray.shutdown()


def _cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _pythonpath() -> str:
    # Workers of a local instance import `pipeline` from where this process did, installed or not.
    here = str(Path(__file__).resolve().parents[2])
    current = os.environ.get("PYTHONPATH")
    return f"{here}{os.pathsep}{current}" if current else here


def _probe(address: str) -> None:
    """Fail in seconds, not minutes: `ray.init` retries an address that doesn't answer for minutes on
    end. A GCS (host:port) or Ray Client (ray://host:port) endpoint is a gRPC server, so it answers an
    HTTP/2 preface with a SETTINGS frame. "auto" and other schemes are left to Ray."""
    target = address.removeprefix("ray://")
    if address == "auto" or "://" in target:
        return
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"ray_address '{address}' is not HOST:PORT, ray://HOST:PORT or \"auto\"",
                          code="ray_connect")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S) as conn:
            conn.settimeout(CONNECT_TIMEOUT_S)
            conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            header = _read_exactly(conn, 9)
    except OSError as exc:
        reason = (f"no answer within {CONNECT_TIMEOUT_S:g} s" if isinstance(exc, TimeoutError)
                  else exc.strerror or str(exc))
        raise ConfigError(f"cannot connect to the Ray cluster at '{address}': {reason}",
                          code="ray_connect") from None
    if len(header) < 9 or header[3] != 0x04:  # frame type 4: SETTINGS
        raise ConfigError(f"'{address}' answers, but not as a Ray cluster (GCS or Ray Client port) does: "
                          "check the port", code="ray_connect")


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data
