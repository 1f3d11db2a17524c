"""OpenInference spans through `sftprep run`. The sample data/traces/openinference.json follows the
OpenInference semantic conventions (Arize-ai/openinference, spec/semantic_conventions.md: flattened
`llm.input_messages.N.message.*`, `message.contents.M.message_content.*`,
`message.tool_calls.K.tool_call.*`, `llm.tools.N.tool.json_schema`, `openinference.span.kind`) as
exported in OTLP JSON (opentelemetry-proto trace/v1), one document holding an agent's trace."""

from __future__ import annotations

import json

import pytest

from corpus import ROOT
from pipeline.ingest import iter_parsed
from pipeline.ingest.traces.openinference import unflatten
from source_run import blocks, paired, sftprep_run

SAMPLE = ROOT / "data" / "traces" / "openinference.json"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("oi"), SAMPLE)


def test_llm_spans_written_others_rejected(run):
    records = run.stats["records"]
    assert (records["read"], records["written"], records["rejected"]) == (4, 2, 2)
    assert sorted((r["source"].rsplit("spans", 1)[1], r["code"]) for r in run.rejects) == \
        [("[0]", "not_a_model_call"), ("[2]", "not_a_model_call")]
    assert {r["message"].split(" is ")[0] for r in run.rejects} == {"span 'support_agent'", "span 'lookup_order'"}


def test_first_call_span(run):
    conv = run.rows[0]["conversation"]
    assert conv["system"] == [{"type": "text", "text": "You are a support agent for an online shop."}]
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant"]
    assert blocks(conv["messages"][0]) == [("text", "Where is order A-1042?"),
                                           ("media", "image", "https://example.com/receipt.png")]
    assert blocks(conv["messages"][1]) == [("tool_call", "lookup_order", {"order_id": "A-1042"}, "call_o1")]
    assert conv["tools"][0]["name"] == "lookup_order"
    assert conv["tools"][0]["parameters"]["required"] == ["order_id"]
    meta = conv["meta"]
    assert (meta["provider"], meta["shape"], meta["model"]) == ("openinference", "openinference", "gpt-4o-mini-2024-07-18")
    assert meta["usage"] == {"input_tokens": 120, "output_tokens": 21}
    assert conv["extras"]["openinference"]["request"] == {"gen_ai.request.temperature": 0,
                                                         "gen_ai.request.tool_choice": "auto"}
    assert meta["lacks"] == ["source_reasoning_not_logged"]
    assert "source_reasoning_not_logged" in {i["code"] for i in json.loads(run.rows[0]["issues"])}


def test_second_span_answers_the_call(run):
    conv = run.rows[1]["conversation"]
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert blocks(conv["messages"][2]) == [("tool_result", "call_o1", ["shipped 2026-01-05, UPS 1Z999"], False)]
    assert conv["messages"][2]["blocks"][0]["name"] == "lookup_order"
    assert blocks(conv["messages"][3]) == [("text", "It shipped on 5 January with UPS (tracking 1Z999).")]
    assert paired(conv)


def test_unflatten_orders_numerically():
    attrs = {f"llm.input_messages.{i}.message.content": str(i) for i in (10, 2, 0, 1)}
    assert [m["message"]["content"] for m in unflatten(attrs, "llm.input_messages")] == ["0", "1", "2", "10"]


def _sdk_span(attributes: dict) -> dict:
    return {"name": "llm", "context": {"trace_id": "0x1", "span_id": "0x2"}, "attributes": attributes}


@pytest.mark.parametrize("attributes, code", [
    ({"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
      "llm.input_messages.0.message.content": "hi", "llm.tools.0.tool.json_schema": "{broken"}, "invalid_attribute_json"),
    ({"openinference.span.kind": "LLM", "input.value": "hi"}, "content_not_captured"),
    ({"openinference.span.kind": "RETRIEVER"}, "not_a_model_call"),
    ({"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "robot"}, "invalid_record"),
])
def test_bad_spans(tmp_path, attributes, code):
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(_sdk_span(attributes)) + "\n")
    [parsed] = iter_parsed([path])
    assert parsed.error.code == code and parsed.source == f"{path}:1"


def test_nested_values_read_like_flattened(tmp_path):
    """Exports that kept the attribute values nested (`llm.input_messages` as a list)."""
    nested = {"openinference.span.kind": "LLM",
              "llm.input_messages": [{"message.role": "user", "message.content": "hi"}],
              "llm.output_messages": [{"message": {"role": "assistant", "content": "hello"}}]}
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(_sdk_span(nested)) + "\n")
    [parsed] = iter_parsed([path])
    assert [m.role for m in parsed.conversation.messages] == ["user", "assistant"]
