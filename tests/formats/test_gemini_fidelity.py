"""Gemini bodies as the API and its SDKs really write them, read and written back: where the fields of a
response candidate go, and what a request cannot carry of them."""

from __future__ import annotations

import copy

from formats.accept_gemini import check_request
from pipeline.formats import gemini
from pipeline.ingest.exchange import parse_exchange
from pipeline.ledger import Ledger

VERTEX_URI = ("https://us-central1-aiplatform.googleapis.com/v1/projects/demo/locations/us-central1/publishers/google/"
              "models/gemini-2.5-pro:generateContent")


def _write(conv, shape="request"):
    ledger = Ledger("gemini")
    body = gemini.serialize(conv, shape=shape, ledger=ledger)
    return body, [(e.kind, e.path, e.reason) for e in ledger.entries]


def test_an_exchange_answer_keeps_its_candidate_fields_out_of_the_request():
    answer = {"content": {"role": "model", "parts": [{"text": "Teal."}]}, "finishReason": "STOP",
              "avgLogprobs": -0.5, "citationMetadata": {"citations": [{"startIndex": 0, "endIndex": 4}]}}
    exchange = {"request": {"method": "POST", "uri": VERTEX_URI,
                            "body": {"contents": [{"role": "user", "parts": [{"text": "A color?"}]}]}},
                "response": {"status": 200, "body": {"candidates": [answer], "modelVersion": "gemini-2.5-pro"}}}
    conv = parse_exchange(exchange)
    body, entries = _write(conv)
    # The next request replays the answer as a plain content: a Content holds role and parts only.
    assert body["contents"][1] == {"role": "model", "parts": [{"text": "Teal."}]}
    assert check_request(body) == []
    assert [(kind, path) for kind, path, _ in entries] == [("dropped", "$.messages[1]")] * 2
    assert "candidate field 'avgLogprobs'" in entries[0][2] and "'citationMetadata'" in entries[1][2]


def test_unknown_keys_of_a_candidate_and_of_its_content_come_back_where_they_were():
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}], "futureContentField": 1},
                            "finishReason": "STOP", "index": 0, "futureCandidateField": {"x": 2}}],
            "modelVersion": "gemini-3-pro-preview", "responseId": "r1"}
    before = copy.deepcopy(body)
    conv = gemini.parse(body)
    out, entries = _write(conv, "response")
    assert (out, entries) == (before, [])
    # Written as the next request, the content keeps its own field and drops the candidate's; the first
    # candidate's position (index 0) is what the turn is, no loss.
    out, entries = _write(conv, "request")
    assert out["contents"] == [{"role": "model", "parts": [{"text": "Hi"}], "futureContentField": 1}]
    assert [reason.split("'")[1] for _, _, reason in entries if "candidate field" in reason] == [
        "futureCandidateField"]


# --- JSON null is an unset field: what the SDKs' model_dump() writes for every field left out ------------

def _sdk_dump(model) -> dict:
    return model.model_dump(mode="json")  # snake_case keys, null for every field not set


def _sdk_request() -> dict:
    from google.genai import types

    PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    contents = [
        types.Content(role="user", parts=[types.Part(text="Chart the sales and show me.")]),
        types.Content(role="model", parts=[
            types.Part(text="Drawing it.", thought=True),
            types.Part(function_call=types.FunctionCall(id="c1", name="chart", args={"kind": "bar", "note": None}),
                       thought_signature=b"sig-1")]),
        types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
            id="c1", name="chart", response={"output": "done"},
            parts=[types.FunctionResponsePart(inline_data=types.FunctionResponseBlob(mime_type="image/png",
                                                                                     data=PNG))]))]),
        types.Content(role="model", parts=[types.Part(text="Here it is.")])]
    tool = types.Tool(function_declarations=[types.FunctionDeclaration(
        name="chart", description="Draw a chart.", parameters_json_schema={"type": "object"})])
    return {"contents": [_sdk_dump(c) for c in contents], "tools": [_sdk_dump(tool)],
            "system_instruction": _sdk_dump(types.Content(parts=[types.Part(text="You draw charts.")])),
            "generation_config": None, "cached_content": None}


def test_an_sdk_dumped_request_reads_as_what_it_says_and_comes_back_exactly():
    body = _sdk_request()
    conv = gemini.parse(body)
    out, entries = _write(conv)
    assert (out, entries) == (body, [])
    assert [[type(b).__name__ for b in m.blocks] for m in conv.messages] == [
        ["Text"], ["Reasoning", "ToolCall"], ["ToolResult"], ["Text"]]
    call, result = conv.messages[1].blocks[1], conv.messages[2].blocks[0]
    assert (call.provider_id, call.arguments, call.signature) == ("c1", {"kind": "bar", "note": None}, "c2lnLTE=")
    assert result.call_id == call.id and [type(c).__name__ for c in result.content] == ["Media"]
    assert [t.name for t in conv.tools] == ["chart"] and conv.system[0].text == "You draw charts."
    # Nulls are no data: another format has nothing of them to lose, only what the parts hold.
    assert [path for path in _write_to(conv, "anthropic") if not path.startswith("$ ")] == [
        "$.messages[1].blocks[0] reasoning from gemini cannot be sent to anthropic: thinking blocks need an "
        "anthropic signature", "$.messages[1].blocks[1] a Gemini thought signature has no place on this anthropic "
        "block", "$.messages[2].blocks[0].output anthropic results have no structured output: written as JSON text"]


