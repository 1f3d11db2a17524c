"""[render] past_reasoning in a run: "expand" writes one row per case with the case recorded, the rows
equal the library's expansion, the stats and the QA report count them; other values keep one row."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from corpus import ROOT
from pipeline import run_job
from pipeline.formats import parse
from pipeline.qa import build_report, render_html, render_terminal
from pipeline.render import load_template, load_tokenizer
from pipeline.render.expand import expand
from pipeline.run.config import load_config

TOOLS = [{"name": "stock", "description": "Copies in stock for an ISBN.",
          "input_schema": {"type": "object", "properties": {"isbn": {"type": "string"}}, "required": ["isbn"]}}]


def _body(k: int) -> dict:
    """An Anthropic request with thinking in two user queries' worth of turns (self-written)."""
    isbn = f"978-0-00-00{k:04d}-1"
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You run a bookshop's stock desk.",
            "tools": TOOLS, "messages": [
                {"role": "user", "content": f"Do we have {isbn}?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look the ISBN up.", "signature": f"sig-a{k}"},
                    {"type": "tool_use", "id": f"toolu_{k}a", "name": "stock", "input": {"isbn": isbn}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}a", "content": "2"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Two copies.", "signature": f"sig-b{k}"},
                    {"type": "text", "text": "Yes, 2 copies."}]},
                {"role": "user", "content": "Thanks. Anything else I should know?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Nothing else to add.", "signature": f"sig-c{k}"},
                    {"type": "text", "text": "No, that's all."}]}]}


def _run(tmp_path: Path, past_reasoning: str, records: int = 3):
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(_body(k)) + "\n" for k in range(records)))
    config = load_config(ROOT / "configs" / "default.toml", {
        "input.paths": [str(data)], "output.dir": str(tmp_path / f"out-{past_reasoning}"), "run.workers": 1,
        "render.template": "qwen3", "render.tokenizer": "qwen3", "render.past_reasoning": past_reasoning})
    return run_job(config, progress=False)


@pytest.fixture(scope="module")
def expanded_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("expand"), "expand")


def test_expand_rows_equal_the_library_expansion(expanded_run):
    rows = pq.read_table(expanded_run.shards[0]).to_pylist()
    assert len(rows) == 6  # 3 records, 2 rows each
    tokenizer, template = load_tokenizer("qwen3"), load_template("qwen3")
    for k in range(3):
        mine = [r for r in rows if r["source"].endswith(f":{k + 1}")]
        expected = expand(parse(_body(k), "anthropic"), template, tokenizer)
        assert [json.loads(r["reasoning_row"]) for r in mine] == [
            {"case": "prefix", "row": 0, "rows": 2, "messages": 4, "trained": [1, 3]},
            {"case": "final", "row": 1, "rows": 2, "messages": 6, "trained": [5]}]
        for row, want in zip(mine, expected):
            assert row["input_ids"] == want.rendered.input_ids and row["loss_mask"] == want.rendered.loss_mask
            assert row["num_messages"] == want.messages
        assert mine[0]["id"] == f"{mine[1]['id']}/4"
        assert "<think>\nLook the ISBN up.\n</think>" in tokenizer.decode(mine[0]["input_ids"])


def test_expand_stats_and_qa_report(expanded_run):
    stats = json.loads((expanded_run.output_dir / "stats.json").read_text())
    assert stats["records"]["written"] == 3
    assert stats["tallies"]["past_reasoning"] == {"final": 3, "prefix": 3}
    report = build_report(expanded_run.output_dir)
    cases = {c.case: c for c in report.reasoning.expanded}
    rows = pq.read_table(expanded_run.shards[0]).to_pylist()
    prefix_tokens = sum(r["num_tokens"] for r in rows if json.loads(r["reasoning_row"])["case"] == "prefix")
    assert set(cases) == {"final", "prefix"} and cases["prefix"].rows == 3 and cases["prefix"].tokens == prefix_tokens
    html = render_html(report)
    assert 'past_reasoning = "expand"' in html and f'<td class="n">{prefix_tokens:,}</td>' in html
    console = Console(record=True, width=160)
    render_terminal(report, console)
    assert "prefix 3 (" in console.export_text()


@pytest.mark.parametrize("past_reasoning", ["as_template", "keep", "drop"])
def test_other_values_keep_one_row_per_record(tmp_path, past_reasoning):
    run = _run(tmp_path, past_reasoning, records=1)
    rows = pq.read_table(run.shards[0]).to_pylist()
    assert len(rows) == 1 and rows[0]["reasoning_row"] is None
    text = load_tokenizer("qwen3").decode(rows[0]["input_ids"])
    assert text.count("<think>\n\n</think>") == (1 if past_reasoning == "drop" else 0)
    assert ("Look the ISBN up." in text) == (past_reasoning == "keep")
    assert np.count_nonzero(rows[0]["loss_mask"]) == rows[0]["num_trained_tokens"]
