"""Gemini CLI chat recordings through `sftprep run`. The sample data/sessions/gemini_cli_session.jsonl
follows the JSONL recording of gemini-cli's ChatRecordingService
(google-gemini/gemini-cli, packages/core/src/services/chatRecordingService.ts: a metadata line, then
MessageRecord upserts by id with `toolCalls` (ToolCallRecord: id, name, args, result as functionResponse
parts, status) and `thoughts` (ThoughtSummary: subject, description), `$set` patches and `$rewindTo`)."""

from __future__ import annotations

import json

import pytest

from corpus import ROOT
from pipeline.ingest import iter_parsed
from source_run import blocks, paired, sftprep_run

SAMPLE = ROOT / "data" / "sessions" / "gemini_cli_session.jsonl"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("gcli"), SAMPLE)


def test_recording_replayed(run):
    records = run.stats["records"]
    assert (records["read"], records["written"]) == (1, 1)
    conv = run.rows[0]["conversation"]
    # m2 written twice (the second write holds the result), m4 a CLI notice, m6/m7 rewound away.
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m["extras"]["gemini-cli"]["id"] for m in conv["messages"] if m["role"] != "tool"] == ["m1", "m2", "m3", "m5"]
    assert conv["messages"][1]["extras"]["gemini-cli"]["line"] == 4
    assert blocks(conv["messages"][1]) == [
        ("reasoning", None, ("Finding the files: I'll glob for Python files, then read main.py.",)),
        ("tool_call", "glob", {"pattern": "**/*.py"}, "glob-1")]
    assert blocks(conv["messages"][2]) == [
        ("tool_result", "glob-1", ["Found 2 file(s):\n/home/dev/app/main.py\n/home/dev/app/util.py"], False)]
    assert blocks(conv["messages"][3]) == [("text", "There are two files. Reading main.py."),
                                           ("tool_call", "read_file", {"absolute_path": "/home/dev/app/main.py"}, "read-1")]
    assert blocks(conv["messages"][5]) == [("text", "main.py is 3 lines long: an import, a blank line and a print call.")]
    assert paired(conv)


def test_what_a_recording_lacks(run):
    conv = run.rows[0]["conversation"]
    assert conv["meta"]["lacks"] == ["source_reasoning_summary_only", "source_no_tool_list",
                                     "source_tool_output_truncated"]
    codes = {i["code"] for i in json.loads(run.rows[0]["issues"])}
    assert {"source_reasoning_summary_only", "source_no_tool_list", "source_tool_output_truncated"} <= codes
    ledger = [e for e in json.loads(run.rows[0]["ledger"]) if e.get("target") == "gemini-cli"]
    assert len(ledger) == 3
    extras = conv["extras"]["gemini-cli"]
    assert extras["summary"] == "Listed Python files and measured main.py"  # from $set
    assert extras["skipped"] == {"info": 1, "unknown": 1}
    assert any(":12: line of unknown kind" in n for n in conv["meta"]["notes"])
    assert (conv["meta"]["provider"], conv["meta"]["model"]) == ("gemini-cli", "gemini-2.5-pro")


def _recording(tmp_path, lines, name="session-x.jsonl"):
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return list(iter_parsed([path]))


HEAD = {"sessionId": "s", "projectHash": "h", "startTime": "2026-01-01T00:00:00Z", "messages": []}
ASK = {"id": "a", "type": "user", "content": "run it"}


def test_cancelled_call_is_an_error_result_and_set_messages_replace(tmp_path):
    call = {"id": "b", "type": "gemini", "content": "", "toolCalls": [
        {"id": "c1", "name": "run_shell_command", "args": {"command": "ls"}, "status": "cancelled",
         "result": [{"functionResponse": {"id": "c1", "name": "run_shell_command",
                                          "response": {"error": "[Operation Cancelled]"}}}]}]}
    [parsed] = _recording(tmp_path, [HEAD, {"id": "z", "type": "user", "content": "gone"},
                                     {"$set": {"messages": [ASK]}}, call])
    user, turn, tool = parsed.conversation.messages
    assert user.blocks[0].text == "run it"
    assert (tool.blocks[0].is_error, tool.blocks[0].content[0].text) == (True, "[Operation Cancelled]")


def test_broken_line_rejects_the_recording_but_a_cut_last_line_does_not(tmp_path):
    [bad] = _recording(tmp_path, [HEAD, ASK, '{"id": "b", "ty', {"id": "c", "type": "gemini", "content": "x"}])
    assert bad.error.code == "invalid_line" and bad.error.source.endswith("session-x.jsonl:3")
    [cut] = _recording(tmp_path, [HEAD, ASK, {"id": "c", "type": "gemini", "content": "x"}, '{"id": "d", "ty'])
    assert [m.role for m in cut.conversation.messages] == ["user", "assistant"]


def test_legacy_single_document(tmp_path):
    path = tmp_path / "session-old.json"
    path.write_text(json.dumps({**HEAD, "messages": [ASK, {"id": "c", "type": "gemini", "content": [{"text": "ok"}]}]}))
    [parsed] = iter_parsed([path])
    assert [(m.role, m.blocks[0].text) for m in parsed.conversation.messages] == [("user", "run it"), ("assistant", "ok")]
