"""inspect_ai eval logs through `sftprep run`. The sample data/sessions/inspect_eval.eval follows the
`.eval` log format of UKGovernmentBEIS/inspect_ai (src/inspect_ai/log: a zip of `header.json` and
`samples/<id>_epoch_<n>.json`, each an `EvalSample` with `messages` (ChatMessageSystem/User/Assistant/
Tool, content parts ContentText/ContentReasoning), `events` (ModelEvent with `tools`: ToolInfo) and
`attachments` referenced as `attachment://<hash>`)."""

from __future__ import annotations

import json
import zipfile

import pytest

from corpus import ROOT
from pipeline.ingest import iter_parsed
from source_run import blocks, paired, sftprep_run

SAMPLE = ROOT / "data" / "sessions" / "inspect_eval.eval"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("inspect"), SAMPLE)


def _sample(name: str) -> dict:
    with zipfile.ZipFile(SAMPLE) as archive:
        return json.loads(archive.read(name))


def test_one_record_per_sample(run):
    records = run.stats["records"]
    assert (records["read"], records["written"], records["rejected"]) == (2, 1, 1)
    [reject] = run.rejects
    assert (reject["source"].rsplit(":", 1)[1], reject["code"], reject["path"]) == \
        ("1#samples/2_epoch_1.json", "failed_sample", "$.error")
    assert "sandbox exited with code 137" in reject["message"]


def test_sample_conversation_with_attachment_resolved(run):
    conv = run.rows[0]["conversation"]
    assert conv["system"] == [{"type": "text", "text": "Answer questions about files. Use read_file."}]
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool", "assistant"]
    reasoning, text, call = blocks(conv["messages"][1])
    assert reasoning == ("reasoning", "I should read NOTES.md first.", ())
    assert conv["messages"][1]["blocks"][0]["signature"].startswith("EqQBCkYIBxgCKkA1")
    assert (text, call) == (("text", "Reading the notes."), ("tool_call", "read_file", {"path": "NOTES.md"}, "toolu_n1"))
    sample = _sample("samples/1_epoch_1.json")
    expected = next(iter(sample["attachments"].values()))
    assert blocks(conv["messages"][2]) == [("tool_result", "toolu_n1", [expected], False)]
    assert paired(conv)
    assert [t["name"] for t in conv["tools"]] == ["read_file"]
    assert conv["extras"]["inspect-ai"] == {"id": 1, "epoch": 1, "target": "40", "task": "file_questions",
                                            "model": "anthropic/claude-sonnet-4-5", "eval_id": "Qk2vX8aZ3nE9tR4pL7wY1c",
                                            "run_id": "Hs6Jd0Fq2Lm8Np4Rt1Vx9b", "created": "2026-01-11T12:00:00+00:00"}


def test_json_log_and_missing_attachment(tmp_path):
    good = _sample("samples/1_epoch_1.json")
    bad = {**good, "id": 3, "attachments": {}}
    log = {"version": 2, "status": "success", "eval": {"task": "t", "model": "m", "created": "2026-01-11T12:00:00+00:00"},
           "samples": [good, bad]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    first, second = iter_parsed([path])
    assert first.source == f"{path}:1#samples[0]" and [m.role for m in first.conversation.messages][-1] == "assistant"
    assert (second.error.code, second.error.path) == ("attachment_missing", "$.messages[3].content")


def test_a_broken_entry_fails_alone(tmp_path):
    path = tmp_path / "run.eval"
    with zipfile.ZipFile(SAMPLE) as source, zipfile.ZipFile(path, "w") as target:
        for name in source.namelist():
            target.writestr(name, source.read(name) if name != "samples/2_epoch_1.json" else b"{cut")
    first, second = iter_parsed([path])
    assert first.conversation is not None and second.error.code == "invalid_json"
