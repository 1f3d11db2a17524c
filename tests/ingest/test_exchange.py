"""OpenAI Responses records that hold no finished turn (failed, cancelled, background-mode `queued`), and
background calls in HTTP recordings joined with the retrieval that found them finished."""

from __future__ import annotations

import json

import pytest

from pipeline.conversation import Text, ToolCall
from pipeline.errors import SftprepError
from pipeline.ingest import iter_parsed, parse_record

URL = "https://api.openai.com/v1/responses"
REQUEST = {"model": "gpt-5", "background": True, "input": [{"role": "user", "content": "Weather in Oslo?"}],
           "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]}


def _response(status: str, output: list, **extra) -> dict:
    return {"id": "resp_bg1", "object": "response", "created_at": 1767225600, "status": status, "model": "gpt-5",
            "background": True, "error": None, "output": output, **extra}


CALL = {"id": "fc_bg1", "type": "function_call", "status": "completed", "call_id": "call_bg1", "name": "get_weather",
        "arguments": '{"city": "Oslo"}'}
ANSWER = {"id": "msg_bg1", "type": "message", "status": "completed", "role": "assistant",
          "content": [{"type": "output_text", "text": "Light rain.", "annotations": []}]}


def _post(response: dict) -> dict:
    return {"request": {"method": "POST", "uri": URL, "body": REQUEST}, "response": {"status": 200, "body": response}}


def _get(response: dict) -> dict:
    return {"request": {"method": "GET", "uri": f"{URL}/resp_bg1?stream=false", "body": ""},
            "response": {"status": 200, "body": response}}


@pytest.mark.parametrize("status, code", [("failed", "failed_generation"), ("cancelled", "unfinished_response"),
                                          ("queued", "unfinished_response"), ("in_progress", "unfinished_response")])
def test_a_response_that_is_no_finished_turn_is_rejected(status, code):
    error = {"code": "server_error", "message": "The model failed."} if status == "failed" else None
    body = _response(status, [ANSWER] if status == "cancelled" else [], error=error)
    for record, path in ((body, "$.status"), (_post(body), "$.response.body.status")):
        with pytest.raises(SftprepError) as caught:
            parse_record(record, "x:1")
        assert (caught.value.code, caught.value.path) == (code, path)
    if status == "failed":
        assert "The model failed." in caught.value.message


def test_finished_responses_are_read():
    for status, extra in (("completed", {}), ("incomplete", {"incomplete_details": {"reason": "max_output_tokens"}})):
        conv = parse_record(_response(status, [ANSWER], **extra), "x:1")
        assert conv.messages[0].blocks[0] == Text("Light rain.", form=conv.messages[0].blocks[0].form)


def test_background_call_takes_the_answer_its_retrieval_found(tmp_path):
    """POST answered `queued`, polled until completed: the conversation is the POST's history plus what the
    last retrieval found, not an empty turn; the retrievals stay records of their own (rejected)."""
    recording = {"interactions": [_post(_response("queued", [])), _get(_response("in_progress", [])),
                                  _get(_response("completed", [CALL]))]}
    path = tmp_path / "cassette.json"
    path.write_text(json.dumps(recording))
    parsed = list(iter_parsed([path]))
    assert [p.error.code if p.error else None for p in parsed] == [None, "not_a_model_call", "not_a_model_call"]
    conv = parsed[0].conversation
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    assert isinstance(conv.messages[1].blocks[0], ToolCall) and conv.messages[1].blocks[0].provider_id == "call_bg1"
    assert conv.meta.response_id == "resp_bg1"
    assert any("retrieved at interactions[2]" in note for note in conv.meta.notes)


def test_background_call_never_retrieved_finished_is_rejected(tmp_path):
    recording = {"interactions": [_post(_response("queued", [])), _get(_response("in_progress", []))]}
    path = tmp_path / "cassette.json"
    path.write_text(json.dumps(recording))
    first = list(iter_parsed([path]))[0]
    assert (first.error.code, first.error.path) == ("unfinished_response", "$.response.body.status")


def test_azure_responses_endpoint_is_a_generation_request():
    """Azure OpenAI serves the Responses API at /openai/responses?api-version=... besides /openai/v1/responses."""
    for uri in ("https://shop.openai.azure.com/openai/responses?api-version=2025-04-01-preview",
                "https://shop.openai.azure.com/openai/v1/responses"):
        record = {"request": {"method": "POST", "uri": uri, "body": {**REQUEST, "background": False}},
                  "response": {"status": 200, "body": _response("completed", [ANSWER])}}
        conv = parse_record(record, "x:1")
        assert (conv.meta.provider, [m.role for m in conv.messages]) == ("openai-responses", ["user", "assistant"])
