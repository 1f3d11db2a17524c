"""Subcommands of `sftprep`: each module registers its parser and handler; `cli.py` wires them."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from ..errors import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class JsonlSink:
    """A JSONL destination that only appears complete: written to a temporary name, renamed at close."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        if self.path is None:
            self.handle = sys.stdout.buffer
        else:
            self.tmp = self.path.with_name(f".{self.path.name}.partial")
            try:
                self.handle = open(self.tmp, "wb")
            except OSError as exc:
                raise ConfigError(f"cannot write '{path}': {exc.strerror}", code="unwritable_output") from None

    def write(self, obj: object) -> None:
        self.handle.write(orjson.dumps(obj) + b"\n")

    def close(self, ok: bool = True) -> None:
        if self.path is None:
            self.handle.flush()
            return
        self.handle.close()
        if ok:
            self.tmp.replace(self.path)
        else:
            self.tmp.unlink(missing_ok=True)
