"""OTLP protobuf trace files: what the collector's file exporter writes with `format: proto` (each
opentelemetry-proto `ExportTraceServiceRequest` after its size as a big-endian uint32). The sample
data/traces/otel_genai.binpb is such a file; the tests also encode the JSON sample with the official
protobuf classes and check both encodings read to the same conversations."""

from __future__ import annotations

import base64
import json

from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from corpus import ROOT
from pipeline.conversation import to_builtins
from pipeline.ingest import iter_parsed
from source_run import blocks, sftprep_run

SAMPLE = ROOT / "data" / "traces" / "otel_genai.binpb"
JSON_SAMPLE = ROOT / "data" / "traces" / "otel_genai.jsonl"


def _encode(export: dict) -> bytes:
    export = json.loads(json.dumps(export))
    for rs in export["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:  # OTLP JSON writes ids in hex; the protobuf JSON mapping wants base64
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    data = ParseDict(export, ExportTraceServiceRequest()).SerializeToString()
    return len(data).to_bytes(4, "big") + data


def test_sample_through_sftprep_run(tmp_path):
    run = sftprep_run(tmp_path, SAMPLE)
    records = run.stats["records"]
    assert (records["read"], records["written"], records["rejected"]) == (3, 2, 1)
    assert run.rejects[0]["code"] == "not_a_model_call"
    first = run.rows[0]["conversation"]
    assert blocks(first["messages"][1])[1] == ("tool_call", "get_weather", {"city": "Porto"}, "call_w1")
    assert first["extras"]["otel-genai"]["span_id"] == "fff29c8fd4d2c284"
    assert first["meta"]["source"].endswith("otel_genai.binpb:1#resourceSpans[0].scopeSpans[0].spans[0]")


def test_protobuf_and_json_read_the_same(tmp_path):
    path = tmp_path / "trace.binpb"
    path.write_bytes(b"".join(_encode(json.loads(line)) for line in JSON_SAMPLE.read_text().splitlines()))
    from_proto = list(iter_parsed([path]))
    from_json = list(iter_parsed([JSON_SAMPLE]))
    assert len(from_proto) == len(from_json) == 5
    for a, b in zip(from_proto, from_json):
        assert a.source.split(":", 1)[1] == b.source.split(":", 1)[1]
        if b.conversation is None:
            assert a.error.code == b.error.code and a.error.path == b.error.path
            continue
        left, right = to_builtins(a.conversation), to_builtins(b.conversation)
        left["meta"].pop("source"), right["meta"].pop("source")
        assert left == right


def test_truncated_and_invalid_messages(tmp_path):
    whole = _encode(json.loads(JSON_SAMPLE.read_text().splitlines()[0]))
    path = tmp_path / "cut.binpb"
    path.write_bytes(whole + whole[:-10])
    parsed = list(iter_parsed([path]))
    assert [p.error.code for p in parsed if p.error] == ["not_a_model_call", "truncated_file"]
    assert parsed[-1].source == f"{path}:2"
    bad = tmp_path / "bad.binpb"
    bad.write_bytes(whole + (5).to_bytes(4, "big") + b"\x0a\xff\xff\xff\xff" + whole)
    codes = [p.error.code if p.error else "ok" for p in iter_parsed([bad])]
    assert codes == ["ok", "not_a_model_call", "ok", "invalid_protobuf", "ok", "not_a_model_call", "ok"]
