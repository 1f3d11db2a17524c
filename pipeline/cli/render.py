"""Show how a record renders: the token stream with its boundaries, special tokens, which tokens are
trained, and the message and block each span came from; several templates side by side.

--record picks the record: N (1-based, in input order, unreadable records counted), a source as
printed elsewhere (FILE:LINE, FILE:LINE#N), or `all`. The default is the first record.
Each template uses its family's default tokenizer unless --tokenizer names one (needed for a .jinja
file or the tokenizer's own template, `tokenizer`). Template, tokenizer, mask, calls policy and date are
a job's `[render]` section: --config JOB.toml takes them from that job (the defaults are the default
job's), so the view is what `sftprep run` writes; flags given override it.

Several records (`--record all`) with --html write an index page (source, templates, tokens, trained,
issues) linking to one page per record, in a folder beside it.

Exit 0 when every record rendered, 1 when one could not be read or rendered (the error names the
record and the path inside it), 2 for usage errors (unknown template, record beyond the input...)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from ..display import one_line
from ..errors import ConfigError, InternalError, SftprepError
from ..ingest import Parsed, expand_paths, iter_parsed
from .common import EXIT_FAILED, EXIT_OK, JsonlSink, add_source_options

if TYPE_CHECKING:
    from ..render import Template, Tokenizer


def epilog() -> str:
    """The template families from the registry (so a new family is listed without editing this), then examples."""
    from ..render.registry import FAMILIES

    width = max(map(len, FAMILIES))
    families = "\n".join(f"  {name:<{width}}  tokenizer {family.default_tokenizer or '(name one with --tokenizer)'}"
                          for name, family in FAMILIES.items())
    return f"""template families (--template NAME; also a .jinja file, or 'tokenizer' for the tokenizer's own):
{families}

examples:
  sftprep render data/anthropic_requests.jsonl --template chatml,llama3
  sftprep render data/ --record data/openai_chat.jsonl:2 --ids
  sftprep render data/ --record all --html out/render.html"""


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("render", help="show the token stream of a record: trained tokens, spans, ids",
                              description=__doc__, epilog=epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("inputs", nargs="+", metavar="INPUT", help=".json, .jsonl or their .gz, or directories")
    cmd.add_argument("--record", default="1", metavar="N|FILE:LINE|all", help="which record (default: 1, the first)")
    cmd.add_argument("--config", metavar="JOB.toml", help="render as this job's `sftprep run` does")
    cmd.add_argument("--template", action="append", metavar="NAME[,NAME...]",
                     help="built-in family, .jinja file, or 'tokenizer'; several are shown side by side "
                          "(default: the job's)")
    cmd.add_argument("--tokenizer", metavar="NAME|PATH", help="default: the job's, else each family's own")
    cmd.add_argument("--mask", metavar="POLICY",
                     help="all or last, then optionally ,no-reasoning ,no-eot (default: the job's, all)")
    cmd.add_argument("--calls", choices=["split", "drop-text", "refuse"],
                     help="templates with one call per turn (llama3): split the turn, drop text beside "
                          "calls as the official template does, or refuse (default: the job's, split)")
    cmd.add_argument("--date", metavar="YYYY-MM-DD", help="'today' for templates that print a date "
                     "(default: the job's, 2026-01-01)")
    add_source_options(cmd)
    cmd.add_argument("--html", metavar="OUT.html", help="write the view as a self-contained page instead")
    cmd.add_argument("--json", action="store_true", help="one JSON line per record and template instead")
    cmd.add_argument("--ids", action="store_true", help="show each token's id")
    cmd.set_defaults(handler=run)


def job_render(args: argparse.Namespace):
    """The job's [render] section (--config, else the default job's) with the flags given applied."""
    from ..run import load_config

    overrides = {f"render.{key}": value for key, value in (
        ("tokenizer", args.tokenizer), ("mask", args.mask), ("calls", args.calls), ("date", args.date))
        if value is not None}
    return load_config(args.config, overrides).render


def run(args: argparse.Namespace) -> int:
    from ..run.render_stage import render_settings

    settings = job_render(args)
    mask, options = render_settings(settings)
    args.mask = settings.mask  # the view names the policy it shows
    names = [name for arg in args.template or [settings.template] for name in arg.split(",") if name.strip()]
    setups = _setups(names, settings.tokenizer or None)
    paths = expand_paths(args.inputs)
    out = _Output(args)
    try:
        failed = _render_all(args, setups, paths, out, mask, options)
    except BaseException:
        out.discard()
        raise
    out.close()
    return EXIT_FAILED if failed else EXIT_OK


def _render_all(args: argparse.Namespace, setups, paths, out: "_Output", mask, options) -> bool:
    """Every record --record names through every template, to `out`; True when one failed."""
    from ..render import render, tokenview

    failed = False
    for item in select(iter_parsed(paths, fmt=args.fmt, shape=args.shape), args.record):
        if item.conversation is None:
            assert item.error is not None
            failed = True
            _report(item.source, None, item.error)
            out.add(tokenview.RecordView(item.source, None, error=item.error))
            continue
        results: list[tokenview.View | tokenview.Failure] = []
        for name, template, tokenizer in setups:
            try:
                rendered = render(item.conversation, template, tokenizer, mask=mask, options=options)
                results.append(tokenview.build_view(rendered, tokenizer, item.conversation))
            except ConfigError:
                raise  # a template/tokenizer mismatch is a usage error, whatever the record
            except SftprepError as exc:
                failed = True
                _report(item.source, name, exc)
                results.append(tokenview.Failure(name, exc))
            except Exception as exc:  # noqa: BLE001 - one record's surprise is that record's failure
                failed = True
                error = InternalError(exc, stage="render", source=item.source)
                _report(item.source, name, error)
                results.append(tokenview.Failure(name, error))
        out.add(tokenview.RecordView(item.source, item.conversation, tuple(results)))
    return failed


def _setups(names: list[str], tokenizer_arg: str | None) -> list[tuple[str, "Template", "Tokenizer"]]:
    """Templates and their tokenizers, all loaded before any record is read (bad names exit 2 early)."""
    from ..render import check_fit, load_template, load_tokenizer, tokenizer_for

    names = [n.strip() for n in names]
    tokenizers: dict[str, Tokenizer] = {}
    out = []
    for name in names:
        tok_name = tokenizer_for(name, tokenizer_arg)
        if tok_name not in tokenizers:
            tokenizers[tok_name] = load_tokenizer(tok_name)
        tok = tokenizers[tok_name]
        template = load_template(name, tok)
        check_fit(template, tok)
        out.append((name, template, tok))
    return out


def select(items: Iterable[Parsed], spec: str) -> Iterator[Parsed]:
    """The records `--record` names: `all`, the Nth (1-based), or the one with a given source. A
    number beyond the input or a source not found is a usage error."""
    spec = spec.strip()
    if spec == "all":
        yield from items
        return
    if spec.isdigit():
        wanted = int(spec)
        if wanted < 1:
            raise ConfigError("--record counts from 1", code="bad_record")
        count = 0
        for count, item in enumerate(items, start=1):
            if count == wanted:
                yield item
                return
        raise ConfigError(f"--record {wanted}: the input holds {count} record{'s' * (count != 1)}", code="bad_record")
    for item in items:
        if same_source(spec, item.source):
            yield item
            return
    raise ConfigError(f"--record {spec}: no record with that source (sources look like FILE:LINE, as "
                      "`sftprep validate` prints them; or give a number)", code="bad_record")


def same_source(spec: str, source: str) -> bool:
    """`spec` names `source`: equal strings, or the same file (however the path is written) and line; a
    spec without `#N` matches the first record starting on that line."""
    if spec == source:
        return True
    spec_file, _, spec_rest = spec.rpartition(":")
    source_head, hash_, source_tail = source.partition("#")
    source_file, _, source_line = source_head.rpartition(":")
    if not spec_file or not source_file:
        return False
    spec_line, spec_hash, spec_tail = spec_rest.partition("#")
    if spec_line != source_line or (spec_hash and spec_tail != source_tail):
        return False
    try:
        return os.path.samefile(spec_file, source_file)
    except OSError:
        return False


def _check_writable(target: Path) -> None:
    """Before any work: the page's path must be a file under directories (or where they can be made)."""
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if target.is_dir():
        raise ConfigError(f"cannot write '{target}': it is a directory", code="unwritable_output")
    if not parent.is_dir():
        raise ConfigError(f"cannot write '{target}': '{parent}' is not a directory", code="unwritable_output")


