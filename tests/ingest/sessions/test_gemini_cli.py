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


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_an_image_a_tool_returns_inside_its_function_response_is_kept(tmp_path):
    # Gemini 3 takes a tool's media inside functionResponse.parts; the CLI records the result as sent.
    read = {"id": "b", "type": "gemini", "content": "", "model": "gemini-3-pro-preview", "toolCalls": [
        {"id": "r1", "name": "read_file", "args": {"absolute_path": "/w/chart.png"}, "status": "success",
         "result": [{"functionResponse": {"id": "r1", "name": "read_file", "response": {"output": "Binary content"},
                                          "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG}}]}}]}]}
    [parsed] = _recording(tmp_path, [HEAD, ASK, read])
    (result,) = parsed.conversation.messages[2].blocks
    assert [type(b).__name__ for b in result.content] == ["Text", "Media"]
    assert (result.content[1].media_type, result.content[1].data) == ("image/png", PNG)


def test_a_structured_response_beside_other_parts_is_kept(tmp_path):
    call = {"id": "b", "type": "gemini", "content": "", "toolCalls": [
        {"id": "m1", "name": "mcp_lookup", "args": {}, "status": "success",
         "result": [{"functionResponse": {"id": "m1", "name": "mcp_lookup", "response": {"rows": 2, "ok": True}}},
                    {"text": "two rows"}]}]}
    [parsed] = _recording(tmp_path, [HEAD, ASK, call])
    (result,) = parsed.conversation.messages[2].blocks
    assert result.output == {"rows": 2, "ok": True} and result.content[0].text == "two rows"


def test_messages_synced_from_the_model_history_keep_calls_signatures_and_results_once(tmp_path):
    # Newer CLIs rewrite the message list from the history they send ($set.messages): a gemini record's
    # content then holds the model's own parts (thoughts, signed calls) and tool answers become user records.
    turn = {"id": "b", "type": "gemini", "model": "gemini-3-pro-preview", "content": [
        {"text": "Checking the folder first.", "thought": True},
        {"text": "Listing it.", "thoughtSignature": "U2lnVGV4dA=="},
        {"functionCall": {"id": "ls-1", "name": "list_directory", "args": {"path": "."}}, "thoughtSignature": "U2lnQ2FsbA=="}],
        "thoughts": [{"subject": "Checking", "description": "the folder first"}],
        "toolCalls": [{"id": "ls-1", "name": "list_directory", "args": {"path": "."}, "status": "success",
                       "result": [{"functionResponse": {"id": "ls-1", "name": "list_directory",
                                                        "response": {"output": "a.txt"}}}]}]}
    answers = {"id": "c", "type": "user", "content": [
        {"functionResponse": {"id": "ls-1", "name": "list_directory", "response": {"output": "a.txt"}}}]}
    late = {"id": "d", "type": "gemini", "content": [{"functionCall": {"id": "rd-1", "name": "read_file",
                                                                       "args": {"absolute_path": "a.txt"}}}]}
    late_answer = {"id": "e", "type": "user", "content": [
        {"functionResponse": {"id": "rd-1", "name": "read_file", "response": {"output": "hello"}}},
        {"text": "Also, be brief."}]}
    [parsed] = _recording(tmp_path, [HEAD, {"$set": {"messages": [ASK, turn, answers, late, late_answer]}}])
    conv = parsed.conversation
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "assistant", "tool", "user"]
    reasoning, text, call = conv.messages[1].blocks
    assert (reasoning.text, reasoning.signature, reasoning.origin) == ("Checking the folder first.", None, "gemini")
    assert (text.text, text.signature) == ("Listing it.", "U2lnVGV4dA==")
    assert (call.provider_id, call.signature) == ("ls-1", "U2lnQ2FsbA==")
    assert [(r.call_id, r.content[0].text) for r in conv.messages[2].blocks] == [(call.id, "a.txt")]
    (read,) = conv.messages[3].blocks
    assert [(r.call_id, r.content[0].text) for r in conv.messages[4].blocks] == [(read.id, "hello")]
    assert conv.messages[5].blocks[0].text == "Also, be brief."
    assert "source_reasoning_summary_only" not in conv.meta.lacks


def test_a_later_metadata_line_updates_the_metadata(tmp_path):
    [parsed] = _recording(tmp_path, [HEAD, ASK, {"sessionId": "s", "projectHash": "h", "summary": "Ran it"}])
    extras = parsed.conversation.extras["gemini-cli"]
    assert extras["summary"] == "Ran it" and extras["skipped"] == {}
