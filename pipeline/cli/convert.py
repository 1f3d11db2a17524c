"""Convert transcripts from one provider format to another, with a ledger of what did not fit.

INPUT: .json, .jsonl or their .gz, or directories; each record's format and shape are detected unless
--from/--shape say. Each output line holds the source, the detected format and shape, the body in the
target format and the ledger (what the target has no place for, and where it was). A record that cannot
be read or converted is reported on stderr (or written to --rejects) and the run goes on.

Exit 0 when the run completed; 1 when --strict found a ledger entry, an unknown block or an ambiguous
call match; 2 for usage errors (unknown format, unwritable output...)."""

from __future__ import annotations

import argparse
import sys

from ..display import one_line
from ..errors import InternalError
from ..formats.convert import TARGETS, convert_all, ledger_dicts
from ..ingest import expand_paths, iter_parsed
from .common import EXIT_FAILED, EXIT_OK, JsonlSink, add_source_options, close_all

STRICT_CODES = ("strict_ledger", "unknown_block", "ambiguous_call_match")

EXAMPLES = """\
examples:
  sftprep convert data/anthropic_requests.jsonl --to openai-chat -o chat.jsonl
  sftprep convert logs/ --to canonical --rejects rejects.jsonl --strict"""


def register(commands: argparse._SubParsersAction) -> None:
    convert = commands.add_parser("convert", help="convert transcripts between provider formats",
                                  description=__doc__, epilog=EXAMPLES,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
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
    counts = {"read": 0, "converted": 0, "rejected": 0, "ledger": 0, "internal": 0}
    strict_failures = 0
    ok = False
    try:
        parsed = iter_parsed(paths, fmt=args.fmt, shape=args.shape, strict=args.strict,
                             keep_original=args.to == "canonical" and not args.no_original)
        for item in convert_all(parsed, args.to, strict=args.strict):
            counts["read"] += 1
            error = item.error
            if error is None:
                line = item.body if args.bodies_only else {
                    "source": item.source, "from": item.detected[0], "shape": item.detected[1],
                    "body": item.body, "ledger": ledger_dicts(item.ledger)}
                try:
                    data = out.encode(line)
                except Exception as exc:  # noqa: BLE001 - a body no writer can print is this record's reject
                    error = InternalError(exc, stage="write", source=item.source)
            if error is not None:
                counts["rejected"] += 1
                counts["internal"] += error.code == InternalError.code
                strict_failures += error.code in STRICT_CODES
                reject = {"source": item.source, "code": error.code, "error": error.message,
                          "path": error.path, "record": item.record}
                if rejects is not None:
                    rejects.write(reject)
                else:
                    print(f"sftprep: rejected {item.source} at {error.path}: {one_line(error.message)}",
                          file=sys.stderr)
                continue
            counts["converted"] += 1
            counts["ledger"] += len(item.ledger)
            out.write_encoded(data)
        ok = True
    finally:
        close_all([out, rejects], ok)
    internal = f" ({counts['internal']} internal errors)" if counts["internal"] else ""
    print(f"sftprep convert: read {counts['read']}, converted {counts['converted']}, "
          f"rejected {counts['rejected']}{internal}, ledger entries {counts['ledger']}", file=sys.stderr)
    return EXIT_FAILED if strict_failures or counts["internal"] else EXIT_OK
