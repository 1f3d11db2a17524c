"""The `sftprep` command: parse arguments, call the library, print, return an exit code.

Exit codes: 0 the run completed; 1 the run completed but found what the command treats as failure
(--strict violations, validation errors); 2 usage or configuration errors, before any work.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import orjson

from . import formats
from .errors import ConfigError, SftprepError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message, our wording
        self.print_usage(sys.stderr)
        print(f"sftprep: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sftprep", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    convert = commands.add_parser("convert", help="convert transcripts between provider formats")
    convert.add_argument("inputs", nargs="+", metavar="INPUT", help=".json, .jsonl or their .gz")
    convert.add_argument("--to", required=True, choices=_targets(), help="target format")
    convert.add_argument("--from", dest="fmt", choices=list(formats.FORMATS), help="source format (default: detect)")
    convert.add_argument("-o", "--output", help="output JSONL (default: stdout)")
    convert.add_argument("--rejects", help="write records that could not be converted here (JSONL)")
    convert.add_argument("--strict", action="store_true", help="any ledger entry is an error")
    convert.add_argument("--bodies-only", action="store_true", help="write the target body alone per line")
    convert.add_argument("--no-original", action="store_true",
                         help="with --to canonical, do not keep the original record beside the conversation")
    convert.set_defaults(handler=_cmd_convert)
    return parser


def _targets() -> list[str]:
    from .convert import TARGETS

    return list(TARGETS)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"sftprep: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print("sftprep: interrupted", file=sys.stderr)
        return 130


class _Sink:
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


def _cmd_convert(args: argparse.Namespace) -> int:
    from .convert import convert_all, ledger_dicts
    from .ingest import expand_paths, iter_parsed

    paths = expand_paths(args.inputs)
    out, rejects = _Sink(args.output), _Sink(args.rejects) if args.rejects else None
    counts = {"read": 0, "converted": 0, "rejected": 0, "ledger": 0}
    strict_failures = 0
    ok = False
    try:
        parsed = iter_parsed(paths, fmt=args.fmt, strict=args.strict,
                             keep_original=args.to == "canonical" and not args.no_original)
        for item in convert_all(parsed, args.to, strict=args.strict):
            counts["read"] += 1
            if item.error is not None:
                counts["rejected"] += 1
                strict_failures += item.error.code in ("strict_ledger", "unknown_block", "ambiguous_call_match")
                reject = {"source": item.source, "code": item.error.code, "error": item.error.message,
                          "path": item.error.path, "record": item.record}
                if rejects is not None:
                    rejects.write(reject)
                else:
                    print(f"sftprep: rejected {item.source} at {item.error.path}: {item.error.message}",
                          file=sys.stderr)
                continue
            counts["converted"] += 1
            counts["ledger"] += len(item.ledger)
            if args.bodies_only:
                out.write(item.body)
            else:
                out.write({"source": item.source, "body": item.body, "ledger": ledger_dicts(item.ledger)})
        ok = True
    finally:
        out.close(ok)
        if rejects is not None:
            rejects.close(ok)
    print(f"sftprep convert: read {counts['read']}, converted {counts['converted']}, "
          f"rejected {counts['rejected']}, ledger entries {counts['ledger']}", file=sys.stderr)
    return EXIT_FAILED if strict_failures else EXIT_OK


__all__ = ["main", "build_parser", "SftprepError"]
