"""User templates are code from elsewhere: each render is bounded (time, output, loop steps, the size
of what `*` and `**` build, stored values, recursion) and a template over a bound rejects that record
with `template_limit`; the records it renders within bounds are written."""

from __future__ import annotations

import json

import pytest
from fault_support import CHATML_LIKE, PLAIN, clean, jsonl, run_job, run_outputs, sftprep

from pipeline.render import template_limits

HOSTILE = {
    "huge_range": "{% for i in range(10**9) %}{% endfor %}",
    "huge_string": "{{ 'a' * 10**9 }}",
    "huge_power": "{{ 10**1000000000 }}",
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "nested_loops": "{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}",
    "huge_output": "{% for i in range(10**6) %}{{ 'x' * 1000 }}{% endfor %}",
    "doubling": "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
}


@pytest.fixture(autouse=True)
def small_limits(monkeypatch):
    # The same checks with smaller bounds keep the suite quick; the defaults are documented in the module.
    monkeypatch.setattr(template_limits, "MAX_STEPS", 20_000)
    monkeypatch.setattr(template_limits, "MAX_OUTPUT_CHARS", 1_000_000)
    monkeypatch.setattr(template_limits, "MAX_VALUE_SIZE", 100_000)


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_template_over_a_bound_rejects_the_record_it_renders(tmp_path, name):
    # The hostile part runs only for the record that says "go": the other record renders.
    template = tmp_path / f"{name}.jinja"
    template.write_text("{% if messages[0].content == 'go' %}" + HOSTILE[name] + "{% endif %}" + CHATML_LIKE)
    hostile = json.loads(json.dumps(PLAIN))
    hostile["messages"][0]["content"] = "go"
    src = jsonl(tmp_path / "in.jsonl", PLAIN, hostile)
    done, out = run_job(tmp_path, src, extra=f'[render]\ntemplate = "{template}"\ntokenizer = "qwen2.5"\n')
    clean(done, 0)
    stats, rejects, rows = run_outputs(out)
    assert [(r["source"], r["stage"], r["code"]) for r in rejects] == [(f"{src}:2", "render", "template_limit")]
    assert "exceeded its limit" in rejects[0]["message"]
    assert [r["source"] for r in rows] == [f"{src}:1"]


def test_the_render_command_reports_the_limit_and_shows_the_rest(tmp_path):
    template = tmp_path / "loop.jinja"
    template.write_text("{% if messages[0].content == 'go' %}" + HOSTILE["huge_range"] + "{% endif %}" + CHATML_LIKE)
    hostile = json.loads(json.dumps(PLAIN))
    hostile["messages"][0]["content"] = "go"
    src = jsonl(tmp_path / "in.jsonl", hostile, PLAIN)
    done = clean(sftprep("render", str(src), "--template", str(template), "--tokenizer", "qwen2.5",
                         "--record", "all", "--json"), 1)
    assert [line.get("error", {}).get("code") for line in done.lines()] == ["template_limit", None]


def test_the_wall_clock_stops_a_loop_the_step_budget_does_not_see(tmp_path, monkeypatch):
    monkeypatch.setattr(template_limits, "MAX_SECONDS", 0.5)
    monkeypatch.setattr(template_limits, "MAX_STEPS", 10**12)
    template = tmp_path / "slow.jinja"
    many = {"messages": [{"role": ("user", "assistant")[i % 2], "content": f"turn {i}"} for i in range(300)]}
    # messages^4: no range() to count, only the clock to stop it.
    template.write_text("{% for a in messages %}{% for b in messages %}{% for c in messages %}{% for d in messages %}"
                        "{% endfor %}{% endfor %}{% endfor %}{% endfor %}" + CHATML_LIKE)
    src = jsonl(tmp_path / "in.jsonl", many)
    done, out = run_job(tmp_path, src, extra=f'[render]\ntemplate = "{template}"\ntokenizer = "qwen2.5"\n')
    clean(done, 0)
    _, rejects, _ = run_outputs(out)
    assert [r["code"] for r in rejects] == ["template_limit"] and "longer than 0.5 s" in rejects[0]["message"]