def _report(source: str, template: str | None, error: SftprepError) -> None:
    what = f"template {template}" if template else "could not read the record"
    print(f"sftprep render: {source}: {what}: at {error.path}: {one_line(error.message)} [{error.code}]",
          file=sys.stderr)


class _Output:
    """Where views go: JSON lines as they come, the terminal as they come, or HTML: one page for one
    record; for several, a page per record as they come, in a folder beside an index page written at
    the end (each written whole or not at all)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        if args.html:
            _check_writable(Path(args.html))
        self.pages: list = []  # the first record's view, until a second one says there will be an index
        self.index: list = []
        self.folder: Path | None = None
        self.sink = JsonlSink(None) if args.json else None
        self.console = None
        self.legend_shown = False
        if args.html:
            self.target = Path(args.html)
            self.final_folder = self.target.with_name(f"{self.target.stem}_records")
        if not args.json and not args.html:
            from rich.console import Console

            console = Console(highlight=False)
            if not console.is_terminal and "COLUMNS" not in os.environ:
                console = Console(highlight=False, width=120)
            self.console = console

    def add(self, record) -> None:
        from ..render import tokenview

        if self.sink is not None:
            if record.error is not None:
                self.sink.write(tokenview.error_line(record.source, None, record.error))
            for result in record.results:
                if isinstance(result, tokenview.View):
                    self.sink.write(tokenview.json_line(record.source, result.rendered))
                else:
                    self.sink.write(tokenview.error_line(record.source, result.template, result.error))
        if self.args.html:
            self.pages.append(record)
            if len(self.pages) > 1 or self.folder is not None:
                for pending in self.pages:
                    self._record_page(pending)
                self.pages.clear()
        if self.console is not None:
            colors = tokenview.colors_for(self.console)
            if not self.legend_shown:
                self.console.print(tokenview.legend(colors))
                self.legend_shown = True
            self.console.print(tokenview.terminal_view(record, ids=self.args.ids, colors=colors,
                                                       width=self.console.width, mask=self.args.mask))

    def _record_page(self, record) -> None:
        from ..render import tokenview
        from ..validate import validate

        if self.folder is None:
            self.folder = self.target.with_name(f".{self.final_folder.name}.partial")
            shutil.rmtree(self.folder, ignore_errors=True)
            try:
                self.folder.mkdir(parents=True)
            except OSError as exc:
                raise ConfigError(f"cannot write '{self.args.html}': {exc.strerror}", code="unwritable_output") from None
        name = f"{len(self.index) + 1:05d}.html"
        _write(self.folder / name, tokenview.html_page([record], ids=self.args.ids, mask=self.args.mask,
                                                       title=f"sftprep render: {record.source}",
                                                       index=f"../{self.target.name}"), self.args.html)
        issues = ([("error", record.error.code)] if record.conversation is None else
                  [(issue.severity, issue.code) for issue in validate(record.conversation)])
        self.index.append(tokenview.index_row(record, f"{self.final_folder.name}/{name}", issues))

    def discard(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def close(self) -> None:
        from ..render import tokenview

        if self.sink is not None:
            self.sink.close()
        if not self.args.html:
            return
        title = f"sftprep render: {', '.join(self.args.inputs)}"
        if self.folder is None:
            _write(self.target, tokenview.html_page(self.pages, ids=self.args.ids, mask=self.args.mask, title=title),
                   self.args.html)
            print(f"sftprep render: wrote {self.target} ({len(self.pages)} record{'s' * (len(self.pages) != 1)})",
                  file=sys.stderr)
            return
        if self.final_folder.is_dir():  # an earlier render's pages; anything else there is not ours to delete
            if any(not re.fullmatch(r"\d{5,}\.html", p.name) for p in self.final_folder.iterdir()):
                self.discard()
                raise ConfigError(f"cannot write '{self.final_folder}': it holds files that are not record pages",
                                  code="unwritable_output")
            shutil.rmtree(self.final_folder)
        self.folder.replace(self.final_folder)
        _write(self.target, tokenview.index_page(self.index, mask=self.args.mask, title=title), self.args.html)
        print(f"sftprep render: wrote {self.target} (index of {len(self.index)} records) and their pages in "
              f"{self.final_folder}", file=sys.stderr)


def _write(target: Path, text: str, named: str) -> None:
    """A file written under a temporary name and renamed: it appears whole or not at all."""
    tmp = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"cannot write '{named}': {exc.strerror}", code="unwritable_output") from None
