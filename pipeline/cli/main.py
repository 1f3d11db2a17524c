"""The `sftprep` command: parse arguments, call the library, print, return an exit code.

Exit codes: 0 the run completed; 1 the run completed but found what the command treats as failure
(--strict violations, validation errors, internal errors in some records) or an I/O error stopped it
(the disk full, stdout closed); 2 usage or configuration errors, before any work; 130 and 143 after
Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from importlib.metadata import PackageNotFoundError, version
from typing import Sequence

from ..display import one_line
from ..errors import ConfigError
from ..suggest import did_you_mean
from . import convert as convert_command
from . import qa as qa_command
from . import render as render_command
from . import run as run_command
from . import templates as templates_command
from . import validate as validate_command
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE

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
entries, a record that would not render, an I/O error); 2 usage or configuration error, before any
work; 130 and 143 after Ctrl-C and SIGTERM."""


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


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: workers stopped, no half file left, exit 143."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


class _ClosedStream:
    """Stands for a closed stdout (`>&-`): writing to it is an error the command reports, not a crash;
    a command that writes nothing there runs as usual."""

    closed = False

    def write(self, data: object) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    @property
    def buffer(self) -> "_ClosedStream":
        return self


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stdout is None:
        sys.stdout = _ClosedStream()  # type: ignore[assignment]
    args = build_parser().parse_args(argv)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _handle(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _handle(args: argparse.Namespace) -> int:
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"sftprep: error: {one_line(exc.message)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except KeyboardInterrupt as exc:
        print("sftprep: terminated" if isinstance(exc, Terminated) else "sftprep: interrupted", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
    except OSError as exc:  # the disk full, stdout closed or full (> /dev/full), a file gone mid-write
        _quiet_stdout()
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"sftprep: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_FAILED


def _quiet_stdout() -> None:
    """When stdout is what broke: point it at /dev/null so the interpreter's last flush cannot fail again."""
    try:
        sys.stdout.flush()
        return
    except (OSError, ValueError):
        pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
