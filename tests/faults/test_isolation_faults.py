"""Cause 2: every stage isolates each record. An unexpected exception in one record (a bug, or input no
rule foresaw) becomes a rejection with code `internal_error`, the exception and where it was raised;
the other records go on; the summary and the exit status say internal errors occurred."""

from __future__ import annotations

import importlib
import json

import pytest
from fault_support import ANTHROPIC, CHAT, CHATML_LIKE, PLAIN, clean, jsonl, run_job, run_outputs, sftprep

import pipeline.cli.validate
import pipeline.formats.registry
import pipeline.run.stages
from pipeline.conversation import to_builtins

BOMB = "please explode"


def _bomb(real):
    """`real`, except that it raises ZeroDivisionError for a conversation whose text holds BOMB."""
    def wrapped(conv, *args, **kwargs):
        if BOMB in json.dumps(to_builtins(conv), default=str):
            return 1 / 0
        return real(conv, *args, **kwargs)
    return wrapped


@pytest.fixture
def three(tmp_path):
    bad = json.loads(json.dumps(CHAT))
    bad["messages"][0]["content"] = BOMB
    return jsonl(tmp_path / "in.jsonl", CHAT, bad, ANTHROPIC)


def _internal(message: str) -> None:
    assert "ZeroDivisionError" in message and "test_isolation_faults.py" in message, message


@pytest.mark.parametrize("target", ["validate", "render"])
def test_run_turns_a_stage_bug_into_one_internal_error_reject(tmp_path, three, monkeypatch, target):
    if target == "validate":
        monkeypatch.setattr(pipeline.run.stages, "validate", _bomb(pipeline.run.stages.validate))
    else:
        from pipeline.run.render_stage import Renderer

        real = Renderer.render_item
        monkeypatch.setattr(Renderer, "render_item", lambda self, item, *args: (
            1 / 0 if BOMB in json.dumps(item.record) else real(self, item, *args)))
    done, out = run_job(tmp_path, three)
    clean(done, 1)
    assert "1 internal errors" in done.err
    stats, rejects, rows = run_outputs(out)
    assert [(r["source"], r["stage"], r["code"]) for r in rejects] == [(f"{three}:2", target, "internal_error")]
    _internal(rejects[0]["message"])
    assert rejects[0]["detail"]["exception"].startswith("ZeroDivisionError")
    assert rejects[0]["detail"]["where"].startswith("tests/faults/") or "test_isolation_faults.py" in rejects[0]["detail"]["where"]
    assert rejects[0]["record"]["messages"][0]["content"] == BOMB  # the original record, for a bug report
    assert [r["source"] for r in rows] == [f"{three}:1", f"{three}:3"]


def test_convert_rejects_the_record_a_serializer_bug_hits(three, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline.formats.registry, "serialize", _bomb(pipeline.formats.registry.serialize))
    rejects = tmp_path / "rejects.jsonl"
    done = clean(sftprep("convert", str(three), "--to", "gemini", "--rejects", str(rejects)), 1)
    assert "read 3, converted 2, rejected 1 (1 internal errors)" in done.err
    assert [line["source"] for line in done.lines()] == [f"{three}:1", f"{three}:3"]
    (reject,) = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert reject["code"] == "internal_error" and reject["source"] == f"{three}:2"
    _internal(reject["error"])


def test_validate_reports_a_rule_bug_as_that_records_error(three, monkeypatch):
    monkeypatch.setattr(pipeline.cli.validate, "validate", _bomb(pipeline.cli.validate.validate))
    lines = clean(sftprep("validate", str(three), "--json"), 1).lines()
    assert [[i["code"] for i in line["issues"]] for line in lines] == [[], ["internal_error"], []]
    _internal(lines[1]["issues"][0]["message"])


def test_render_shows_the_other_records_when_one_hits_a_bug(three, monkeypatch):
    package = importlib.import_module("pipeline.render")  # `pipeline.render` is the function
    monkeypatch.setattr(package, "render", _bomb(package.render))
    done = clean(sftprep("render", str(three), "--template", "chatml", "--record", "all", "--json"), 1)
    lines = done.lines()
    assert [line.get("error", {}).get("code") for line in lines] == [None, "internal_error", None]
    assert f"{three}:2: template chatml" in done.err


def test_hostile_shapes_are_located_errors_not_crashes(tmp_path):
    response = {"id": "r", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    exchange = {"request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions", "body": CHAT},
                "response": {"status": 200, "body": response}}
    uri_number = json.loads(json.dumps(exchange))
    uri_number["request"]["uri"] = 123
    later = json.loads(json.dumps(exchange))
    later["response"]["body"]["choices"][0]["message"]["content"] = "hello again"
    src = jsonl(tmp_path / "in.jsonl", exchange, uri_number, [1, 2], "text", None, {"messages": "x"}, later)
    session = jsonl(tmp_path / "session.jsonl",
                    {"type": "user", "sessionId": "s", "uuid": "u0", "message": {"role": "user", "content": "hi"}},
                    {"type": ["user"], "sessionId": "s", "uuid": "u1", "message": {"role": "user", "content": "x"}},
                    {"type": "assistant", "sessionId": "s", "uuid": "u2", "parentUuid": "u0",
                     "message": {"role": "assistant", "model": "m", "content": [{"type": "text", "text": "yo"}]}})
    done, out = run_job(tmp_path, src, session)
    clean(done, 0)  # no internal error: each is a located rejection
    stats, rejects, rows = run_outputs(out)
    by_source = {r["source"]: r for r in rejects}
    assert by_source[f"{src}:2"]["path"] == "$.request.uri"
    assert "internal_error" not in {r["code"] for r in rejects}
    assert {r["source"] for r in rows} >= {f"{src}:1", f"{src}:7", f"{session}:1"}


def test_a_template_raising_rejects_its_record_only(tmp_path):
    template = tmp_path / "divide.jinja"
    template.write_text(CHATML_LIKE.replace("{{ m.content }}", '{% if m.content == "hi" %}{{ 1 / 0 }}{% endif %}{{ m.content }}'))
    short = json.loads(json.dumps(PLAIN))
    short["messages"][0]["content"] = "hi"
    src = jsonl(tmp_path / "in.jsonl", PLAIN, short)
    done, out = run_job(tmp_path, src, extra=f'[render]\ntemplate = "{template}"\ntokenizer = "qwen2.5"\n')
    clean(done, 0)
    stats, rejects, rows = run_outputs(out)
    assert [(r["source"], r["code"]) for r in rejects] == [(f"{src}:2", "template_error")]
    assert "ZeroDivisionError" in rejects[0]["message"] and [r["source"] for r in rows] == [f"{src}:1"]
