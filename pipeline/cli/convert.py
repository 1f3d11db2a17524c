"""`sftprep convert`: transcripts from one provider format to another, with the loss ledger."""

from __future__ import annotations

import argparse
import sys

from ..formats.convert import TARGETS, convert_all, ledger_dicts
from ..ingest import expand_paths, iter_parsed
from .common import EXIT_FAILED, EXIT_OK, JsonlSink, add_source_options

STRICT_CODES = ("strict_ledger", "unknown_block", "ambiguous_call_match")


def register(commands: argparse._SubParsersAction) -> None:
    convert = commands.add_parser("convert", help="convert transcripts between provider formats")
    convert.add_argument("inputs", nargs="+", metavar="INPUT", help=".json, .jsonl or their .gz")
    convert.add_argument("--to", required=True, choices=list(TARGETS), help="target format")
    add_source_options(convert)
    convert.add_argument("-o", "--output", help="output JSONL (default: stdout)")
    convert.add_argument("--rejects", help="write records that could not be converted here (JSONL)")
    convert.add_argument("--strict", action="store_true", help="any ledger entry is an error")
    convert.add_argument("--bodies-only", action="store_true", help="write the target body alone per line")
    convert.add_argument("--no-original", action="store_true",
                         help="with --to canonical, do not keep the original record beside the conversation")
    convert.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    paths = expand_paths(args.inputs)
    out, rejects = JsonlSink(args.output), JsonlSink(args.rejects) if args.rejects else None
    counts = {"read": 0, "converted": 0, "rejected": 0, "ledger": 0}
    strict_failures = 0
    ok = False
    try:
        parsed = iter_parsed(paths, fmt=args.fmt, shape=args.shape, strict=args.strict,
                             keep_original=args.to == "canonical" and not args.no_original)
        for item in convert_all(parsed, args.to, strict=args.strict):
            counts["read"] += 1
            if item.error is not None:
                counts["rejected"] += 1
                strict_failures += item.error.code in STRICT_CODES
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
                out.write({"source": item.source, "from": item.detected[0], "shape": item.detected[1],
                           "body": item.body, "ledger": ledger_dicts(item.ledger)})
        ok = True
    finally:
        out.close(ok)
        if rejects is not None:
            rejects.close(ok)
    print(f"sftprep convert: read {counts['read']}, converted {counts['converted']}, "
          f"rejected {counts['rejected']}, ledger entries {counts['ledger']}", file=sys.stderr)
    return EXIT_FAILED if strict_failures else EXIT_OK
