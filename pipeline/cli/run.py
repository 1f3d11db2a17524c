"""Run a job: transcripts in, training set out.

CONFIG is a TOML job (configs/default.toml documents every key; none given: all defaults, which is that
file). The job reads its inputs, validates, converts and renders every record in parallel, and writes to
its output directory: data shards (Parquet or JSONL: token ids, labels, loss mask, the conversation),
rejects.jsonl (each rejected record with its code and location), stats.json, config.json and
qa_report.html. Flags override the config's keys.

Exit 0 when the job ran (rejected records are counted and kept in rejects.jsonl, not failures); 2 for
usage or configuration errors (unknown key, missing input...), before any record is read."""

from __future__ import annotations

import argparse
import sys

from ..api import run_job
from ..run import load_config
from .common import EXIT_FAILED, EXIT_OK, add_source_options

EXAMPLES = """\
examples:
  sftprep run                                   the default job: data/ to out/
  sftprep run configs/default.toml --template llama3 --output out/llama3
  sftprep run job.toml --input 'logs/*.jsonl.gz' --workers 0"""


def register(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run a job: transcripts in, training set out", description=__doc__,
                              epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("config", nargs="?", help="job config (TOML); default: all defaults")
    run.add_argument("--input", action="append", help="input path, glob or directory (repeatable)")
    add_source_options(run)
    run.add_argument("--output", help="output directory")
    run.add_argument("--template", help="chat template name or .jinja file")
    run.add_argument("--tokenizer", help="tokenizer name, tokenizer.json or directory")
    run.add_argument("--format", dest="out_format", choices=["parquet", "jsonl"], help="data file format")
    run.add_argument("--workers", type=int, help="worker processes (0: all cores)")
    run.add_argument("--engine", choices=["local", "ray"], help="execution engine")
    run.add_argument("--quiet", action="store_true", help="print only the one-line summary")
    run.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    overrides = {key: value for key, value in (
        ("input.paths", args.input), ("input.format", args.fmt), ("input.shape", args.shape),
        ("output.dir", args.output), ("render.template", args.template),
        ("render.tokenizer", args.tokenizer), ("output.format", args.out_format), ("run.workers", args.workers),
        ("run.engine", args.engine)) if value is not None}
    config = load_config(args.config, overrides)
    result = run_job(config, progress=False if args.quiet else None)
    stats = result.stats
    if result.report is not None and not args.quiet:
        from rich.console import Console

        from ..qa import render_terminal

        render_terminal(result.report, Console(stderr=True, highlight=False), compact=True)
    print(f"sftprep run: {stats.summary_line()} -> {result.output_dir} "
          f"({len(result.shards)} shard{'s' if len(result.shards) != 1 else ''}, {result.seconds:.1f}s)"
          + (f"; QA report: {result.output_dir / 'qa_report.html'}" if result.report is not None else ""),
          file=sys.stderr)
    return EXIT_FAILED if stats.internal_errors else EXIT_OK
