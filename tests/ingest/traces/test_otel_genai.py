"""OTel GenAI trace exports through `sftprep run`. The sample data/traces/otel_genai.jsonl follows the
OpenTelemetry semantic conventions for generative AI (open-telemetry/semantic-conventions,
docs/gen-ai/gen-ai-spans.md and the JSON schemas gen-ai-input-messages.json, gen-ai-output-messages.json,
gen-ai-system-instructions.json, gen-ai-tool-definitions.json; the older per-message events of
docs/gen-ai/gen-ai-events.md up to v1.36), encoded as the collector's file exporter writes OTLP JSON
(opentelemetry-proto trace/v1 ExportTraceServiceRequest, one per line)."""

from __future__ import annotations

import json

import pytest

from corpus import ROOT
from pipeline.ingest import iter_parsed
from source_run import blocks, paired, sftprep_run

SAMPLE = ROOT / "data" / "traces" / "otel_genai.jsonl"
LOGS = ROOT / "data" / "traces" / "otel_genai_logs.jsonl"  # the older events as OTLP log records
SPANS = "#resourceSpans[0].scopeSpans[0].spans"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("otel"), SAMPLE)


def test_every_span_is_a_record(run):
    records = run.stats["records"]
    assert (records["read"], records["written"], records["rejected"]) == (5, 3, 2)
    rejected = {r["source"].rsplit(":", 1)[1]: (r["code"], r["path"]) for r in run.rejects}
    assert rejected == {
        f"1{SPANS}[1]": ("not_a_model_call", "$.resourceSpans[0].scopeSpans[0].spans[1].attributes['gen_ai.operation.name']"),
        f"2{SPANS}[1]": ("invalid_attribute_json",
                         "$.resourceSpans[0].scopeSpans[0].spans[1].attributes['gen_ai.input.messages']"),
    }
    # The rejected span itself is in the rejects file, for a look at what came in.
    tool_span = next(r for r in run.rejects if r["code"] == "not_a_model_call")["record"]
    assert tool_span["span"]["name"] == "execute_tool get_weather"
    assert [r["conversation"]["meta"]["source"].rsplit(":", 1)[1] for r in run.rows] == \
        [f"1{SPANS}[0]", f"1{SPANS}[2]", f"2{SPANS}[0]"]


def test_attribute_form_with_reasoning_blob_and_string_arguments(run):
    conv = run.rows[0]["conversation"]
    assert conv["meta"]["source"].endswith(f"otel_genai.jsonl:1{SPANS}[0]")
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant"]
    assert conv["system"] == [{"type": "text", "text": "You are a travel assistant. Use tools for live data."}]
    assert blocks(conv["messages"][0]) == [("text", "Is it raining in Lisbon? Here is my itinerary."),
                                           ("media", "image", "iVBORw0KGgo=")]
    assert blocks(conv["messages"][1]) == [
        ("reasoning", "The user wants current weather; I should call the tool.", ()),
        ("tool_call", "get_weather", {"city": "Lisbon"}, "call_w1")]
    assert conv["messages"][1]["blocks"][1]["raw_arguments"] == '{"city": "Lisbon"}'
    assert [t["name"] for t in conv["tools"]] == ["get_weather"]
    meta = conv["meta"]
    assert (meta["provider"], meta["shape"], meta["model"], meta["response_id"], meta["stop_reason"]) == \
        ("otel-genai", "otel-genai", "gpt-4.1-2025-04-14", "chatcmpl-otel-1", "tool_calls")
    assert meta["usage"] == {"input_tokens": 91, "output_tokens": 24}
    assert meta["created"] == "2026-01-05T10:00:00.000Z"
    assert conv["extras"]["otel-genai"]["span_id"] == "eee19b7ec3c1b174"
    assert conv["extras"]["otel-genai"]["service"] == "travel-agent"
    assert conv["extras"]["otel-genai"]["request"] == {"gen_ai.request.temperature": 0.2}
    # Reasoning without replay state: named in meta, in the issues and in the ledger.
    assert meta["lacks"] == ["source_reasoning_unsigned"]
    assert "source_reasoning_unsigned" in {i["code"] for i in json.loads(run.rows[0]["issues"])}
    ledger = json.loads(run.rows[0]["ledger"])
    assert {"kind": "dropped", "path": "$.meta.lacks", "target": "otel-genai"}.items() <= \
        next(e for e in ledger if e.get("target") == "otel-genai").items()


def test_history_with_object_arguments_pairs_results_by_id(run):
    conv = run.rows[1]["conversation"]
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert blocks(conv["messages"][1]) == [("tool_call", "get_weather", {"city": "Lisbon"}, "call_w1")]
    assert blocks(conv["messages"][2]) == [("tool_result", "call_w1", ["light rain, 14°C"], False)]
    assert paired(conv)
    assert conv["messages"][2]["blocks"][0]["call_id"] == conv["messages"][1]["blocks"][0]["id"]
    assert "lacks" not in conv["meta"]


def test_older_event_form(run):
    conv = run.rows[2]["conversation"]
    assert conv["system"] == [{"type": "text", "text": "You convert currencies."}]
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert blocks(conv["messages"][1]) == [("tool_call", "convert", {"amount": 120, "from": "EUR", "to": "JPY"},
                                            "toolu_c1")]
    assert blocks(conv["messages"][2]) == [("tool_result", "toolu_c1", ["19,874 JPY"], False)]
    assert blocks(conv["messages"][3]) == [("text", "120 EUR is about 19,874 JPY.")]
    assert paired(conv)
    assert conv["meta"]["model"] == "claude-sonnet-4-5"


