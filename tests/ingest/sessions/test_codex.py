"""Codex CLI rollouts through `sftprep run`. The sample data/sessions/codex_rollout.jsonl follows the
rollout format codex-rs writes (openai/codex, codex-rs/protocol `RolloutLine {timestamp, type, payload}`
with `RolloutItem` session_meta / response_item / compacted / turn_context / event_msg; response items are
OpenAI Responses API items)."""

from __future__ import annotations

import json

import pytest

from corpus import ROOT
from pipeline.conversation import Opaque, ToolResult
from pipeline.ingest import iter_parsed
from pipeline.validate import validate
from source_run import blocks, paired, sftprep_run

SAMPLE = ROOT / "data" / "sessions" / "codex_rollout.jsonl"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("codex"), SAMPLE)


def test_one_conversation_per_compaction_window(run):
    records = run.stats["records"]
    assert (records["read"], records["written"], records["rejected"]) == (2, 2, 0)
    assert [r["conversation"]["meta"]["source"].rsplit(":", 1)[1] for r in run.rows] == ["1", "13"]
    assert {r["shape"] for r in run.rows} == {"codex"}


def test_first_window(run):
    conv = run.rows[0]["conversation"]
    assert [m["role"] for m in conv["messages"]] == ["user", "user", "assistant", "tool", "assistant", "tool",
                                                      "assistant"]
    reasoning, shell = conv["messages"][2]["blocks"]
    assert (reasoning["summary"], reasoning["encrypted"], reasoning["item_id"]) == \
        (["**Running the tests first**"], "gAAAAABpX2Qx0aW5nLWVuY3J5cHRlZC1yZWFzb25pbmctc3RhdGUtZm9yLWNvZGV4", "rs_c1")
    assert blocks(conv["messages"][2])[1] == ("tool_call", "shell", {"command": ["bash", "-lc", "pytest -q tests/test_price.py"],
                                                                   "workdir": "/home/dev/shop"}, "call_c1")
    result = conv["messages"][3]["blocks"][0]
    assert result["provider_id"] == "call_c1" and result["call_id"] == shell["id"]
    patch = conv["messages"][4]["blocks"][0]
    assert (patch["name"], patch["provider_id"]) == ("apply_patch", "call_c2")
    assert patch["arguments"]["input"].startswith("*** Begin Patch\n*** Update File: shop/price.py")
    assert blocks(conv["messages"][6]) == [("text", "Fixed: `price()` rounded to one decimal; it now rounds to cents "
                                                    "and the test passes.")]
    assert paired(conv)
    meta = conv["meta"]
    assert (meta["provider"], meta["model"], meta["created"]) == ("openai-responses", "gpt-5-codex",
                                                                  "2026-01-07T09:00:00.000Z")
    assert meta["lacks"] == ["source_no_tool_list"]
    extras = conv["extras"]["codex"]
    assert extras["skipped"] == {"event_msg:token_count": 1, "event_msg:user_message": 1}
    assert extras["session"]["cli_version"] == "0.63.0"
    assert {"source_no_tool_list", "no_tool_list"} <= {i["code"] for i in json.loads(run.rows[0]["issues"])}


def test_window_after_compaction_opens_with_the_summary(run):
    conv = run.rows[1]["conversation"]
    assert blocks(conv["messages"][0]) == [("text", "The user asked to fix a failing price test; price() now rounds "
                                                    "to 2 decimals and tests pass.")]
    assert [m["role"] for m in conv["messages"]] == ["user", "user", "assistant", "tool", "assistant"]
    assert any("unknown type 'ghost_snapshot'" in n and ":16:" in n for n in conv["meta"]["notes"])
    assert conv["extras"]["codex"]["skipped"] == {"ghost_snapshot": 1}
    assert paired(conv)


def _rollout(tmp_path, lines: list) -> list:
    path = tmp_path / "rollout-x.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return list(iter_parsed([path]))


