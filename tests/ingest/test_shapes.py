"""Record shapes end to end: exchanges, recordings, streams inside exchanges, session logs, trajectory
wrappers, error bodies; and every file of the corpus read with each record accounted for."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from corpus import CORPUS, corpus_available, require_corpus
from pipeline import formats
from pipeline.conversation import Reasoning, Text, ToolCall, ToolResult
from pipeline.errors import SftprepError
from test_readers import comparable
from pipeline.ingest import expand, expand_paths, iter_parsed, iter_raw, parse_record

REQUEST = {"model": "claude-sonnet-4-5", "max_tokens": 256,
           "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
           "messages": [{"role": "user", "content": "Weather in Oslo?"}]}
RESPONSE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}],
            "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def test_exchange_of_bodies_appends_the_answer():
    conv = parse_record({"request": REQUEST, "response": RESPONSE}, "x:1")
    assert conv.meta.shape == "exchange" and conv.meta.provider == "anthropic"
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    assert isinstance(conv.messages[1].blocks[1], ToolCall)
    assert conv.meta.response_id == "msg_1" and conv.meta.stop_reason == "tool_use"


def test_exchange_in_http_envelopes_uses_the_endpoint():
    record = {"request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages", "body": REQUEST},
              "response": {"status": 200, "body": RESPONSE}}
    conv = parse_record(record, "x:1")
    assert len(conv.messages) == 2


def test_exchange_with_streamed_response_equals_the_plain_one():
    events = [
        ("message_start", {"type": "message_start", "message": {**RESPONSE, "content": [], "stop_reason": None,
                                                                  "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1, "content_block":
                                 {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta":
                                 {"type": "input_json_delta", "partial_json": "{\"city\": \"Os"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta":
                                 {"type": "input_json_delta", "partial_json": "lo\"}"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    sse = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    streamed = parse_record({"request": REQUEST, "response": {"status": 200, "body": sse}}, "x:1")
    plain = parse_record({"request": REQUEST, "response": RESPONSE}, "x:1")
    assert streamed.messages == plain.messages
    cut = sse[: sse.index("event: message_delta")]
    with pytest.raises(SftprepError) as err:
        parse_record({"request": REQUEST, "response": {"status": 200, "body": cut}}, "x:1")
    assert err.value.code == "truncated_stream" and err.value.path.startswith("$.response.body")


@pytest.mark.parametrize("response,code", [
    ({"status": 429, "body": {"error": {"message": "rate limited"}}}, "failed_exchange"),
    ({"status": 200, "body": None}, "failed_exchange"),
    ({"status": 200, "body": {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}}]}},
     "mixed_formats"),
])
def test_failed_and_mixed_exchanges_are_rejected_with_reasons(response, code):
    with pytest.raises(SftprepError) as err:
        parse_record({"request": REQUEST, "response": response}, "f.jsonl:3")
    assert err.value.code == code and err.value.source == "f.jsonl:3"


def test_non_generation_endpoint_is_named():
    record = {"request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages/count_tokens",
                          "body": REQUEST}, "response": {"status": 200, "body": {"input_tokens": 3}}}
    with pytest.raises(SftprepError, match="count_tokens is not a generation request"):
        parse_record(record, "x:1")


def test_recording_file_explodes_into_exchanges(tmp_path):
    path = tmp_path / "rec.json"
    path.write_text(json.dumps({"interactions": [{"request": REQUEST, "response": RESPONSE},
                                                 {"request": REQUEST, "response": {"status": 500, "body": None}}]}))
    got = list(iter_parsed([path]))
    assert [p.source.rsplit("#", 1)[1] for p in got] == ["interactions[0]", "interactions[1]"]
    assert got[0].conversation is not None and got[1].error.code == "failed_exchange"


def test_deferred_reading_then_expand_equals_eager_reading(tmp_path):
    """`sftprep run` reads records undecoded and lets workers decode and split them (`expand`): the
    records that come out are the eager reader's, recordings in a JSONL line included."""
    recording = {"interactions": [{"request": REQUEST, "response": RESPONSE}, {"request": REQUEST, "response": RESPONSE}]}
    (tmp_path / "rec.jsonl").write_text(json.dumps(recording) + "\n" + json.dumps(REQUEST) + "\nnot json\n")
    inputs = [str(tmp_path), str(Path(__file__).resolve().parents[2] / "data")]
    if corpus_available():
        inputs.append(str(CORPUS))
    paths = expand_paths(inputs)
    eager = list(iter_raw(paths))
    deferred = list(iter_raw(paths, defer=True))
    assert any(r.deferred for r in deferred)
    assert [comparable(r) for d in deferred for r in expand(d)] == [comparable(r) for r in eager]
    sources = [r.source.rsplit("/", 1)[1] for r in eager if "rec.jsonl" in r.source]
    assert sources == ["rec.jsonl:1#interactions[0]", "rec.jsonl:1#interactions[1]", "rec.jsonl:2", "rec.jsonl:3"]


