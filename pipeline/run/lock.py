"""One run per output directory at a time: a second run into the same directory refuses at start,
rather than both writing and each deleting the other's files. The lock is the kernel's (flock on the
directory itself): it goes with the process however that ends, SIGKILL included, and leaves no file."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError

try:
    import fcntl
except ImportError:  # not POSIX: no lock, as before
    fcntl = None  # type: ignore[assignment]


class OutputLock:
    def __init__(self, directory: Path):
        self.directory = directory
        self.fd: int | None = None

    def __enter__(self) -> "OutputLock":
        if fcntl is None:
            return self
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ConfigError(f"output directory '{self.directory}' is in use by another run; wait for it "
                              "to finish or choose another output.dir", code="output_locked") from None
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def remove_leftovers(directory: Path) -> None:
    """Half files a killed run left behind (`.NAME.partial`): never part of any output."""
    for partial in directory.glob(".*.partial"):
        partial.unlink(missing_ok=True)

