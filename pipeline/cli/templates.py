"""`sftprep templates`: the built-in template families, the tokenizer each uses by default (and whether
it loads offline here), and what each format can and cannot carry."""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from ..errors import ConfigError
from ..render import FAMILIES, load_tokenizer
from ..render.templates import CAPABILITIES
from .common import EXIT_OK


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("templates", help="the built-in template families, their tokenizers, what each carries",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("--json", action="store_true", help="print the listing as JSON")
    cmd.add_argument("--check", action="store_true",
                     help="load each family's tokenizer (builds it once, offline) and say whether it loads")
    cmd.set_defaults(handler=handle)


def listing(check: bool = False) -> list[dict]:
    out = []
    for name, family in FAMILIES.items():
        entry = {"name": name, "tokenizer": family.default_tokenizer, "template": family.template_file,
                 "parse_back": family.parse_back is not None, "carries": dict(family.carries)}
        if check and family.default_tokenizer:
            try:
                load_tokenizer(family.default_tokenizer)
                entry["tokenizer_status"] = "loads"
            except ConfigError as exc:
                entry["tokenizer_status"] = exc.message
        out.append(entry)
    return out


def handle(args: argparse.Namespace) -> int:
    entries = listing(args.check)
    if args.json:
        sys.stdout.write(json.dumps(entries, indent=2) + "\n")
        return EXIT_OK
    console = Console(highlight=False)
    for entry in entries:
        tokenizer = entry["tokenizer"] or "-"
        if "tokenizer_status" in entry:
            tokenizer += f" ({entry['tokenizer_status']})"
        table = Table(title=f"{entry['name']}  (tokenizer: {tokenizer})", title_justify="left", show_header=False)
        table.add_column("capability", style="bold")
        table.add_column("how")
        for capability in CAPABILITIES:
            table.add_row(capability, entry["carries"].get(capability, "?"))
        console.print(table)
    console.print("Any other chat template: --template FILE.jinja (or 'tokenizer'), rendered in the sandbox; "
                  "see the README's table of official templates.")
    return EXIT_OK