def test_error_body_and_trajectory_wrapper():
    with pytest.raises(SftprepError) as err:
        parse_record({"error": {"message": "quota exceeded", "code": 429}}, "x:1")
    assert err.value.code == "error_response" and "quota exceeded" in err.value.message
    conv = parse_record({"task_id": 3, "reward": 1.0, "traj": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"}]}, "x:1")
    assert conv.meta.shape == "trajectory" and [m.role for m in conv.messages] == ["user", "assistant"]


def test_ambiguous_only_when_formats_disagree():
    conv = formats.parse([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    assert any("ambiguous" in note for note in conv.meta.notes)
    with pytest.raises(SftprepError) as err:
        formats.parse([{"role": "user", "content": "hi"}], strict=True)
    assert err.value.code == "ambiguous_shape" and "openai-chat" in err.value.message


def test_session_log_is_one_conversation(tmp_path):
    lines = [
        {"type": "summary", "summary": "Weather", "leafUuid": "u0"},
        {"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z",
         "message": {"role": "user", "content": "What's in README.md?"}},
        {"type": "assistant", "sessionId": "s1", "uuid": "u2", "timestamp": "2026-01-01T00:00:01Z",
         "message": {"id": "msg_a", "role": "assistant", "model": "claude-x", "content": [
             {"type": "tool_use", "id": "toolu_r", "name": "Read", "input": {"path": "README.md"}}]}},
        {"type": "user", "sessionId": "s1", "uuid": "u3", "timestamp": "2026-01-01T00:00:02Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_r",
                                                  "content": "# Hello"}]}},
        {"type": "assistant", "sessionId": "s1", "uuid": "u4", "timestamp": "2026-01-01T00:00:03Z",
         "message": {"id": "msg_b", "role": "assistant", "model": "claude-x",
                     "content": [{"type": "text", "text": "It says Hello."}]}},
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    got = list(iter_parsed([path]))
    assert len(got) == 1 and got[0].error is None
    conv = got[0].conversation
    assert conv.meta.shape == "session" and [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]
    result = conv.messages[2].blocks[0]
    assert isinstance(result, ToolResult) and result.call_id == conv.messages[1].blocks[0].id


# The corpus's dead records: echo-server mocks that answered with their own request line.
KNOWN_DEAD = {"test_openai__test_text_response.json:1#interactions[0]": "invalid_response",
              "test_openai__test_invalid_response.json:1#interactions[0]": "invalid_record",
              # a stream log whose first line is not JSON
              "parallel-tool-call-wrapper.1.chunks.txt:1": "invalid_stream"}


def _expected_rejection(source: str, code: str) -> bool:
    """Reasons a person accepts for a corpus record not becoming a conversation."""
    known = [c for name, c in KNOWN_DEAD.items() if source.endswith(name)]
    return code in {"failed_exchange", "not_a_model_call", "error_response", "stream_error"} or known == [code]


def test_every_corpus_file_is_read_and_every_record_accounted_for(corpus):
    counts: dict[str, Counter] = {}
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        paths = expand_paths([str(folder)])
        tally = counts.setdefault(folder.name, Counter())
        for parsed in iter_parsed(paths):
            if parsed.error is None:
                tally["converted"] += 1
                conv = parsed.conversation
                # Same-format round trip of what ingest built stays exact.
                body, ledger = formats.serialize(conv, conv.meta.provider, shape="request")
                again, _ = formats.serialize(formats.parse(body, conv.meta.provider, "request"),
                                             conv.meta.provider, shape="request")
                assert again == body, parsed.source
            else:
                tally[f"rejected:{parsed.error.code}"] += 1
                assert _expected_rejection(parsed.source, parsed.error.code), (parsed.source, parsed.error)
    converted = sum(c["converted"] for c in counts.values())
    assert converted >= 600, counts
    # Every folder yields conversations; the known dead records are the only rejections.
    assert all(c["converted"] > 0 for c in counts.values()), counts
    assert counts["tau_bench_gpt4o_airline"] == Counter(converted=120)
    assert counts["claude_code_spotter_sessions"] == Counter(converted=6)


def test_sharegpt_with_function_calls():
    record = {"system": "You convert units.", "tools": json.dumps([{"name": "convert", "description": "d",
                                                                     "parameters": {"type": "object"}}]),
              "conversations": [
                  {"from": "human", "value": "5 miles in km?"},
                  {"from": "gpt", "value": "Let me convert."},
                  {"from": "function_call", "value": json.dumps({"name": "convert", "arguments": {"v": 5}})},
                  {"from": "observation", "value": "8.05"},
                  {"from": "gpt", "value": "5 miles is 8.05 km."}]}
    conv = parse_record(record, "x:1")
    assert conv.meta.shape == "sharegpt" and conv.system[0].text == "You convert units."
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "assistant"]
    text, call = conv.messages[1].blocks
    assert isinstance(text, Text) and isinstance(call, ToolCall) and call.arguments == {"v": 5}
    result = conv.messages[2].blocks[0]
    assert result.call_id == call.id and result.matched_by == "name_order"
    assert [t.name for t in conv.tools] == ["convert"]
    with pytest.raises(SftprepError) as err:
        parse_record({"conversations": [{"from": "narrator", "value": "x"}]}, "x:1")
    assert err.value.path == "$.conversations[0].from"


def test_stream_log_files_are_inputs(tmp_path):
    """A logged stream file is read like any input: each exchange in it is a response record; a .txt
    that holds no stream is not picked up from a directory."""
    sample = Path(__file__).resolve().parents[2] / "data" / "streams" / "anthropic_thinking_call.sse"
    (tmp_path / "notes.txt").write_text("just some notes\n")
    (tmp_path / "two.sse").write_text(sample.read_text() * 2)
    (tmp_path / "cut.sse").write_text(sample.read_text().rsplit("event: message_delta", 1)[0])
    paths = expand_paths([str(tmp_path)])
    assert [p.name for p in paths] == ["cut.sse", "two.sse"]
    got = list(iter_parsed(paths))
    assert got[0].error.code == "truncated_stream" and got[0].source.endswith("cut.sse:1")
    assert [p.source.rsplit("#", 1)[1] for p in got[1:]] == ["responses[0]", "responses[1]"]
    conv = got[1].conversation
    reasoning, call = conv.messages[0].blocks
    assert isinstance(reasoning, Reasoning) and reasoning.signature == "U2FtcGxlU3RyZWFtU2lnbmF0dXJlRm9yU2Z0cHJlcA=="
    assert isinstance(call, ToolCall) and call.arguments == {"departure": "14:05", "station": "Utrecht Centraal"}
