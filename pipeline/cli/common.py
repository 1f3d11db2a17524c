"""What the subcommands share: exit codes and the JSONL sink that only appears complete."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import jsonpolicy
from ..errors import ConfigError
from ..ingest import INPUT_FORMATS, RECORD_SHAPES

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_source_options(cmd: argparse.ArgumentParser) -> None:
    """`--from` and `--shape`, the same on every command that reads transcripts."""
    cmd.add_argument("--from", dest="fmt", choices=list(INPUT_FORMATS), help="source format (default: detect)")
    cmd.add_argument("--shape", choices=list(RECORD_SHAPES),
                     help="record shape (default: detect per record; session logs per file)")


class JsonlSink:
    """A JSONL destination that only appears complete: a regular file is written under a temporary
    name and renamed at close. Stdout ("-" or none) and special files (/dev/null, a pipe) are written
    directly: renaming over them would replace the device."""

    def __init__(self, path: str | None):
        target = Path(path) if path and path != "-" else None
        if target is not None and target.is_dir():
            raise ConfigError(f"cannot write '{path}': it is a directory (name a file)", code="unwritable_output")
        if target is not None and target.exists() and not target.is_file():
            target = None
            try:
                self.handle = open(path, "wb")
            except OSError as exc:
                raise ConfigError(f"cannot write '{path}': {exc.strerror}", code="unwritable_output") from None
        elif target is None:
            self.handle = sys.stdout.buffer
        self.path = target
        if target is not None:
            self.tmp = target.with_name(f".{target.name}.partial")
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                self.handle = open(self.tmp, "wb")
            except OSError as exc:
                raise ConfigError(f"cannot write '{path}': {exc.strerror}", code="unwritable_output") from None

    def write(self, obj: object) -> None:
        self.handle.write(self.encode(obj))

    @staticmethod
    def encode(obj: object) -> bytes:
        """The line `write` would write: to learn, before writing, whether the value can be written."""
        return jsonpolicy.dumps(obj) + b"\n"

    def write_encoded(self, line: bytes) -> None:
        self.handle.write(line)

    def close(self, ok: bool = True) -> None:
        """Flush and rename into place (`ok`), or remove what was written. A failure to flush (the disk
        full) still removes the temporary file, then raises: the caller reports it once."""
        if self.path is None:
            if self.handle is sys.stdout.buffer:
                self.handle.flush()
            else:
                self.handle.close()
            return
        try:
            self.handle.close()
            if ok:
                self.tmp.replace(self.path)
        finally:
            self.tmp.unlink(missing_ok=True)


def close_all(sinks: list[JsonlSink | None], ok: bool) -> None:
    """Close the sinks in order; once one fails (the disk full), the rest are removed, not kept."""
    failure: BaseException | None = None
    for sink in sinks:
        if sink is None:
            continue
        try:
            sink.close(ok and failure is None)
        except OSError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure
