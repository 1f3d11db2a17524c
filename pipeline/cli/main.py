"""The `sftprep` command: parse arguments, call the library, print, return an exit code.

Exit codes: 0 the run completed; 1 the run completed but found what the command treats as failure
(--strict violations, validation errors); 2 usage or configuration errors, before any work.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..errors import ConfigError
from . import convert as convert_command
from . import qa as qa_command
from . import render as render_command
from . import run as run_command
from . import templates as templates_command
from . import validate as validate_command
from .common import EXIT_OK, EXIT_USAGE

# Each command module has register(subparsers); its handler returns an exit code.
COMMANDS = [run_command, convert_command, validate_command, render_command, qa_command, templates_command]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message, our wording
        self.print_usage(sys.stderr)
        print(f"sftprep: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sftprep", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    for module in COMMANDS:
        module.register(commands)
    return parser


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
