"""The QA report. Its figures are checked against stats.json and against counts made here from the raw
files with pyarrow and json (never with the report's polars code), on a run over the whole corpus and
on one over data/. Also: runs holding flattened calls and markup (tests/fixtures/qa/injected.jsonl),
an empty run, an all-rejected run, JSONL shards, the terminal summary, the JSON output and the CLI."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from corpus import require_corpus
from pipeline.cli.main import main
from pipeline.run.config import load_config
from pipeline.qa import build_report, render_html, render_terminal
from pipeline.qa import reading
from pipeline.qa.reading import PREVIEW
from pipeline import run_job

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
INJECTED = ROOT / "tests" / "fixtures" / "qa" / "injected.jsonl"
BLOCK = re.compile(r"\$\.messages\[(\d+)\]\.blocks\[(\d+)\]")
FILE = re.compile(r"^(.*):\d+(?:#.*)?$")


def run(inputs: list[Path], out: Path, workers: int = 1, **overrides) -> Path:
    config = load_config(ROOT / "configs" / "default.toml",
                         {"input.paths": [str(p) for p in inputs], "output.dir": str(out), "run.workers": workers,
                          **overrides})
    run_job(config, progress=False)
    return out


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory) -> Path:
    return run([require_corpus()], tmp_path_factory.mktemp("qa-corpus"), workers=2)


@pytest.fixture(scope="module")
def data_run(tmp_path_factory) -> Path:
    return run([DATA], tmp_path_factory.mktemp("qa-data"), workers=2)


@pytest.fixture(scope="module", params=["corpus", "data"])
def run_dir(request) -> Path:
    return request.getfixturevalue(f"{request.param}_run")


class Raw:
    """A run's files read plainly: the independent side of every comparison."""

    def __init__(self, out: Path):
        self.stats = json.loads((out / "stats.json").read_text())
        self.config = json.loads((out / "config.json").read_text())
        tables = [pq.read_table(p) for p in sorted(out.glob("data-*.parquet"))]
        self.rows = pa.concat_tables(tables).to_pylist()
        for row in self.rows:
            row["conv"] = json.loads(row["conversation"])
            row["issue_list"] = json.loads(row["issues"])
            row["ledger_list"] = json.loads(row["ledger"])
        self.rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines() if line]

    def blocks(self):
        """(row index, message index, block index, role, block) over every written conversation."""
        for n, row in enumerate(self.rows):
            for mi, message in enumerate(row["conv"].get("messages", [])):
                for bi, block in enumerate(message.get("blocks", [])):
                    yield n, mi, bi, message["role"], block

    @property
    def duplicates(self) -> int:
        return self.stats["stages"]["dedup"]["filtered"].get("duplicate", 0)


def file_of(source: str) -> str:
    match = FILE.match(source)
    return match[1] if match else source


# --- figures against stats.json and the raw files ----------------------------------------------------

