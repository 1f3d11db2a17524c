"""Langfuse and LangSmith exports through `sftprep run`. data/traces/langfuse_trace.json follows the
Langfuse public API (langfuse.com/docs/api, OpenAPI `TraceWithFullDetails` with `observations`:
`Observation {id, traceId, type, name, startTime, model, modelParameters, input, output, usageDetails,
level, statusMessage, parentObservationId}`); data/traces/langsmith_runs.jsonl follows the LangSmith run
schema (docs.smith.langchain.com, `Run {id, name, run_type, inputs, outputs, error, extra, trace_id,
parent_run_id, child_runs}`) with LangChain's message serialization (`{"lc": 1, "type": "constructor",
"id": [..., "AIMessage"], "kwargs"}`, langchain_core.load.dump)."""

from __future__ import annotations

import json

import pytest

from corpus import ROOT
from pipeline.ingest import iter_parsed
from source_run import blocks, paired, sftprep_run

LANGFUSE = ROOT / "data" / "traces" / "langfuse_trace.json"
LANGSMITH = ROOT / "data" / "traces" / "langsmith_runs.jsonl"


@pytest.fixture(scope="module")
def langfuse(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("lf"), LANGFUSE)


@pytest.fixture(scope="module")
def langsmith(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("ls"), LANGSMITH)


def test_langfuse_generations_written_the_rest_rejected(langfuse):
    records = langfuse.stats["records"]
    assert (records["read"], records["written"], records["rejected"]) == (5, 2, 3)
    assert sorted((r["source"].rsplit("#", 1)[1], r["code"], r["path"]) for r in langfuse.rejects) == [
        ("observations[0]", "not_a_model_call", "$.type"), ("observations[2]", "not_a_model_call", "$.type"),
        ("observations[4]", "failed_generation", "$.level")]
    assert "429 - Rate limit reached" in next(r for r in langfuse.rejects if r["code"] == "failed_generation")["message"]


def test_langfuse_conversations(langfuse):
    first, second = (r["conversation"] for r in langfuse.rows)
    assert first["system"] == [{"type": "text", "text": "You answer questions about the Acme API using the docs."}]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert blocks(first["messages"][1]) == [("tool_call", "search_docs", {"query": "rotate API key"}, "call_d1")]
    assert [t["name"] for t in first["tools"]] == ["search_docs"]
    assert (first["meta"]["shape"], first["meta"]["provider"], first["meta"]["model"]) == \
        ("langfuse", "openai-chat", "gpt-4o-2024-08-06")
    assert first["meta"]["usage"] == {"input_tokens": 95, "output_tokens": 18}
    assert first["extras"]["langfuse"]["id"] == "obs-1"
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert blocks(second["messages"][2]) == [("tool_result", "call_d1",
                                              ["Keys > Rotate: creates a new key; the old one works for 24 hours."], False)]
    assert paired(second)


def test_langsmith_runs(langsmith):
    records = langsmith.stats["records"]
    # Line 1: a chain run with an llm, a tool and an llm child; line 2 an llm run; line 3 a failed one.
    assert (records["read"], records["written"], records["rejected"]) == (6, 3, 3)
    assert sorted((r["source"].rsplit(":", 1)[1], r["code"]) for r in langsmith.rejects) == [
        ("1", "not_a_model_call"), ("1#child_runs[1]", "not_a_model_call"), ("3", "failed_generation")]
    by_source = {r["conversation"]["meta"]["source"].rsplit(":", 1)[1]: r["conversation"] for r in langsmith.rows}
    answered = by_source["1#child_runs[2]"]
    assert answered["system"] == [{"type": "text", "text": "You tell the time."}]
    assert [m["role"] for m in answered["messages"]] == ["user", "assistant", "tool", "assistant"]
    thinking, call = answered["messages"][1]["blocks"]
    assert (thinking["type"], thinking["text"], thinking["origin"]) == \
        ("reasoning", "I need the current time in Asia/Tokyo.", "anthropic")
    assert thinking["signature"].startswith("EqQBCkYIBxgCKkBn")
    assert (call["name"], call["arguments"], call["provider_id"]) == ("get_time", {"tz": "Asia/Tokyo"}, "toolu_t1")
    assert blocks(answered["messages"][2]) == [("tool_result", "toolu_t1", ["2026-01-10 18:42 JST"], False)]
    assert [t["name"] for t in answered["tools"]] == ["get_time"]
    assert answered["tools"][0]["parameters"]["required"] == ["tz"]
    assert paired(answered)
    plain = by_source["2"]
    assert blocks(plain["messages"][1]) == [("tool_call", "convert_temp", {"celsius": 21.5}, "call_t9")]
    assert blocks(plain["messages"][3]) == [("text", "21.5 °C is 70.7 °F.")]
    assert plain["meta"]["model"] == "gpt-4o-mini"


def _one(tmp_path, value):
    path = tmp_path / "export.jsonl"
    path.write_text(json.dumps(value) + "\n")
    return list(iter_parsed([path]))


def test_langfuse_observation_lines_with_anthropic_content(tmp_path):
    obs = {"id": "o", "traceId": "t", "type": "GENERATION", "startTime": "2026-01-01T00:00:00Z", "model": "claude-sonnet-4-5",
           "input": {"messages": [{"role": "user", "content": "Hi"}], "system": "Be terse.", "max_tokens": 64},
           "output": [{"type": "text", "text": "Hello."}]}
    [parsed] = _one(tmp_path, obs)
    conv = parsed.conversation
    assert (conv.meta.provider, conv.system[0].text, conv.messages[1].blocks[0].text) == ("anthropic", "Be terse.", "Hello.")


@pytest.mark.parametrize("value, code, path", [
    ({"id": "o", "traceId": "t", "type": "GENERATION", "input": None, "output": None}, "content_not_captured", "$.input"),
    ({"id": "o", "traceId": "t", "type": "GENERATION", "input": 7, "output": "x"}, "invalid_record", "$.input"),
    ({"id": "o", "traceId": "t", "type": "GENERATION", "input": [{"role": "user", "content": "a"}], "output": 5},
     "invalid_record", "$.output"),
    ({"id": "o", "traceId": "t", "type": "GENERATION", "input": [{"role": "user", "content": "a"}],
      "output": {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": 3}}]}},
     "invalid_record", "$.output.tool_calls[0]"),
    ({"run_type": "llm", "inputs": {"prompts": ["hi"]}, "outputs": {}}, "content_not_captured", "$.inputs"),
    ({"run_type": "llm", "inputs": {"messages": [[{"type": "robot", "content": "x"}]]}, "outputs": {}},
     "invalid_record", "$.inputs.messages[0][0]"),
])
def test_bad_records_name_the_place(tmp_path, value, code, path):
    [parsed] = _one(tmp_path, value)
    assert parsed.conversation is None
    assert parsed.error.path.startswith(path) and parsed.error.code == code
