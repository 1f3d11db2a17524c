"""The report's sessions section, checked against counts made here from the raw files (pyarrow, json):
folded prefixes per source, branches, windows, the trained-token histogram, flagged rows, tokens by role."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from pipeline import run_job
from pipeline.qa import build_report, render_html, render_terminal
from pipeline.qa.session_parts import LOW_TRAINED
from pipeline.qa.sessions import trained_bins
from pipeline.run.config import load_config

ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _loop(task: str, steps: int, *, answer: bool, result: str = "r") -> list[dict]:
    messages = [{"role": "user", "content": task}]
    for i in range(steps):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"k": i})}}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": f"{result} {i} " * 30}]
    if answer:
        messages.append({"role": "assistant", "content": "<b>done</b> " * 20})
    return messages


@pytest.fixture(scope="module")
def session_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sessions")
    logs = tmp / "logs"
    logs.mkdir()
    records = [_loop("task a", n, answer=n == 3) for n in range(1, 4)]  # two prefixes of the third
    records += [_loop("task a", 2, answer=True, result="other")]  # a branch of task a
    records += [_loop("task b", 40, answer=True)]  # long: windowed
    records += [[{"role": "assistant", "content": "A greeting with no user turn."}]]
    records += [[{"role": "user", "content": "Yes?"}, {"role": "assistant", "content": "No."}]]  # few trained tokens
    (logs / "agent.jsonl").write_text("".join(json.dumps({"model": "m", "messages": m, "tools": TOOLS}) + "\n"
                                              for m in records))
    out = tmp / "out"
    config = load_config(ROOT / "configs" / "default.toml",
                         {"input.paths": [str(logs)], "output.dir": str(out), "run.workers": 1,
                          "shape.max_tokens": 1500, "shape.long": "window"})
    run_job(config, progress=False)
    return out


def _rows(out: Path) -> list[dict]:
    return [row for shard in sorted(out.glob("data-*.parquet")) for row in pq.read_table(shard).to_pylist()]


def test_folds_branches_and_windows(session_run):
    rows, stats = _rows(session_run), json.loads((session_run / "stats.json").read_text())
    g = build_report(session_run).sessions
    assert g.folded == stats["stages"]["fold"]["filtered"]["prefix_of"] == 2 == g.folded_in_rows
    assert [(f.file.rsplit("/", 1)[1], f.folded) for f in g.folded_by_source] == [("agent.jsonl", 2)]
    firsts = [r for r in rows if r["window"] == 0]
    per_session = Counter(r["session"] for r in firsts)
    assert g.sessions == len(per_session) and g.branched_sessions == 1 and g.max_branches == 2
    assert {b.label: b.count for b in g.branches}["2"] == 1
    windowed = [r for r in firsts if r["windows"] > 1]
    assert g.windowed == len(windowed) == 1 and g.window_rows == windowed[0]["windows"] > 1
    assert sum(b.count for b in g.windows_per_conversation) == 1
    assert g.lost_units == 0 and g.long == "window" and g.mode == "longest"
    notes = build_report(session_run).notes
    assert notes == []  # stats.json's row count (windows included) matches the files


def test_trained_tokens_flags_and_roles(session_run):
    rows = _rows(session_run)
    g = build_report(session_run).sessions
    assert sum(b.count for b in g.trained_histogram) == len(rows)
    for b in g.trained_histogram:
        assert b.count == sum(b.low <= r["num_trained_tokens"] <= (b.high if b.high is not None else 1 << 30)
                              for r in rows)
    low = [r for r in rows if r["num_trained_tokens"] < LOW_TRAINED]
    assert g.low_trained == len(low) >= 1 and {e.source for e in g.low_trained_examples} <= {r["source"] for r in low}
    no_user = [r for r in rows if not any(m["role"] == "user" for m in json.loads(r["conversation"])["messages"])]
    assert g.no_user_turn == len(no_user) >= 2  # the greeting, and windows that start mid-loop
    assert any(e.preview == "A greeting with no user turn." for e in g.no_user_examples)
    by_role = Counter()
    for r in rows:
        by_role.update(json.loads(r["role_tokens"]))
    assert {x.role: x.tokens for x in g.role_tokens} == dict(by_role)
    assert sum(by_role.values()) == sum(r["num_tokens"] for r in rows)
    assert abs(sum(x.share for x in g.role_tokens) - 1) < 1e-9
    assert by_role["tool"] > 0 and by_role["tools"] > 0 and by_role["system"] == 0


def test_html_and_terminal_show_the_section(session_run):
    report = build_report(session_run)
    html = render_html(report)
    assert 'id="sessions"' in html and "Trained tokens per row" in html and "Tokens by role" in html
    assert "<b>done</b>" not in html  # transcript text escaped
    console = Console(record=True, width=120)
    render_terminal(report, console)
    text = console.export_text()
    assert "folded 2 prefixes" in text and "1 conversations as" in text


def test_trained_histogram_goes_logarithmic_when_wide():
    narrow, log = trained_bins(pl.Series([10, 20, 30, 400]))
    assert not log and sum(b.count for b in narrow) == 4
    wide, log = trained_bins(pl.Series([0, 3, 12, 150, 9000]))
    assert log and [b.label for b in wide[:5]] == ["0", "1", "2–4", "5–9", "10–19"]
    assert [b.count for b in wide if b.count] == [1, 1, 1, 1, 1] and wide[-1].high >= 9000
