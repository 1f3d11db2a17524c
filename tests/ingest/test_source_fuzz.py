"""Arbitrary JSON shaped like each log source's records: the readers raise only the project's located
errors (never a TypeError or KeyError), and what they return validates and encodes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.conversation import to_json
from pipeline.errors import SftprepError
from pipeline.ingest import parse_record
from pipeline.ingest.batch import BatchResult
from pipeline.ingest.sessions.codex import CodexWindow
from pipeline.ingest.sessions.gemini_cli import Recording
from pipeline.ingest.sessions.hf_sts import StsSession
from pipeline.ingest.sessions.inspect_ai import InspectSample
from pipeline.ingest.traces import SpanRecord
from pipeline.validate import validate

_keys = st.sampled_from([
    "type", "role", "content", "parts", "id", "name", "arguments", "response", "modality", "mime_type", "uri",
    "file_id", "finish_reason", "message", "tool_calls", "function", "args", "kwargs", "lc", "text", "thinking",
    "signature", "image_url", "url", "tool_call_id", "toolCalls", "toolCallId", "reasoningContent", "result",
    "functionResponse", "output", "error", "status", "thoughts", "subject", "description", "reasoning", "redacted",
    "params", "body", "custom_id", "input", "choices", "messages", "generations", "run_type", "inputs", "outputs",
    "extra", "invocation_params", "tools", "traceId", "level", "model", "events", "event", "attachments"])
_text = st.sampled_from(["", "user", "assistant", "tool", "system", "text", "tool_call", "tool_call_response",
                         "reasoning", "blob", "uri", "file", "GENERATION", "llm", "human", "ai", "AIMessage",
                         "gemini", "{", "{\"a\": 1}", "[]", "succeeded", "errored", "message", "function_call"])
_json = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | _text,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys | _text, inner, max_size=5),
                     max_leaves=30)
_dicts = st.dictionaries(_keys, _json, max_size=6)


def _wrap(kind: int, value: dict, other: dict):
    match kind:
        case 0:
            return {**value, "type": "GENERATION", "traceId": "t", "input": other.get("input"), "output": other.get("output")}
        case 1:
            return {**value, "run_type": "llm", "inputs": other, "outputs": value.get("outputs")}
        case 2:
            return SpanRecord(span={}, attributes={"gen_ai.operation.name": "chat", "gen_ai.input.messages": value.get("messages"),
                                                   "gen_ai.output.messages": other.get("messages"),
                                                   "gen_ai.tool.definitions": other.get("tools")},
                              events=[(str(k), v) for k, v in other.items() if isinstance(v, dict)])
        case 3:
            flat = {f"llm.input_messages.0.message.{k}": v for k, v in value.items()}
            return SpanRecord(span={}, attributes={"openinference.span.kind": "LLM", **flat,
                                                   **{f"llm.output_messages.{k}": v for k, v in other.items()}}, events=[])
        case 4:
            return Recording("r:1", [value, other], {}, {})
        case 5:
            return StsSession("s:1", {}, [(2, value), (3, other)])
        case 6:
            return InspectSample("i:1", {"messages": [value, other], "attachments": {}})
        case 7:
            return BatchResult("anthropic-batch", "c", {"custom_id": "c", "result": value}, other, "req:1")
        case _:
            return CodexWindow("c:1", {"input": [value, other]}, 0, 2)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 8), _dicts, _dicts)
def test_source_records_raise_only_project_errors(kind, value, other):
    try:
        conv = parse_record(_wrap(kind, value, other), "fuzz.jsonl:1")
    except SftprepError:
        return
    validate(conv)
    to_json(conv)


_otlp = st.recursive(st.none() | st.integers(-2, 2) | st.sampled_from(["chat", "x", "AAAA", "!!", "1"]),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from([
                         "resourceSpans", "scopeSpans", "spans", "attributes", "events", "key", "value", "stringValue",
                         "intValue", "arrayValue", "kvlistValue", "values", "bytesValue", "name", "resource", "scope"]),
                         inner, max_size=4), max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_otlp)
def test_otlp_exports_split_and_parse_with_project_errors_only(value):
    from pipeline.ingest import RawRecord, expand

    export = {"resourceSpans": value}
    for raw in expand(RawRecord("fuzz.jsonl:1", export)):
        if raw.error is not None:
            assert isinstance(raw.error, SftprepError)
            continue
        try:
            parse_record(raw.value, raw.source)
        except SftprepError:
            pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_otlp, _dicts)
def test_otlp_log_exports_split_and_parse_with_project_errors_only(value, body):
    from pipeline.ingest import RawRecord, expand

    logs = [{"eventName": "gen_ai.choice", "traceId": "a", "spanId": "b", "body": value},
            {"eventName": "gen_ai.user.message", "traceId": "a", "spanId": "b", "body": {"kvlistValue": {"values": [
                {"key": k, "value": {"stringValue": str(v)}} for k, v in body.items()]}}}, value]
    for raw in expand(RawRecord("fuzz.jsonl:1", {"resourceLogs": [{"scopeLogs": [{"logRecords": logs}]}, value]})):
        if raw.error is None:
            try:
                parse_record(raw.value, raw.source)
            except SftprepError:
                pass
