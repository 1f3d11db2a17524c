"""The `messages` + `tools` of a row are the conversation its template rendered: through the template
again (the project's and the official one through transformers) they give the row's input_ids, on every
row of runs over the samples, this suite's fixture and the corpus. Hosted tools the render dropped are
not exported, results and joined texts are the strings the template wrote, no turn is made up, and a
trimmed row exports the trimmed conversation."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import export_runs
from pipeline import load_template, load_tokenizer
from pipeline.render import RenderOptions
from pipeline.render._inputs import TemplateInputs
from pipeline.render.marks import MARK_RE
from trl_templates import trl_template

DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)  # configs/default.toml's render.date
OFFICIAL = {"chatml": "qwen2_5.jinja", "llama3": "llama3_1.jinja"}


@pytest.fixture(scope="module", params=[("chatml", "local"), ("chatml", "corpus"), ("llama3", "local"),
                                        ("llama3", "corpus")], ids="-".join)
def run(request, tmp_path_factory):
    template, where = request.param
    settings = {} if template == "chatml" else {"render.template": "llama3", "render.tokenizer": "llama3"}
    out = export_runs.shared_run(tmp_path_factory, corpus=where == "corpus", **settings)
    rows = [row for split in export_runs.splits(out) for row in export_runs.rows(out, split)]
    return template, rows


def test_the_export_through_the_template_gives_the_row(run):
    name, rows = run
    tokenizer = load_tokenizer(rows[0]["tokenizer"])
    template = load_template(name)
    for row in rows:
        inputs = TemplateInputs(row["messages"], row["tools"] or None)
        # without the two sentinels the project's templates write around {% generation %} regions
        text = MARK_RE.sub("", template.render_raw(inputs, tokenizer, RenderOptions(now=DATE)))
        ids = tokenizer.backend.encode(text, add_special_tokens=False).ids
        assert ids == row["input_ids"], row["source"]


def test_the_export_through_the_official_template_gives_the_row(run):
    name, rows = run
    tokenizer = load_tokenizer(rows[0]["tokenizer"])
    hf = tokenizer.to_transformers(trl_template(OFFICIAL[name]))
    for row in rows:
        ids = hf.apply_chat_template(row["messages"], tools=row["tools"] or None, tokenize=True, return_dict=True,
                                     date_string=DATE.strftime("%d %b %Y"))["input_ids"]
        assert ids == row["input_ids"], row["source"]


def _fixture_rows(rows):
    return {row["source"].rsplit(":", 1)[1]: row for row in rows if "fixtures/exports" in row["source"]}


def test_what_the_render_wrote_is_what_is_exported(run):
    name, rows = run
    if name != "chatml":
        pytest.skip("the fixture's expectations are written for ChatML")
    fixture = _fixture_rows(rows)
    trip = fixture["1"]
    assert [t["function"]["name"] for t in trip["tools"]] == ["get_weather", "search_flights"]  # no web_search
    assistant = [m for m in trip["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == "First the news for Lisbon.\nThen the weather."  # two blocks, as joined
    assert [c["function"]["name"] for c in assistant[0]["tool_calls"]] == ["get_weather"]  # no hosted call
    results = [m["content"] for m in trip["messages"] if m["role"] == "tool"]
    assert results[:2] == ["unknown city 'Lisboa'", "22C\nsunny, light wind"]  # error flag: not rendered
    reasons = {e["reason"] for e in trip["ledger"]}
    assert "chatml tool results have no error flag" in reasons and "2 text blocks joined into one turn" in reasons
    route = fixture["3"]
    assert [m["content"] for m in route["messages"] if m["role"] == "tool"] == \
        ['{"km": 87, "minutes": 65, "tolls": ["A22"]}']  # structured output, as the template wrote it
    for row in rows:  # no made-up turn: an empty one only where the record itself has one
        empty = sum(not m["content"] and not m.get("tool_calls") for m in row["messages"] if m["role"] != "tool")
        logged = sum(all(b.get("type") == "text" and not b["text"] for b in m.get("blocks", ())) and
                     m["role"] != "tool" for m in row["conversation"]["messages"])
        assert empty <= logged, row["source"]


def test_a_trimmed_row_exports_the_trimmed_conversation(tmp_path):
    out = export_runs.run(tmp_path, [str(export_runs.FIXTURE)], **{"shape.max_tokens": 600, "output.validation": 0,
                                                                     "export.formats": []})
    (row,) = [r for r in export_runs.rows(out) if r["source"].endswith(":4")]
    assert row["trimmed"] and row["num_tokens"] <= 600
    kept = row["conversation"]["messages"]
    assert len([m for m in row["messages"] if m["role"] != "system"]) == len(kept) < 48
    assert row["messages"][-1]["content"] == kept[-1]["blocks"][0]["text"]
