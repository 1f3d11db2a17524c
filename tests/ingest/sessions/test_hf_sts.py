"""Hugging Face STS sessions through `sftprep run`. The sample data/sessions/hf_sts_session.jsonl follows
the Session Trace Simple Format (huggingface/hub-docs, docs/hub/session-traces-format.md: a `session`
header line, then `message` envelopes with role, content, reasoningContent, toolCalls, toolCallId)."""

from __future__ import annotations

import json

import pytest

from corpus import ROOT
from pipeline.ingest import iter_parsed
from source_run import blocks, paired, sftprep_run

SAMPLE = ROOT / "data" / "sessions" / "hf_sts_session.jsonl"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("sts"), SAMPLE)


def test_session(run):
    assert (run.stats["records"]["read"], run.stats["records"]["written"]) == (1, 1)
    conv = run.rows[0]["conversation"]
    assert conv["system"] == [{"type": "text", "text": "You are a shell assistant. Use tools to inspect files."}]
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert blocks(conv["messages"][1]) == [("reasoning", "wc -w gives the word count.", ()),
                                           ("tool_call", "run", {"cmd": "wc -w notes.txt"}, "t1")]
    assert blocks(conv["messages"][2]) == [("tool_result", "t1", ["412 notes.txt"], False)]
    assert paired(conv)
    meta = conv["meta"]
    assert (meta["shape"], meta["model"], meta["created"]) == ("hf-sts", "llama-3.3-70b-instruct", "2026-01-09T08:00:00.000Z")
    assert meta["lacks"] == ["source_reasoning_unsigned", "source_no_tool_list"]
    assert any(":6: line of type 'progress' skipped" in n for n in meta["notes"])
    assert conv["extras"]["hf-sts"] == {"harness": "llama.app", "id": "sts-7c1d", "name": "Count words in a file",
                                        "skipped": {"progress": 1}}
    assert {"source_reasoning_unsigned", "source_no_tool_list"} <= {i["code"] for i in json.loads(run.rows[0]["issues"])}


def test_bad_lines(tmp_path):
    path = tmp_path / "s.jsonl"
    header = json.dumps({"type": "session", "harness": "x", "id": "1"})
    path.write_text(header + "\n{broken\n" + json.dumps({"type": "message", "message": {"role": "user", "content": "a"}}) + "\n")
    [parsed] = iter_parsed([path])
    assert parsed.error.code == "invalid_line" and parsed.error.source == f"{path}:2"
    path.write_text(header + "\n" + json.dumps({"type": "message", "message": {"role": "robot", "content": "a"}}) + "\n")
    [parsed] = iter_parsed([path])
    assert parsed.error.path == "$.messages[0].role" and "line 2" in parsed.error.message