def test_an_sdk_dumped_response_reads_and_comes_back_exactly():
    from google.genai import types

    response = types.GenerateContentResponse.model_validate({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "Plan.", "thought": True},
            {"functionCall": {"name": "lookup", "args": {"q": "x"}}, "thoughtSignature": "c2ln"}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 9}, "modelVersion": "gemini-2.5-flash",
        "responseId": "r1"})
    body = _sdk_dump(response)
    conv = gemini.parse(body)
    out, entries = _write(conv, "response")
    assert (out, entries) == (body, [])
    assert [type(b).__name__ for b in conv.messages[0].blocks] == ["Reasoning", "ToolCall"]
    assert conv.meta.stop_reason == "STOP" and conv.messages[0].blocks[1].signature == "c2ln"
    # The unset candidate and response fields are no data another format could miss.
    assert [e for e in _write_to(conv, "openai-chat") if "field" in e] == [
        "$.messages[0] gemini field 'index' has no equivalent in openai-chat"]


def _write_to(conv, target):
    from pipeline.formats import registry

    _, entries = registry.serialize(conv, target)
    return [f"{e.path} {e.reason}" for e in entries]


def test_what_an_exchange_keeps_no_field_for_is_said_in_its_notes():
    def exchange(response: dict) -> dict:
        return {"request": {"method": "POST", "uri": VERTEX_URI, "body": {
            "contents": [{"role": "user", "parts": [{"text": "Two names, please."}]}],
            "generationConfig": {"candidateCount": 2}}}, "response": {"status": 200, "body": response}}

    two = parse_exchange(exchange({"candidates": [
        {"content": {"role": "model", "parts": [{"text": "Ada"}]}, "finishReason": "STOP", "index": 0},
        {"content": {"role": "model", "parts": [{"text": "Alan"}]}, "finishReason": "STOP", "index": 1}]}))
    assert [m.role for m in two.messages] == ["user", "assistant"]
    assert any("2 candidates" in note for note in two.meta.notes)
    blocked = parse_exchange(exchange({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                                       "usageMetadata": {"promptTokenCount": 6}}))
    assert [m.role for m in blocked.messages] == ["user"]
    assert any("blocked (PROHIBITED_CONTENT)" in note for note in blocked.meta.notes)


def test_a_gemini_finish_reason_written_as_a_responses_status_is_carried_or_ledgered():
    from pipeline.formats import registry

    def status(reason: str):
        conv = gemini.parse({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hm"}]},
                                             "finishReason": reason}], "responseId": "r"})
        body, entries = registry.serialize(conv, "openai-responses", shape="response")
        return body["status"], body.get("incomplete_details"), [e.reason for e in entries if "stop" in e.path]

    assert status("STOP") == ("completed", None, [])
    assert status("MAX_TOKENS") == ("incomplete", {"reason": "max_output_tokens"}, [])
    assert status("SAFETY") == ("incomplete", {"reason": "content_filter"}, [])
    assert status("MALFORMED_FUNCTION_CALL") == ("completed", None, [
        "stop reason 'MALFORMED_FUNCTION_CALL' has no openai-responses equivalent: wrote status 'completed'"])


def test_an_image_the_model_thought_in_is_not_passed_off_as_its_answer_without_a_word():
    # Image models think in interim images: parts with inlineData and `thought: true`.
    body = {"candidates": [{"content": {"role": "model", "parts": [
        {"inlineData": {"mimeType": "image/png", "data": "AAAA"}, "thought": True},
        {"inlineData": {"mimeType": "image/png", "data": "BBBB"}, "thoughtSignature": "c2ln"}]},
        "finishReason": "STOP"}], "responseId": "r"}
    conv = gemini.parse(body)
    assert _write(conv, "response") == (body, [])
    assert [e for e in _write_to(conv, "openai-responses") if "thought flag" in e] == [
        "$.messages[0].blocks[0] Gemini marks this part as a thought; openai-responses has no thought flag for it: "
        "written as content"]


def test_contents_without_roles_are_read_by_what_only_the_model_writes():
    body = {"contents": [{"parts": [{"text": "Sum 2 and 3."}]},
                         {"parts": [{"text": "Adding.", "thought": True}, {"functionCall": {"name": "add", "args": {}}}]},
                         {"parts": [{"functionResponse": {"name": "add", "response": {"output": 5}}}]}]}
    conv = gemini.parse(body)
    assert [m.role for m in conv.messages] == ["user", "assistant", "user"]
    assert conv.messages[2].blocks[0].call_id == conv.messages[1].blocks[1].id
    assert _write(conv) == (body, [])
