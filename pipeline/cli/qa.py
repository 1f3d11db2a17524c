"""The dataset QA report of a run, in the terminal, as HTML or JSON: counts, rates, distributions,
validation issues with examples, the ledger, the longest and shortest conversations.

Reads what `sftprep run` wrote (data shards, rejects.jsonl, stats.json, config.json): give the output
directory, or the files themselves. Exit 0 when the report was made, 2 when there was nothing to read."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from .common import EXIT_OK

EXAMPLES = """\
examples:
  sftprep qa out
  sftprep qa out --html report.html
  sftprep qa out/data-00000.parquet --json"""


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("qa", help="the QA report of a run: counts, rates, distributions, worst examples",
                              description=__doc__, epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("paths", nargs="+", metavar="RUN_DIR_OR_FILES", help="a run's output directory, or its files")
    cmd.add_argument("--html", metavar="REPORT.html", help="also write the report as one self-contained HTML page")
    cmd.add_argument("--json", action="store_true", help="print the report's figures as JSON instead of tables")
    cmd.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from ..qa import build_report, render_terminal, to_json, write_html  # polars: only when a report is made

    report = build_report(args.paths)
    if args.html:
        path = write_html(report, args.html)
        print(f"sftprep qa: wrote {path}", file=sys.stderr)
    if args.json:
        sys.stdout.buffer.write(to_json(report) + b"\n")
        sys.stdout.flush()
    else:
        render_terminal(report, Console(highlight=False))
    return EXIT_OK