def test_older_events_as_log_records(tmp_path):
    """OTLP JSON logs (opentelemetry-proto logs/v1 LogsData): one conversation per span's GenAI events."""
    run = sftprep_run(tmp_path, LOGS)
    records = run.stats["records"]
    assert (records["read"], records["written"], records["rejected"]) == (3, 2, 1)
    [other] = run.rejects
    assert (other["code"], other["path"]) == ("not_a_model_call", "$.resourceLogs[0].scopeLogs[0].logRecords[3]")
    first, second = (r["conversation"] for r in run.rows)
    assert first["system"] == [{"type": "text", "text": "You quote prices from the catalogue."}]
    assert blocks(first["messages"][1]) == [("tool_call", "lookup_price", {"sku": "B-12"}, "call_p1")]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert blocks(second["messages"][2]) == [("tool_result", "call_p1", ["B-12: 18.50 EUR"], False)]
    assert blocks(second["messages"][3]) == [("text", "B-12 costs 18.50 EUR.")]
    assert paired(second)
    assert (second["extras"]["otel-genai"]["span_id"], second["extras"]["otel-genai"]["service"]) == \
        ("00f067aa0ba902b8", "price-bot")
    assert first["meta"]["created"] == "2026-01-09T12:00:00.000Z"


def test_log_event_with_broken_json_names_its_log_record(tmp_path):
    body = {"kvlistValue": {"values": [{"key": "message", "value": {"stringValue": "{cut"}}]}}
    log = {"eventName": "gen_ai.choice", "traceId": "a", "spanId": "b", "body": body}
    export = {"resourceLogs": [{"scopeLogs": [{"logRecords": [log]}]}]}
    [parsed] = _parse(tmp_path, export)
    assert (parsed.error.code, parsed.error.path) == ("invalid_attribute_json",
                                                      "$.resourceLogs[0].scopeLogs[0].logRecords[0].body.message")


def _export(attributes: list[dict], events: list | None = None) -> dict:
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat m", "attributes": attributes}
    if events is not None:
        span["events"] = events
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": [span]}]}]}


def _s(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def _parse(tmp_path, value):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(value))
    return list(iter_parsed([path]))


def test_parts_file_uri_server_tools_and_unknown_kept(tmp_path):
    output = [{"role": "assistant", "parts": [
        {"type": "server_tool_call", "id": "s1", "name": "code_interpreter", "server_tool_call": {"type": "code_interpreter"}},
        {"type": "server_tool_call_response", "id": "s1", "server_tool_call_response": {"type": "code_interpreter"}},
        {"type": "text", "content": "done"}]}]
    inputs = [{"role": "user", "parts": [{"type": "uri", "modality": "video", "mime_type": "video/mp4", "uri": "gs://b/v.mp4"},
                                         {"type": "file", "file_id": "file_123"},
                                         {"type": "citation", "source": "x"}]}]
    [parsed] = _parse(tmp_path, _export([_s("gen_ai.operation.name", "chat"), _s("gen_ai.input.messages", json.dumps(inputs)),
                                         _s("gen_ai.output.messages", json.dumps(output))]))
    user, answer = parsed.conversation.messages
    assert [(b.kind, b.url, b.file_id) for b in user.blocks[:2]] == [("video", "gs://b/v.mp4", None), ("file", None, "file_123")]
    assert (user.blocks[2].item_type, user.blocks[2].payload) == ("citation", inputs[0]["parts"][2])
    assert [(b.item_type, b.role_hint) for b in answer.blocks[:2]] == [("server_tool_call", "call"),
                                                                       ("server_tool_call_response", "result")]


@pytest.mark.parametrize("attributes, code", [
    ([_s("gen_ai.operation.name", "embeddings")], "not_a_model_call"),
    ([_s("gen_ai.operation.name", "chat")], "content_not_captured"),
    ([_s("http.method", "POST")], "not_a_model_call"),
    ([_s("gen_ai.operation.name", "chat"), _s("gen_ai.input.messages", '[{"role": "user"}]')], "invalid_record"),
    ([_s("gen_ai.operation.name", "chat"), {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "x"}}],
     "invalid_attribute"),
])
def test_bad_spans_are_rejected_with_a_reason(tmp_path, attributes, code):
    [parsed] = _parse(tmp_path, _export(attributes))
    assert parsed.conversation is None and parsed.error.code == code
    assert parsed.error.path.startswith("$.resourceSpans[0].scopeSpans[0].spans[0]")


def test_error_status_is_a_failed_call(tmp_path):
    export = _export([_s("gen_ai.operation.name", "chat"),
                      _s("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]))])
    export["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["status"] = {"code": 2, "message": "429 Too Many Requests"}
    [parsed] = _parse(tmp_path, export)
    assert (parsed.error.code, parsed.error.path) == ("failed_generation", "$.resourceSpans[0].scopeSpans[0].spans[0].status")
    assert "429 Too Many Requests" in parsed.error.message


def test_sdk_span_json_and_shape_override(tmp_path):
    """The SDKs' `ReadableSpan.to_json()` form: attributes as a plain dict."""
    span = {"name": "chat m", "context": {"trace_id": "0x" + "ab" * 16, "span_id": "0x" + "cd" * 8},
            "attributes": {"gen_ai.operation.name": "chat",
                           "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}],
                           "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]}}
    [parsed] = _parse(tmp_path, span)
    assert [m.role for m in parsed.conversation.messages] == ["user", "assistant"]
    assert parsed.conversation.extras["otel-genai"]["span_id"] == "0x" + "cd" * 8
    forced = list(iter_parsed([tmp_path / "trace.json"], shape="openinference"))
    assert forced[0].error.code == "content_not_captured"  # read as OpenInference: no llm.* messages
