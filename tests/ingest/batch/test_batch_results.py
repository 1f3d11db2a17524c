"""Batch API results through `sftprep run`, joined with their requests on custom_id. The samples in
data/batch/ follow the OpenAI Batch guide (platform.openai.com/docs/guides/batch: input lines
`{"custom_id", "method", "url", "body"}`, output and error file lines `{"id", "custom_id", "response":
{"status_code", "request_id", "body"}, "error"}`) and the Anthropic Message Batches API
(docs.anthropic.com/en/api/creating-message-batches and retrieving-message-batch-results: the create body
`{"requests": [{"custom_id", "params"}]}`, result lines `{"custom_id", "result": {"type": succeeded | errored
| canceled | expired, ...}}`). Results are out of request order on purpose."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from corpus import ROOT
from pipeline.ingest import iter_parsed
from source_run import blocks, paired, sftprep_run

BATCH = ROOT / "data" / "batch"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return sftprep_run(tmp_path_factory.mktemp("batch"), BATCH)


def _by_source(run):
    return {r["conversation"]["meta"]["source"].rsplit("/", 1)[1]: r["conversation"] for r in run.rows}


def test_results_are_the_records_requests_the_index(run):
    records = run.stats["records"]
    # 5 Anthropic results + 4 OpenAI output lines + 2 error lines; the requests files are no records.
    assert (records["read"], records["written"], records["rejected"]) == (11, 5, 6)
    assert sorted((r["source"].rsplit("/", 1)[1], r["code"], r["path"]) for r in run.rejects) == [
        ("anthropic_results.jsonl:2", "batch_expired", "$.result.type"),
        ("anthropic_results.jsonl:4", "batch_errored", "$.result.error"),
        ("anthropic_results.jsonl:5", "batch_canceled", "$.result.type"),
        ("openai_errors.jsonl:1", "batch_expired", "$.error"),
        ("openai_errors.jsonl:2", "batch_errored", "$.response.status_code"),
        ("openai_output.jsonl:2", "batch_request_missing", "$.custom_id"),
    ]
    missing = next(r for r in run.rejects if r["code"] == "batch_request_missing")
    assert "'req-9'" in missing["message"] and "openai_requests.jsonl" in missing["message"]
    errored = next(r for r in run.rejects if r["source"].endswith("anthropic_results.jsonl:4"))
    assert "max_tokens: must be greater than or equal to 1" in errored["message"]


def test_openai_chat_joined_out_of_order(run):
    convs = _by_source(run)
    first = convs["openai_output.jsonl:4"]  # req-1's result came last
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert blocks(first["messages"][1]) == [("tool_call", "get_stock", {"sku": "SKU-7"}, "call_s7")]
    assert first["system"] == [{"type": "text", "text": "You answer stock questions."}]
    assert [t["name"] for t in first["tools"]] == ["get_stock"]
    assert (first["meta"]["shape"], first["meta"]["provider"]) == ("openai-batch", "openai-chat")
    assert first["extras"]["openai-batch"] == {"custom_id": "req-1", "batch_request_id": "batch_req_b1",
                                               "request_id": "req_b1",
                                               "request_source": str(BATCH / "openai_requests.jsonl") + ":1"}
    second = convs["openai_output.jsonl:1"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert blocks(second["messages"][2]) == [("tool_result", "call_s7", ["42"], False)]
    assert blocks(second["messages"][3]) == [("text", "There are 42 units of SKU-7 left.")]
    assert paired(second)


def test_openai_responses_endpoint(run):
    conv = _by_source(run)["openai_output.jsonl:3"]
    assert conv["meta"]["provider"] == "openai-responses"
    assert blocks(conv["messages"][-1]) == [("text", "97: no whole number from 2 up to its square root divides it evenly.")]
    assert conv["meta"]["model"] == "gpt-4.1-mini-2025-04-14"


def test_anthropic_results(run):
    convs = _by_source(run)
    call = convs["anthropic_results.jsonl:3"]
    assert blocks(call["messages"][1]) == [("text", "Let me check the forecast."),
                                           ("tool_call", "get_forecast", {"city": "Oslo"}, "toolu_f1")]
    assert (call["meta"]["shape"], call["meta"]["provider"], call["meta"]["response_id"]) == \
        ("anthropic-batch", "anthropic", "msg_a1")
    assert call["extras"]["anthropic-batch"]["request_source"] == str(BATCH / "anthropic_requests.json") + ":1#requests[0]"
    plain = convs["anthropic_results.jsonl:1"]
    assert plain["system"] == [{"type": "text", "text": "Answer in one sentence."}]


def test_requests_alone_are_ordinary_records(tmp_path):
    shutil.copy(BATCH / "openai_requests.jsonl", tmp_path / "requests.jsonl")
    parsed = list(iter_parsed([tmp_path / "requests.jsonl"]))
    assert len(parsed) == 5  # not skipped: no results file beside them


def test_shape_override_reads_a_results_file_detection_misses(tmp_path):
    """A results file whose first line is cut off is not detected; --shape openai-batch reads it."""
    shutil.copy(BATCH / "openai_requests.jsonl", tmp_path / "requests.jsonl")
    lines = (BATCH / "openai_output.jsonl").read_text().splitlines()
    (tmp_path / "results.jsonl").write_text('{"id": "batch_req_x", "custom_id"\n' + "\n".join(lines) + "\n")
    results = tmp_path / "results.jsonl"
    detected = sftprep_run(tmp_path / "a", results)
    assert detected.stats["records"]["written"] == 0
    forced = sftprep_run(tmp_path / "b", results, flags=("--shape", "openai-batch"))
    assert forced.stats["records"]["written"] == 3
    assert {r["code"] for r in forced.rejects} == {"invalid_json", "batch_request_missing"}


def test_gzipped_requests_and_duplicate_ids(tmp_path):
    text = (BATCH / "openai_requests.jsonl").read_bytes()
    (tmp_path / "requests.jsonl.gz").write_bytes(gzip.compress(text))
    (tmp_path / "more_requests.jsonl").write_text(text.decode().splitlines()[0] + "\n")  # req-1 again
    shutil.copy(BATCH / "openai_output.jsonl", tmp_path / "output.jsonl")
    parsed = {p.source.rsplit(":", 1)[1]: p for p in iter_parsed([tmp_path / "output.jsonl"])}
    assert parsed["4"].error.code == "batch_request_ambiguous"
    assert parsed["1"].conversation is not None and parsed["3"].conversation is not None


def test_request_body_errors_name_the_request_line(tmp_path):
    bad = {"custom_id": "r", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "robot"}]}}
    (tmp_path / "requests.jsonl").write_text(json.dumps(bad) + "\n")
    (tmp_path / "output.jsonl").write_text(json.dumps({"id": "b", "custom_id": "r", "error": None, "response": {
        "status_code": 200, "body": {"object": "chat.completion", "choices": []}}}) + "\n")
    [parsed] = iter_parsed([tmp_path / "output.jsonl"])
    assert parsed.error.path.startswith("$.body.messages[0]")
    assert f"{tmp_path / 'requests.jsonl'}:1" in parsed.error.message
