"""Progress of a run on stderr: a live bar on a terminal, a plain line now and then otherwise."""

from __future__ import annotations

import sys
import time

from .stats import Stats


class Progress:
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
            print(f"\r[{bar}] {done:4.0%} {rate}, {eta}  {stats.summary_line(running=True)}", end="", file=sys.stderr,
                  flush=True)
        else:
            print(f"sftprep run: {done:.0%} of input, {rate}, {eta}, {stats.summary_line(running=True)}", file=sys.stderr,
                  flush=True)

    def done(self, stats: Stats) -> None:
        if self.enabled and self.tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
