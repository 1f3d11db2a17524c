"""Check transcripts for broken tool-call structure: issues per record, then a summary by code.

INPUT: .json, .jsonl or their .gz, or directories. Each issue names its record (FILE:LINE), the JSON
path inside it, its code and severity; the table at the end counts them by code with each rule's
description. --severity changes a code's level (the codes are the table's; [validate] in a job).

Exit 0 when no record has an error, 1 when any has (records that cannot be read or parsed count as
errors, under their error's code), 2 for usage errors such as an unknown code in --severity."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Iterable


from .. import jsonpolicy
from ..display import one_line
from ..errors import InternalError
from ..ingest import expand_paths, iter_parsed
from ..validate import RULES, Issue, ValidateConfig, error_issue, has_errors, validate
from .common import EXIT_FAILED, EXIT_OK, add_source_options

EXAMPLES = """\
examples:
  sftprep validate data/
  sftprep validate logs/ --severity unknown_tool=warning,empty_assistant_turn=off
  sftprep validate logs/ --json | jq -c 'select(.issues != [])'"""


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("validate", help="check transcripts for broken tool-call structure",
                              description=__doc__, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("inputs", nargs="+", metavar="INPUT", help=".json, .jsonl or their .gz, or directories")
    add_source_options(cmd)
    cmd.add_argument("--json", action="store_true", help="one JSON line per record instead of the report")
    cmd.add_argument("--severity", action="append", default=[], metavar="CODE=LEVEL",
                     help="set a code to error, warning or off (repeat, or separate with commas)")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # Configuration errors (unknown code, missing input) stop here, before any record is read: exit 2.
    config = ValidateConfig.from_overrides(item for arg in args.severity for item in arg.split(",") if item.strip())
    paths = expand_paths(args.inputs)
    summary = _Summary()
    report = None if args.json else _Report()
    out = sys.stdout.buffer
    for item in iter_parsed(paths, fmt=args.fmt, shape=args.shape):
        try:
            issues = [error_issue(item.error)] if item.conversation is None else validate(item.conversation, config)
        except Exception as exc:  # noqa: BLE001 - one record's surprise is that record's error
            issues = [error_issue(InternalError(exc, stage="validate", source=item.source))]
        summary.add(issues, parsed=item.conversation is not None)
        if report is None:
            out.write(jsonpolicy.dumps({"source": item.source, "issues": [_issue_dict(i) for i in issues]}) + b"\n")
        elif issues:
            report.record(item.source, issues)
    if report is None:
        out.flush()
    else:
        report.summary(summary)
    return EXIT_FAILED if summary.records_with_errors else EXIT_OK


def _issue_dict(issue: Issue) -> dict:
    out = {"code": issue.code, "severity": issue.severity, "message": issue.message, "path": issue.path}
    if issue.provider_path is not None:
        out["provider_path"] = issue.provider_path
    if issue.span is not None:
        out["span"] = list(issue.span)
        out["family"] = issue.family
    return out


class _Summary:
    def __init__(self) -> None:
        self.records = self.unparsed = self.records_with_errors = self.records_with_warnings = 0
        self.issues: Counter[tuple[str, str]] = Counter()  # (code, severity) -> issues
        self.records_by_code: Counter[tuple[str, str]] = Counter()

    def add(self, issues: Iterable[Issue], parsed: bool) -> None:
        issues = list(issues)
        self.records += 1
        self.unparsed += not parsed
        if has_errors(issues):
            self.records_with_errors += 1
        elif issues:
            self.records_with_warnings += 1
        for key in {(i.code, i.severity) for i in issues}:
            self.records_by_code[key] += 1
        self.issues.update((i.code, i.severity) for i in issues)


class _Report:
    """The human report: issues per record as they come, then a table by code."""

    def __init__(self) -> None:
        from rich.console import Console
        console = Console(highlight=False, soft_wrap=True)
        # Piped output gets a table wide enough for the descriptions instead of rich's 80 columns.
        self.console = console if console.is_terminal else Console(highlight=False, soft_wrap=True, width=120)

    def record(self, source: str, issues: list[Issue]) -> None:
        from rich.markup import escape
        self.console.print(f"[bold]{escape(one_line(source))}[/bold]")
        for i in issues:
            color = "red" if i.severity == "error" else "yellow"
            where = i.path if i.provider_path is None else f"{i.path} ({i.provider_path})"
            self.console.print(f"  [{color}]{i.severity:<7}[/{color}] {i.code}  {escape(one_line(where))}\n"
                               f"          {escape(one_line(i.message))}")

    def summary(self, s: _Summary) -> None:
        from rich.table import Table
        order = {code: n for n, code in enumerate(RULES)}
        table = Table(title="issues by code", title_justify="left")
        for column, justify in (("code", "left"), ("severity", "left"), ("records", "right"),
                                ("issues", "right"), ("rule", "left")):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        for (code, severity), count in sorted(s.issues.items(), key=lambda kv: (order.get(kv[0][0], -1), kv[0])):
            rule = RULES.get(code)
            table.add_row(code, severity, str(s.records_by_code[(code, severity)]), str(count),
                          rule.description if rule else "record could not be read or parsed")
        self.console.print()
        if s.issues:
            self.console.print(table)
        clean = s.records - s.records_with_errors - s.records_with_warnings
        self.console.print(f"{s.records} records: {clean} clean, {s.records_with_warnings} with warnings only, "
                           f"{s.records_with_errors} with errors ({s.unparsed} unreadable)")
