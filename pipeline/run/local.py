"""The local engine: worker processes on this machine, each fed over a pipe of its own."""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
import os
import queue
import signal
import sys
import threading
import traceback
from collections import deque
from multiprocessing.reduction import ForkingPickler
from typing import Any, Iterable, Iterator

from ..ingest import RawRecord
from .config import JobConfig
from .item import Item
from .stats import Stats
from .worker import init_worker, work

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Workers:
    """Worker processes, each fed over a pipe of its own by this thread alone: no pool threads and no
    shared, locked queues between the parent and the workers (multiprocessing.Pool's machinery cost the
    parent about five times the CPU of the transfers themselves). Results come back in submission order,
    so outputs are identical whatever the worker count; at most two batches per worker are in flight,
    so memory stays flat however large the input (or slow the writing) is."""

    def __init__(self, count: int, config: JobConfig):
        method = _start_method()
        if method == "fork":
            _preload()
        context = multiprocessing.get_context(method)
        self.connections: list[Any] = []
        self.processes: list[Any] = []
        self.finished = False
        try:
            for _ in range(count):
                here, there = context.Pipe()
                # A forked child inherits this process's ends of every pipe, its own included: it must
                # close them, or the parent's death never reaches it as end-of-file.
                inherited = [*self.connections, here] if method == "fork" else []
                parent = os.getpid() if method == "fork" else None  # forkserver: the server is the parent
                process = context.Process(target=_worker_main, args=(there, config, inherited, parent),
                                          daemon=True)
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


# What the workers import on first use (the validator's JSON Schema checks): imported once here, before
# forking, rather than once in every worker (a tenth of a second each).
_PRELOAD = ("jsonschema", "jsonschema.exceptions")


def _preload() -> None:
    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # the workers will say so, if they need it
            pass


def _worker_main(connection: Any, config: JobConfig, inherited: list[Any], parent: int | None) -> None:
    """A worker's life: batches in, (ok, result or exception) out, until the stop signal. A thread takes
    batches off the pipe as they arrive, so the parent never waits on a worker busy sending a result.
    The worker ends with its parent, however the parent ends (SIGKILL included)."""
    for end in inherited:
        end.close()
    _die_with_parent(parent)
    init_worker(config, ignore_interrupt=True, own_process=True)
    inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def receive() -> None:
        try:
            while True:
                inbox.put(connection.recv_bytes())
        except (EOFError, OSError):  # the parent went away: nobody wants the batch at hand
            os._exit(0)

    threading.Thread(target=receive, daemon=True).start()
    while data := inbox.get():
        try:
            reply: tuple[bool, Any] = (True, work(ForkingPickler.loads(data)))
        except Exception as exc:  # a bug, not a bad record (those are rejects): the parent raises it
            reply = (False, _picklable(exc))
        try:
            connection.send_bytes(ForkingPickler.dumps(reply))
        except (BrokenPipeError, OSError):
            return


def _die_with_parent(parent: int | None) -> None:
    """On Linux, have the kernel kill this process when its parent dies (the pipe's end-of-file covers
    the rest, a batch later). A parent already gone before the request took effect: exit now."""
    if sys.platform == "linux":
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if parent is not None and os.getppid() != parent:
        os._exit(0)


def _picklable(exc: Exception) -> Exception:
    try:
        ForkingPickler.dumps(exc)
        return exc
    except Exception:
        return RuntimeError("".join(traceback.format_exception(exc)))
