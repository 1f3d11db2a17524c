"""The `sftprep` command: parse arguments, call the library, print, return an exit code."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Sequence

from ..errors import ConfigError
from ..suggest import did_you_mean
from . import convert as convert_command
from . import qa as qa_command
from . import render as render_command
from . import run as run_command
from . import templates as templates_command
from . import validate as validate_command
from .common import EXIT_OK, EXIT_USAGE

# Each command module has register(subparsers); its handler returns an exit code.
COMMANDS = [run_command, convert_command, validate_command, render_command, qa_command, templates_command]

DESCRIPTION = """\
Turn logged LLM conversations with tool calls into fine-tuning data, keeping the tool-call structure.

Inputs are provider logs (OpenAI Chat Completions and Responses, Anthropic Messages, Gemini, session
logs) as .json, .jsonl or their .gz, or directories of them; the format is detected per record."""

EPILOG = """\
a first session:
  sftprep validate data/                        check the tool-call structure of the samples
  sftprep render data/ --template chatml,llama3 see which tokens a template trains
  sftprep run configs/default.toml              write the training set and its QA report
  sftprep qa out                                read that report in the terminal

`sftprep COMMAND --help` explains a command, its inputs and its exit codes.

exit codes: 0 done; 1 done, but the command found a failure (validation errors, --strict ledger
entries, a record that would not render); 2 usage or configuration error, before any work."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; the command list without argparse's bare COMMAND line."""

    def _format_action(self, action: argparse.Action) -> str:
        if isinstance(action, argparse._SubParsersAction):
            return "".join(self._format_action(sub) for sub in action._get_subactions())
        return super()._format_action(action)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message, our wording
        self.print_usage(sys.stderr)
        print(f"sftprep: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)

    def _check_value(self, action: argparse.Action, value: object) -> None:
        # argparse lists the choices; a near miss also gets the one that was probably meant.
        if action.choices is not None and value not in action.choices and isinstance(value, str):
            choices = [str(choice) for choice in action.choices]
            raise argparse.ArgumentError(action, f"invalid choice: '{value}'{did_you_mean(value, choices)}; "
                                                 f"choose from {', '.join(choices)}")
        super()._check_value(action, value)


def _version() -> str:
    try:
        return version("sftprep")  # the installed distribution's
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sftprep", description=DESCRIPTION, epilog=EPILOG, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"sftprep {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND",
                                     title="commands")
    for module in COMMANDS:
        module.register(commands)
    if "templates" in commands.choices:  # where a command describing the families exists, render's help points to it
        render_help = commands.choices["render"]
        render_help.epilog = f"{render_help.epilog}\n\n`sftprep templates` describes each family."
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