META = {"timestamp": "t", "type": "session_meta", "payload": {"id": "s"}}
USER = {"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "user",
                                                               "content": [{"type": "input_text", "text": "hi"}]}}
ANSWER = {"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                                 "content": [{"type": "output_text", "text": "yo"}]}}


def test_broken_line_rejects_its_window_only(tmp_path):
    compacted = {"timestamp": "t", "type": "compacted", "payload": {"message": "sum"}}
    parsed = _rollout(tmp_path, [META, USER, '{"type": "response_item", "payl', ANSWER, compacted, USER, ANSWER])
    assert [p.error.code if p.error else None for p in parsed] == ["invalid_line", None]
    assert parsed[0].error.source.endswith("rollout-x.jsonl:3")


def test_freeform_tool_calls_are_custom_calls(tmp_path):
    """apply_patch as gpt-5 models call it: a custom (free-text) tool call and its output."""
    call = {"type": "response_item", "payload": {"type": "custom_tool_call", "status": "completed", "call_id": "c",
                                                 "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"}}
    output = {"type": "response_item", "payload": {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"}}
    [parsed] = _rollout(tmp_path, [META, USER, call, output, ANSWER])
    patch = parsed.conversation.messages[1].blocks[0]
    assert (patch.kind, patch.raw_arguments or patch.arguments) == ("custom", "*** Begin Patch\n*** End Patch\n")
    assert parsed.conversation.messages[2].blocks[0].call_id == patch.id


def test_cut_off_last_line_is_a_note(tmp_path):
    [parsed] = _rollout(tmp_path, [META, USER, ANSWER, '{"timestamp": "t", "type": "respo'])
    assert [m.role for m in parsed.conversation.messages] == ["user", "assistant"]
    assert any("last line is cut off" in n for n in parsed.conversation.meta.notes)


def test_replacement_history_and_shape_override(tmp_path):
    compacted = {"timestamp": "t", "type": "compacted", "payload": {"message": "s", "replacement_history": [USER["payload"]]}}
    parsed = _rollout(tmp_path, [USER, ANSWER, compacted, ANSWER])
    assert [[m.role for m in p.conversation.messages] for p in parsed] == [["user", "assistant"], ["user", "assistant"]]
    # A rollout whose first line is not yet typed like one is read with --shape codex.
    path = tmp_path / "rollout-x.jsonl"
    path.write_text("{}\n" + path.read_text())
    assert list(iter_parsed([path]))[0].conversation is None
    assert [p.conversation is not None for p in iter_parsed([path], shape="codex")] == [True, True]


def _item(payload: dict) -> dict:
    return {"timestamp": "t", "type": "response_item", "payload": payload}


def _call(call_id: str) -> dict:
    return _item({"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "pytest -q"}',
                  "call_id": call_id})


def _output(call_id: str, output) -> dict:
    return _item({"type": "function_call_output", "call_id": call_id, "output": output})


def test_output_objects_of_older_versions_are_results(tmp_path):
    """codex-rs wrote a function_call_output's `output` as {"content", "success"} (content_items beside it
    when a tool returned images): its text (or items), and `success: false` marks the result an error."""
    items = [{"type": "input_text", "text": "shot"}, {"type": "input_image", "image_url": "data:image/png;base64,AA=="}]
    parsed = _rollout(tmp_path, [META, USER, _call("a"), _output("a", {"content": "1 failed", "success": False}),
                                 _call("b"), _output("b", {"content": "3 passed", "success": True}),
                                 _call("c"), _output("c", {"content": "[...]", "content_items": items}), ANSWER])
    [conv] = [p.conversation for p in parsed]
    results = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolResult)]
    assert [(r.provider_id, [getattr(c, "text", None) or c.kind for c in r.content], r.is_error) for r in results] == [
        ("a", ["1 failed"], True), ("b", ["3 passed"], False), ("c", ["shot", "image"], False)]
    assert all(r.call_id is not None for r in results)


def test_an_item_the_codec_refuses_is_named_by_its_line(tmp_path):
    broken = _item({"type": "function_call", "arguments": "{}", "call_id": "x"})  # no name
    compacted = {"timestamp": "t", "type": "compacted", "payload": {"message": "", "replacement_history": [
        USER["payload"], {"type": "function_call_output", "call_id": "y", "output": 7}]}}
    parsed = _rollout(tmp_path, [META, USER, broken, ANSWER, compacted, ANSWER])
    first, second = (p.error for p in parsed)
    assert (first.source.rsplit(":", 1)[1], first.path, first.code) == ("3", "$.payload", "invalid_record")
    assert (second.source.rsplit(":", 1)[1], second.path) == ("5", "$.payload.replacement_history[1].output")


def test_ghost_snapshots_are_harness_state_not_turns(tmp_path):
    ghost = {"type": "ghost_snapshot", "ghost_commit": {"id": "c0ffee", "parent": None}}
    compacted = {"timestamp": "t", "type": "compacted", "payload": {"message": "", "replacement_history": [
        USER["payload"], ghost]}}
    parsed = _rollout(tmp_path, [META, USER, _item(ghost), ANSWER, compacted, ANSWER])
    assert [[m.role for m in p.conversation.messages] for p in parsed] == [["user", "assistant"]] * 2
    assert parsed[0].conversation.extras["codex"]["skipped"] == {"response_item:ghost_snapshot": 1}
    assert not any(isinstance(b, Opaque) for p in parsed for m in p.conversation.messages for b in m.blocks)


def test_reasoning_without_encrypted_content_is_text_only_not_an_error(tmp_path):
    """Rollouts never keep reasoning item ids; with a Chat Completions server (codex --oss) there is no
    encrypted_content either: the reasoning is text only, which the source says once, as a warning."""
    reasoning = _item({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Run it."}],
                       "encrypted_content": None})
    [parsed] = _rollout(tmp_path, [META, USER, reasoning, _call("a"), _output("a", "ok"), ANSWER])
    conv = parsed.conversation
    assert conv.messages[1].blocks[0].text == "Run it."
    assert "source_reasoning_unsigned" in conv.meta.lacks
    issues = {i.code: i.severity for i in validate(conv)}
    assert issues["source_reasoning_unsigned"] == "warning" and "reasoning_without_state" not in issues


def test_a_rejected_window_with_a_failed_output_is_written_to_the_rejects(tmp_path):
    """The window travels with its rejection into rejects.jsonl: everything it holds must be JSON."""
    broken = _item({"type": "function_call", "call_id": "p", "name": "exec_command", "arguments": '{"cmd": "ls'})
    lines = [META, USER, _call("a"), _output("a", {"content": "1 failed", "success": False}), broken,
             _output("p", "ok"), ANSWER]
    path = tmp_path / "rollout-x.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = sftprep_run(tmp_path / "run", path)  # arguments cut off mid-string: the window is rejected
    assert [(r["code"], r["source"].rsplit(":", 1)[1]) for r in run.rejects] == [("arguments_not_object", "1")]


def test_local_shell_calls_answered_by_function_call_outputs_are_no_orphans(tmp_path):
    """codex-mini-latest calls the local_shell tool; Codex answers with a function_call_output."""
    shell = _item({"type": "local_shell_call", "call_id": "ls1", "status": "completed",
                   "action": {"type": "exec", "command": ["ls"], "timeout_ms": None, "working_directory": None,
                              "env": None, "user": None}})
    [parsed] = _rollout(tmp_path, [META, USER, shell, _output("ls1", "a.py\n"), ANSWER])
    issues = {i.code for i in validate(parsed.conversation)}
    assert parsed.error is None and "orphan_result" not in issues
    assert [m.role for m in parsed.conversation.messages] == ["user", "assistant", "tool", "assistant"]