def test_accounting(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    records = raw.stats["records"]
    t = report.totals
    assert (t.read, t.written, t.rejected, t.filtered, t.balanced) == (
        records["read"], records["written"], records["rejected"], records["filtered"], True)
    assert t.rows == len(raw.rows) == records["written"]
    assert t.reject_lines == len(raw.rejects) == records["rejected"]
    assert t.read == t.written + t.rejected + t.filtered
    assert report.status == "ok" and report.notes == []
    assert [s.name for s in report.stages] == ["read", "parse", "validate", "scrub", "shape", "render", "dedup", "fold",
                                               "write"]
    for stage in report.stages:
        expected = raw.stats["stages"][stage.name]
        assert (stage.seen, stage.passed) == (expected["in"], expected["passed"])
        assert {c.key: c.count for c in stage.rejected} == expected["rejected"]
        assert {c.key: c.count for c in stage.filtered} == expected["filtered"]


def test_rejections_by_code(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    from_file = Counter(r["code"] for r in raw.rejects)
    from_stats = Counter()
    for counts in raw.stats["stages"].values():
        from_stats.update(counts["rejected"])
    assert {i.code: i.rejected for i in report.issues if i.rejected} == from_file == from_stats
    stage_of = {r["code"]: r["stage"] for r in raw.rejects}
    for issue in report.issues:
        if issue.rejected:
            assert issue.stage == stage_of[issue.code]
            shown = [e for e in issue.examples if e.outcome == "rejected"]
            assert 1 <= len(shown) <= 3
            assert all((e.source, e.path, e.message) in {(r["source"], r["path"], r["message"]) for r in raw.rejects
                                                         if r["code"] == issue.code} for e in shown)


def test_issues_kept_on_rows(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    kept = Counter(i["code"] for row in raw.rows for i in row["issue_list"])
    kept_rows = Counter(code for row in raw.rows for code in {i["code"] for i in row["issue_list"]})
    assert {i.code: i.kept for i in report.issues if i.kept} == kept
    assert {i.code: i.kept_rows for i in report.issues if i.kept} == kept_rows
    tally = raw.stats["tallies"].get("issues", {})
    for issue in report.issues:
        # stats.json tallies the written records: the same figure, counted by the run.
        assert issue.tallied == tally.get(issue.code, 0) == issue.kept
        everywhere = {(row["source"], i["path"], i["message"]) for row in raw.rows for i in row["issue_list"]
                      if i["code"] == issue.code}
        assert all((e.source, e.path, e.message) in everywhere for e in issue.examples if e.outcome == "written")


def test_sources_and_formats(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    written = Counter(file_of(row["source"]) for row in raw.rows)
    rejected = Counter(file_of(r["source"]) for r in raw.rejects)
    assert {s.file: s.written for s in report.source_files} == {f: written[f] for f in written | rejected}
    assert {s.file: s.rejected for s in report.source_files} == {f: rejected[f] for f in written | rejected}
    folders = Counter(f.rsplit("/", 1)[0] for f in (file_of(row["source"]) for row in raw.rows))
    assert {s.file: s.written for s in report.source_folders if s.written} == folders

    formats = Counter(row["source_format"] for row in raw.rows)
    assert {f.name: f.written for f in report.formats if f.written} == formats
    assert {f.name: f.with_tool_calls for f in report.formats if f.written} == Counter(
        row["source_format"] for row in raw.rows if row["num_tool_calls"] > 0)
    tally = raw.stats["tallies"]["source_format"]
    assert {f.name: f.parsed for f in report.formats} == tally
    assert sum(tally.values()) == len(raw.rows)
    assert {c.key: c.count for c in report.shapes} == Counter(row["shape"] for row in raw.rows)


def test_tool_use(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    u = report.tools
    calls = Counter()  # (row, message) -> calls in that message
    names, results, errors, images, hosted = Counter(), 0, 0, 0, 0
    for n, mi, _, _, block in raw.blocks():
        if block["type"] == "tool_call":
            calls[(n, mi)] += 1
            names[block["name"]] += 1
        elif block["type"] == "tool_result":
            results += 1
            errors += bool(block.get("is_error"))
            images += any(c.get("kind") == "image" for c in block.get("content", []))
        elif block["type"] == "opaque" and block.get("role_hint") == "call":
            hosted += 1
    per_row = [row["num_tool_calls"] for row in raw.rows]
    assert u.calls == sum(calls.values()) == sum(per_row)
    assert u.conversations == len(raw.rows) and u.with_calls == sum(1 for c in per_row if c)
    assert u.max_calls == max(per_row) and u.mean_calls == pytest.approx(sum(per_row) / len(per_row))
    assert u.call_turns == len(calls) and u.parallel_turns == sum(1 for c in calls.values() if c >= 2)
    assert u.with_parallel == len({n for (n, _), c in calls.items() if c >= 2})
    assert u.parallel_rate == pytest.approx(u.parallel_turns / u.call_turns)
    assert (u.results, u.error_results, u.image_results, u.hosted_calls) == (results, errors, images, hosted)
    assert u.distinct_tools == len(names)
    assert [(c.key, c.count) for c in u.top_tools] == sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))[:15]
    for b in u.calls_per_conversation:
        assert b.count == sum(1 for c in per_row if c >= b.low and (b.high is None or c <= b.high))
    assert sum(b.count for b in u.calls_per_conversation) == len(raw.rows)
    assert u.schema_failures_rejected == sum(1 for r in raw.rejects if r["code"] == "arguments_schema")
    assert u.schema_failures_kept == sum(1 for row in raw.rows for i in row["issue_list"]
                                         if i["code"] == "arguments_schema")


def test_tokens(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    k = report.tokens
    assert k.tokens == sum(row["num_tokens"] for row in raw.rows) == sum(len(row["input_ids"]) for row in raw.rows)
    assert k.trained == sum(sum(row["loss_mask"]) for row in raw.rows)
    assert k.trained_share == pytest.approx(k.trained / k.tokens)
    assert k.trimmed == sum(row["trimmed"] for row in raw.rows)
    assert {c.key: c.count for c in k.dropped} == raw.stats["stages"]["render"]["filtered"]
    assert k.max_tokens == raw.config["shape"]["max_tokens"]
    by_template = Counter((row["template"], row["tokenizer"]) for row in raw.rows)
    assert {(t.template, t.tokenizer): t.rows for t in k.templates} == by_template
    for tpl in k.templates:
        lengths = sorted(row["num_tokens"] for row in raw.rows
                         if (row["template"], row["tokenizer"]) == (tpl.template, tpl.tokenizer))
        assert (tpl.min, tpl.max, tpl.tokens) == (lengths[0], lengths[-1], sum(lengths))
        assert sum(b.count for b in tpl.histogram) == len(lengths)
        assert tpl.histogram[0].low == 0 and tpl.histogram[-1].high >= lengths[-1]
        for b in tpl.histogram:
            assert b.count == sum(1 for n in lengths if b.low <= n <= b.high)


def test_duplicates(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    ids = [row["id"] for row in raw.rows]
    assert report.duplicates.removed == raw.duplicates
    assert report.duplicates.enabled is raw.config["shape"]["dedup"] is True
    assert report.duplicates.repeated_ids == len(ids) - len(set(ids)) == 0


def test_ledger(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    entries = [e for row in raw.rows for e in row["ledger_list"]]
    kinds = Counter(e["kind"] for e in entries)
    assert {k.kind: k.entries for k in report.ledger.kinds} == kinds
    assert {k.kind: k.rows for k in report.ledger.kinds} == Counter(
        kind for row in raw.rows for kind in {e["kind"] for e in row["ledger_list"]})
    by_target = Counter((e["kind"], e["target"]) for e in entries)
    assert {(k.kind, c.key): c.count for k in report.ledger.kinds for c in k.targets} == by_target
    assert {c.key: c.count for c in report.ledger.targets} == Counter(e["target"] for e in entries)
    # stats.json tallies the written records' ledger: the same figure, counted by the run.
    tally = raw.stats["tallies"].get("ledger", {})
    for k in report.ledger.kinds:
        assert k.tallied == tally.get(k.kind, 0) == k.entries
    reasons = Counter((e["target"], e["kind"], e["reason"]) for e in entries)
    for reason in report.ledger.reasons:
        assert reason.entries == reasons[(reason.target, reason.kind, reason.reason)]
    assert [r.entries for r in report.ledger.reasons] == sorted(reasons.values(), reverse=True)[:15]


def test_reasoning(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    reasoning = {(n, mi, bi): block for n, mi, bi, _, block in raw.blocks() if block["type"] == "reasoning"}
    g = report.reasoning
    assert g.blocks == len(reasoning) and g.rows == len({n for n, _, _ in reasoning})
    assert g.with_text == sum(1 for b in reasoning.values() if b.get("text") or b.get("summary"))
    assert g.with_state == sum(1 for b in reasoning.values()
                               if any(b.get(k) is not None for k in ("signature", "encrypted", "redacted")))
    dropped: dict[tuple[str, str], set] = {}
    for n, row in enumerate(raw.rows):
        for e in row["ledger_list"]:
            match = BLOCK.match(e["path"])
            if match and (n, int(match[1]), int(match[2])) in reasoning:
                dropped.setdefault((e["target"], e["kind"]), set()).add((n, int(match[1]), int(match[2])))
    assert {(d.target, d.kind): d.blocks for d in g.dropped} == {key: len(v) for key, v in dropped.items()}
    assert g.trained is ("no-reasoning" not in raw.config["render"]["mask"])


def test_longest_and_shortest(run_dir):
    raw, report = Raw(run_dir), build_report(run_dir)
    order = sorted(range(len(raw.rows)), key=lambda n: (-raw.rows[n]["num_tokens"], n))
    assert [c.source for c in report.longest] == [raw.rows[n]["source"] for n in order[:5]]
    order = sorted(range(len(raw.rows)), key=lambda n: (raw.rows[n]["num_tokens"], n))
    assert [c.source for c in report.shortest] == [raw.rows[n]["source"] for n in order[:5]]
    for c in report.longest + report.shortest:
        row = next(r for r in raw.rows if r["source"] == c.source)
        assert (c.tokens, c.trained, c.messages, c.tool_calls) == (
            row["num_tokens"], row["num_trained_tokens"], row["num_messages"], row["num_tool_calls"])
        opening = next((b["text"] for m in row["conv"]["messages"] if m["role"] == "user"
                        for b in m.get("blocks", []) if b["type"] == "text"), "")
        assert c.preview == (opening if len(opening) <= PREVIEW else opening[: PREVIEW - 1] + "…")


def test_corpus_run_has_every_section_filled(corpus_run):
    """On real data every section has something to show; a section silently empty is a bug."""
    report = build_report(corpus_run)
    assert len(report.formats) == 4 and report.tools.calls > 500 and report.tools.parallel_turns > 0
    assert report.tools.image_results > 0 and report.tools.hosted_calls > 0
    assert report.tools.schema_failures_rejected > 0
    assert report.duplicates.removed > 0 and report.tokens.trimmed > 0 and report.tokens.dropped
    assert report.reasoning.blocks > 0 and report.reasoning.dropped
    assert {k.kind for k in report.ledger.kinds} >= {"dropped", "folded", "synthesized"}


# --- the report's own files ----------------------------------------------------------------------

def test_run_writes_the_report_and_same_files_give_the_same_report(data_run, tmp_path):
    page = (data_run / "qa_report.html").read_text()
    assert page == render_html(build_report(data_run))
    assert "<script" not in page.lower() and "<link" not in page and " src=" not in page  # self-contained
    assert not any(p.name.startswith(".") for p in data_run.iterdir())  # no temporary file left
    off = run([DATA / "broken.jsonl"], tmp_path / "off", **{"output.qa_report": False})
    assert not (off / "qa_report.html").exists()


def test_jsonl_shards_give_the_same_figures(data_run, tmp_path):
    jsonl = run([DATA], tmp_path / "jsonl", **{"output.format": "jsonl"})
    assert list(jsonl.glob("data-*.jsonl"))
    strip = lambda r: {k: v for k, v in msgspec.to_builtins(r).items() if k not in ("files", "config")}  # noqa: E731
    assert strip(build_report(jsonl)) == strip(build_report(data_run))


def test_chunk_size_does_not_change_the_report(corpus_run, tmp_path, monkeypatch):
    """The report reads data a chunk of rows at a time; small chunks (many parts to combine) give the
    same figures, examples and extremes as the default, for Parquet and JSONL shards."""
    jsonl = run([require_corpus()], tmp_path / "jsonl", workers=2, **{"output.format": "jsonl", "output.shard_size": 300})
    whole = msgspec.to_builtins(build_report(corpus_run))
    monkeypatch.setattr(reading, "CHUNK_ROWS", 7)
    assert msgspec.to_builtins(build_report(corpus_run)) == whole
    strip = lambda r: {k: v for k, v in msgspec.to_builtins(r).items() if k not in ("files", "config", "totals")}  # noqa: E731
    assert strip(build_report(jsonl)) == {k: v for k, v in whole.items() if k not in ("files", "config", "totals")}


@pytest.fixture(scope="module")
def injected_runs(tmp_path_factory) -> tuple[Path, Path]:
    """data/ plus hand-written records holding flattened calls, a script and markup: as the default job
    runs them (flattened calls rejected), and with flattened_tool_call lowered to a warning (kept)."""
    severity = {"unanswered_call_at_end": "warning"}
    rejected = run([DATA, INJECTED], tmp_path_factory.mktemp("qa-injected"), **{"validate.severity": severity})
    kept = run([DATA, INJECTED], tmp_path_factory.mktemp("qa-injected-kept"),
               **{"validate.severity": {**severity, "flattened_tool_call": "warning"}})
    return rejected, kept


def test_flattened_calls_show_their_text(injected_runs):
    rejected, kept = (build_report(p) for p in injected_runs)
    source = f"{INJECTED}:"
    react = 'Action: get_weather\nAction Input: {"city": "<i>Bergen</i>"}'
    chatml = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "<script>document.title=\'pwned\'</script>"}}'
              '\n</tool_call>')
    assert [(f.source, f.outcome, f.family, f.text) for f in rejected.flattened] == [
        (source + "1", "rejected", "chatml", chatml), (source + "4", "rejected", "react", react)]
    # Kept as a warning, the ReAct one is written (the chatml one spells a ChatML special token, which
    # the template refuses at render).
    assert [(f.source, f.outcome, f.family, f.text) for f in kept.flattened] == [(source + "4", "written", "react", react)]
    row = next(r for r in Raw(injected_runs[1]).rows if r["source"] == source + "4")
    (issue,) = [i for i in row["issue_list"] if i["code"] == "flattened_tool_call"]
    assert issue["family"] == "react" and len(issue["span"]) == 2
    reject = next(r for r in Raw(injected_runs[0]).rejects if r["code"] == "flattened_tool_call")
    assert reject["detail"] == {"family": "chatml", "span": [21, 21 + len(chatml)], "text": chatml}


def test_transcript_strings_are_escaped(injected_runs):
    report = build_report(injected_runs[0])
    assert report.tools.image_results == 1 and report.tools.error_results >= 1
    assert report.shortest[0].preview == "<script>document.title='pwned'</script>"
    page = render_html(report)
    assert "<script" not in page and "<img" not in page and "<i>Bergen" not in page
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in page
    console = Console(record=True, width=200, color_system=None)
    render_terminal(report, console)
    out = console.export_text()
    assert "<script>document.title='pwned'</script>" in out  # printed as it is: no markup applied


def test_empty_run_renders_and_says_so(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    out = run([tmp_path / "empty.jsonl"], tmp_path / "out")
    report = build_report(out)
    assert report.status == "empty" and report.totals.read == 0 and report.totals.rows == 0
    assert report.tools.calls == 0 and report.tokens.templates == [] and report.longest == []
    page = (out / "qa_report.html").read_text()
    assert "Empty run" in page and 'id="tokens"' in page
    console = Console(record=True, width=120, color_system=None)
    render_terminal(report, console)
    assert "Empty run" in console.export_text()


def test_all_rejected_run_renders_and_says_so(tmp_path):
    out = run([DATA / "broken.jsonl"], tmp_path / "out")
    raw, report = Raw(out), build_report(out)
    assert report.status == "none_written" and report.totals.rows == 0
    assert report.totals.rejected == len(raw.rejects) == report.totals.read > 0
    assert {i.code: i.rejected for i in report.issues} == Counter(r["code"] for r in raw.rejects)
    assert all(i.examples for i in report.issues)
    assert "No conversation was written" in (out / "qa_report.html").read_text()


def test_files_alone_and_missing_files(data_run, tmp_path):
    shard = data_run / "data-00000.parquet"
    only_rows = build_report([shard])
    assert only_rows.totals.read is None and only_rows.totals.rows == Raw(data_run).stats["records"]["written"]
    assert any("no stats.json" in n for n in only_rows.notes)
    assert "no stats.json" in render_html(only_rows)
    assert main(["qa", str(tmp_path / "nowhere")]) == 2
    (tmp_path / "nothing").mkdir()
    assert main(["qa", str(tmp_path / "nothing")]) == 2


def test_cli(data_run, tmp_path, capsys):
    html = tmp_path / "report.html"
    assert main(["qa", str(data_run), "--json", "--html", str(html)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(msgspec.json.encode(build_report(data_run)))
    assert printed["totals"]["written"] == Raw(data_run).stats["records"]["written"]
    assert html.read_text() == render_html(build_report(data_run))
    assert main(["qa", str(data_run)]) == 0
    out = capsys.readouterr().out
    assert "Validation issues" in out and "Longest conversations" in out


def test_duplicates_with_dedup_on_and_off(tmp_path):
    """The same file twice: removed by the dedup stage when it is on, counted among the rows when off."""
    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (twice / name).write_bytes((DATA / "openai_chat.jsonl").read_bytes())
    on = run([twice], tmp_path / "on")
    # (sessions = "all": folding would take the copies as conversations equal to one of their session)
    off = run([twice], tmp_path / "off", **{"shape.dedup": False, "shape.sessions": "all"})
    raw_on, raw_off = Raw(on), Raw(off)
    ids = [row["id"] for row in raw_off.rows]
    assert len(ids) == 2 * len(raw_on.rows) > 0
    on_report, off_report = build_report(on), build_report(off)
    assert (on_report.duplicates.enabled, on_report.duplicates.removed, on_report.duplicates.repeated_ids) == (
        True, len(raw_on.rows), 0)
    assert (off_report.duplicates.enabled, off_report.duplicates.removed, off_report.duplicates.repeated_ids) == (
        False, 0, len(ids) - len(set(ids)))
