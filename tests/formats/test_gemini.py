"""Gemini generateContent codec: corpus and fixture round trips, parse results, bad input, the strict
request checker, and writing conversations of other origins into Gemini bodies."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import iter_interactions, params, request_bodies, response_bodies
from formats.accept_gemini import check_request
from pipeline.conversation import (Conversation, Media, Message, Meta, Opaque, Reasoning, Text, Tool, ToolCall,
                                   ToolResult)
from pipeline.errors import ParseError, SftprepError, ShapeError
from pipeline.formats import gemini
from pipeline.ledger import Ledger

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gemini"
FIXTURE_FILES = sorted(FIXTURES.glob("*.json"))
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _mine(kind, items):
    out = []
    for key, body in items:
        found = gemini.detect(body)
        if found is not None:
            out.append((f"{kind}:{key}", (found.shape, body)))
    return out


CORPUS_RECORDS = _mine("request", request_bodies()) + _mine("response", response_bodies())


def _corpus(key: str):
    found = dict(CORPUS_RECORDS).get(key)
    assert found is not None, f"corpus record {key} missing or no longer detected as gemini"
    return found[1]


def _fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


def _round_trip(body, shape, strict=True):
    before = copy.deepcopy(body)
    conv = gemini.parse(body, shape=shape, strict=strict)
    ledger = Ledger("gemini")
    out = gemini.serialize(conv, shape=shape, ledger=ledger)
    assert body == before, "parse or serialize mutated the input"
    return conv, out, ledger


def _write(conv: Conversation, shape: str = "request") -> tuple[dict, list[tuple[str, str]]]:
    ledger = Ledger("gemini")
    body = gemini.serialize(conv, shape=shape, ledger=ledger)
    return body, [(e.kind, e.path) for e in ledger.entries]


def _blocks(conv: Conversation) -> list[list[str]]:
    return [[type(b).__name__ for b in m.blocks] for m in conv.messages]


# --- 1. corpus ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("record", params(CORPUS_RECORDS))
def test_corpus_round_trip(record):
    shape, body = record
    _, out, ledger = _round_trip(body, shape)
    assert out == body
    assert not ledger.entries, [str(e) for e in ledger.entries]


def test_corpus_detection_picks_gemini_bodies_only(corpus):
    shapes = [value[0] for _, value in CORPUS_RECORDS]
    assert shapes.count("request") >= 100 and shapes.count("response") >= 100
    # OpenAI-compatible bodies sent to Google, file-store calls and count results are not generateContent.
    compat = [k for k, _ in request_bodies() if "test_compatible_api_with_tool_calls_without_id" in k]
    assert compat and all(f"request:{k}" not in dict(CORPUS_RECORDS) for k in compat)
    assert gemini.detect({"totalTokens": 11, "promptTokensDetails": []}) is None


def test_corpus_thought_parts_and_signatures(corpus):
    body = _corpus("request:pydantic_ai_google/models__cassettes__test_google__test_google_model_thinking_part.json#1")
    conv = gemini.parse(body)
    model = [m for m in conv.messages if m.role == "assistant"][0]
    thought = model.blocks[0]
    assert isinstance(thought, Reasoning) and thought.origin == "gemini" and thought.text.startswith("**")
    raw = body["contents"][1]["parts"]
    signed = [(i, p["thoughtSignature"]) for i, p in enumerate(raw) if "thoughtSignature" in p]
    assert signed
    for i, sig in signed:
        assert model.blocks[i].signature == sig  # on the block of the part it signs, byte for byte


def test_corpus_snake_case_parts(corpus):
    key = ("request:pydantic_ai_google/models__cassettes__test_multimodal_tool_returns__test_multimodal_tool_"
           "return_matrix[tool_return_content-binary-image-google_vertex].json#2")
    body = _corpus(key)
    conv = gemini.parse(body)
    assert _blocks(conv) == [["Text"], ["ToolCall"], ["ToolResult"], ["ToolCall"], ["ToolResult"], ["Media"]]
    call, result = conv.messages[1].blocks[0], conv.messages[2].blocks[0]
    assert call.signature == body["contents"][1]["parts"][0]["thought_signature"]
    assert call.provider_id == "pyd_ai_10e8af47e44d49eb94c85d08dcad6e8c"
    assert result.call_id == call.id and result.matched_by == "id"
    assert result.is_error  # pydantic-ai's retry prompt: {"error": ...}
    assert not conv.messages[4].blocks[0].is_error
    image = conv.messages[5].blocks[0]
    assert image.kind == "image" and image.media_type == "image/jpeg"
    assert gemini.serialize(conv, ledger=Ledger("gemini")) == body


def test_corpus_code_execution_is_opaque(corpus):
    body = _corpus("request:pydantic_ai_google/models__google__cassettes__test_code_execution__test_code_execution.json#1")
    conv = gemini.parse(body)
    opaque = [b for m in conv.messages for b in m.blocks if isinstance(b, Opaque)]
    assert [(o.item_type, o.role_hint) for o in opaque] == [("executableCode", "call"), ("codeExecutionResult", "result")] * 2
    assert opaque[0].payload["thoughtSignature"]  # the signature stays inside the verbatim part
    assert any(t.kind == "hosted" and t.name == "codeExecution" for t in conv.tools)


def test_corpus_server_tool_calls_beside_function_calls(corpus):
    body = _corpus("response:pydantic_ai_google/models__google__cassettes__test_structured_output__test_function_"
                   "tools_with_builtin_tools.json#0")
    conv = gemini.parse(body)
    kinds = [(type(b).__name__, getattr(b, "item_type", None)) for b in conv.messages[0].blocks]
    assert ("Opaque", "toolCall") in kinds and ("Opaque", "toolResponse") in kinds and ("ToolCall", None) in kinds


def test_corpus_vercel_tool_call_response(corpus):
    body = _corpus("response:vercel_ai_google/google-tool-call-gemini3.json")
    conv = gemini.parse(body)
    assert conv.meta.shape == "response" and conv.meta.model == "gemini-3-pro-preview"
    assert conv.meta.stop_reason == "STOP" and conv.meta.response_id == "JniLacKqGqH0xs0P0O776As"
    (call,) = conv.messages[0].blocks
    assert isinstance(call, ToolCall) and call.provider_id is None and call.arguments == {"location": "San Francisco"}
    assert call.signature == body["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert conv.messages[0].extras["gemini"]["finishMessage"] == "Model generated function call(s)."


# --- 2. fixtures ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_round_trip(path):
    body = json.loads(path.read_text())
    found = gemini.detect(body)
    assert found is not None and found.shape == path.name.split("_")[0].replace("edge", "request")
    # Strict refuses ambiguous pairings and unknown parts: those fixtures test that elsewhere.
    strict = not any(word in path.name for word in ("same_name", "unknown"))
    _, out, ledger = _round_trip(body, found.shape, strict)
    assert out == body
    assert not ledger.entries


def test_fixture_parallel_calls_with_ids():
    conv = gemini.parse(_fixture("request_function_calling_ids.json"))
    assert _blocks(conv) == [["Text"], ["Text", "ToolCall", "ToolCall"], ["ToolResult", "ToolResult"], ["Text"]]
    assert [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]
    _, lyon, porto = conv.messages[1].blocks
    ok, failed = conv.messages[2].blocks
    assert (lyon.provider_id, lyon.signature, porto.signature) == ("fc-lyon-1", "c2lnbmF0dXJlLWx5b24=", None)
    assert lyon.id != porto.id and lyon.arguments == {"city": "Lyon", "unit": "celsius"}
    assert (ok.call_id, failed.call_id) == (lyon.id, porto.id)
    assert ok.matched_by == failed.matched_by == "id"
    assert ok.output == {"output": {"temp": 14, "sky": "rain"}} and not ok.is_error
    assert failed.is_error and failed.output == {"error": "station offline"}
    (tool,) = conv.tools
    # Gemini's OpenAPI-style capitals become JSON Schema; the original comes back on the way out.
    assert tool.parameters["type"] == "object" and tool.parameters["properties"]["city"] == {"type": "string"}
    assert conv.extras["gemini"]["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


def test_same_name_calls_without_ids():
    body = _fixture("request_same_name_no_ids.json")
    conv = gemini.parse(body)
    first, second = conv.messages[1].blocks
    r1, r2 = conv.messages[2].blocks
    assert (r1.call_id, r2.call_id) == (first.id, second.id)
    assert r1.matched_by == r2.matched_by == "name_order"
    assert first.provider_id is None and first.id != second.id
    assert any("name and order" in note for note in conv.meta.notes)
    assert any("$.contents[2].parts[0].functionResponse" in note for note in conv.meta.notes)
    with pytest.raises(ParseError) as err:
        gemini.parse(body, strict=True)
    assert err.value.code == "ambiguous_call_match"
    assert err.value.path == "$.contents[2].parts[0].functionResponse"
    # Gemini to Gemini: calls that had no id still have none.
    out = gemini.serialize(conv, ledger=Ledger("gemini"))
    assert "id" not in out["contents"][1]["parts"][0]["functionCall"]


def test_fixture_thinking():
    conv = gemini.parse(_fixture("request_thinking.json"), strict=True)
    assert _blocks(conv)[1] == ["Reasoning", "ToolCall"]
    thought, call = conv.messages[1].blocks
    assert thought.signature is None and thought.text.startswith("**Checking")
    assert call.signature == "Q2lRQmZhY3Rvci1zaWduYXR1cmU=" and call.provider_id is None
    result = conv.messages[2].blocks[0]
    assert result.call_id == call.id and result.matched_by == "name_order"  # one pending call: not ambiguous
    signed_text, empty = conv.messages[3].blocks
    assert isinstance(signed_text, Text) and signed_text.signature == "Q2lRQnRleHQtc2lnbmF0dXJl"
    assert isinstance(empty, Text) and empty.text == "" and empty.signature == "Q2lRQmVtcHR5LXRleHQ="


def test_fixture_media():
    conv = gemini.parse(_fixture("request_media.json"))
    blocks = conv.messages[0].blocks
    assert [(b.kind, b.media_type) for b in blocks[1:]] == [
        ("image", "image/png"), ("video", "video/mp4"), ("document", "application/pdf"), ("file", None),
        ("audio", "audio/mp3")]
    assert blocks[1].data == PNG and blocks[2].url == "https://www.youtube.com/watch?v=9hE5-98ZeCg"
    assert blocks[2].extras["gemini"]["videoMetadata"]["fps"] == 1


def test_fixture_multimodal_function_response():
    conv = gemini.parse(_fixture("request_multimodal_function_response.json"))
    (result,) = conv.messages[2].blocks
    assert result.output == {"image_ref": {"$ref": "instrument.png"}}
    (image,) = result.content
    assert isinstance(image, Media) and image.data == PNG
    assert image.extras["gemini"] == {"inlineData.displayName": "instrument.png"}


def test_fixture_server_tools_and_tool_layout():
    body = _fixture("request_server_tools.json")
    conv = gemini.parse(body)
    assert [(t.name, t.kind) for t in conv.tools] == [
        ("googleSearch", "hosted"), ("urlContext", "hosted"), ("record_fact", "function"), ("googleMaps", "hosted")]
    call_part, result_part, fc = conv.messages[1].blocks
    assert (call_part.item_type, call_part.role_hint, call_part.name) == ("toolCall", "call", "GOOGLE_SEARCH_WEB")
    assert result_part.role_hint == "result" and isinstance(fc, ToolCall)
    assert conv.messages[2].blocks[0].call_id == fc.id


def test_fixture_snake_case_spelling_kept():
    body = _fixture("request_snake_case.json")
    conv = gemini.parse(body)
    assert conv.system == (Text("Reply in French."),)
    call = conv.messages[1].blocks[0]
    assert call.signature == "Q2lRQnpvb20tc2lnbmF0dXJl"
    assert conv.messages[2].blocks[0].call_id == call.id
    assert conv.tools[0].parameters == {"type": "object", "properties": {"factor": {"type": "number"}}}
    out = gemini.serialize(conv, ledger=Ledger("gemini"))
    assert "system_instruction" in out and "function_call" in out["contents"][1]["parts"][0]


def test_fixture_edges_roles_and_unknown_parts():
    conv = gemini.parse(_fixture("edge_function_role_no_role.json"))
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "assistant"]
    assert conv.messages[2].blocks[0].call_id == conv.messages[1].blocks[0].id
    conv = gemini.parse(_fixture("edge_unknown_part_string_system.json"))
    assert conv.system == (Text("Be brief."),) and conv.meta.model == "models/gemini-2.5-flash"
    widget, bare, text = conv.messages[1].blocks
    assert isinstance(widget, Opaque) and widget.item_type == "futureWidget"
    assert isinstance(bare, Reasoning) and bare.text is None and bare.signature == "Q2lRQmJhcmUtc2lnbmF0dXJl"
    assert isinstance(text, Text) and text.text == "Hello!"
    assert conv.messages[0].blocks[0].extras["gemini"] == {"partMetadata": {"source": "kiosk"}}
    with pytest.raises(ParseError) as err:
        gemini.parse(_fixture("edge_unknown_part_string_system.json"), strict=True)
    assert err.value.code == "unknown_block" and err.value.path == "$.contents[1].parts[0]"


def test_fixture_responses():
    conv = gemini.parse(_fixture("response_function_calls.json"))
    assert conv.meta.shape == "response" and conv.meta.created == "2026-05-01T10:00:00.000000Z"
    assert _blocks(conv) == [["Reasoning", "ToolCall", "ToolCall"]]
    assert conv.meta.usage["totalTokenCount"] == 62
    blocked = gemini.parse(_fixture("response_prompt_blocked.json"))
    assert blocked.messages == () and blocked.extras["gemini"]["promptFeedback"]["blockReason"] == "SAFETY"
    grounded = gemini.parse(_fixture("response_grounded.json"))
    assert len(grounded.messages) == 1 and "groundingMetadata" in grounded.messages[0].extras["gemini"]


def test_malformed_function_call_response():
    body = _fixture("response_malformed_function_call.json")
    conv = gemini.parse(body)
    assert conv.meta.stop_reason == "MALFORMED_FUNCTION_CALL"
    (message,) = conv.messages
    assert message.role == "assistant" and message.blocks == ()
    # As a request, the empty turn cannot be sent: dropped with a ledger entry, never an empty content.
    out, entries = _write(conv, "request")
    assert out["contents"] == [] and ("dropped", "$.messages[0]") in entries


def test_reused_id_in_one_turn_pairs_in_order():
    call = {"functionCall": {"id": "call_0", "name": "f", "args": {}}}
    answer = {"functionResponse": {"id": "call_0", "name": "f", "response": {"output": 1}}}
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}, {"role": "model", "parts": [call, call]},
                         {"role": "user", "parts": [answer, answer]}]}
    conv = gemini.parse(body)
    first, second = conv.messages[1].blocks
    assert first.id != second.id
    assert [r.call_id for r in conv.messages[2].blocks] == [first.id, second.id]


def test_orphan_result_kept():
    body = {"contents": [{"role": "user", "parts": [
        {"functionResponse": {"id": "nope", "name": "f", "response": {"output": 1}}},
        {"functionResponse": {"name": "g", "response": {}}}]}]}
    conv = gemini.parse(body, strict=True)
    a, b = conv.messages[0].blocks
    assert (a.call_id, a.provider_id, a.matched_by) == (None, "nope", None)
    assert (b.call_id, b.matched_by) == (None, None)
    assert gemini.serialize(conv, ledger=Ledger("gemini")) == body


# --- 3. bad input -----------------------------------------------------------------------------------

def _contents(*parts, role="model"):
    return {"contents": [{"role": "user", "parts": [{"text": "hi"}]}, {"role": role, "parts": list(parts)}]}


@pytest.mark.parametrize("body, path", [
    ({"generationConfig": {}}, "$"),
    ({"contents": {"role": "user"}}, "$.contents"),
    ({"contents": ["hi"]}, "$.contents[0]"),
    ({"contents": [{"role": "user"}]}, "$.contents[0]"),
    ({"contents": [{"role": "assistant", "parts": []}]}, "$.contents[0].role"),
    ({"contents": [{"role": "user", "parts": "hi"}]}, "$.contents[0].parts"),
    (_contents({"functionCall": {"args": {}}}), "$.contents[1].parts[0].functionCall"),
    (_contents({"functionCall": {"name": "f", "args": "{\"a\": 1}"}}), "$.contents[1].parts[0].functionCall.args"),
    (_contents({"function_call": {"name": 7}}), "$.contents[1].parts[0].function_call.name"),
    (_contents({"functionResponse": {"name": "f"}}, role="user"), "$.contents[1].parts[0].functionResponse"),
    (_contents({"functionResponse": {"name": "f", "response": "ok"}}, role="user"),
     "$.contents[1].parts[0].functionResponse.response"),
    (_contents({"inlineData": {"data": PNG}}, role="user"), "$.contents[1].parts[0].inlineData"),
    (_contents({"fileData": {"mimeType": "image/png"}}, role="user"), "$.contents[1].parts[0].fileData"),
    (_contents({"text": 5}), "$.contents[1].parts[0].text"),
    (_contents({"text": "a", "thoughtSignature": 12}), "$.contents[1].parts[0].thoughtSignature"),
    (_contents({"text": "a", "thought": "yes"}), "$.contents[1].parts[0].thought"),
    (_contents({"text": "a", "functionCall": {"name": "f"}}), "$.contents[1].parts[0]"),
    (_contents({}), "$.contents[1].parts[0]"),
    ({"contents": [], "tools": [{"functionDeclarations": [{"description": "x"}]}]}, "$.tools[0].functionDeclarations[0]"),
    ({"contents": [], "tools": "googleSearch"}, "$.tools"),  # one Tool object is accepted; a string is not
    ({"contents": [], "systemInstruction": 3}, "$.systemInstruction"),
])
def test_bad_request_names_path(body, path):
    with pytest.raises(ParseError) as err:
        gemini.parse(body, shape="request")
    assert err.value.path == path, str(err.value)


def test_bad_response_and_messages_name_path():
    with pytest.raises(ParseError) as err:
        gemini.parse({"candidates": [{"content": {"role": "model", "parts": [{"text": 5}]}}]})
    assert err.value.path == "$.candidates[0].content.parts[0].text"
    with pytest.raises(ParseError) as err:  # null is an unset field: the part holds nothing
        gemini.parse({"candidates": [{"content": {"role": "model", "parts": [{"text": None}]}}]})
    assert err.value.path == "$.candidates[0].content.parts[0]"
    with pytest.raises(ParseError) as err:
        gemini.parse({"candidates": "none"}, shape="response")
    assert err.value.path == "$.candidates"
    with pytest.raises(ParseError) as err:
        gemini.parse([{"role": "user", "parts": [{"functionCall": {"name": "f", "id": 3}}]}])
    assert err.value.path == "$[0].parts[0].functionCall.id"


def test_not_gemini_is_a_shape_error():
    for value in ({"messages": []}, [{"role": "user", "content": "hi"}], "text", None):
        assert gemini.detect(value) is None
        with pytest.raises(ShapeError):
            gemini.parse(value)


def test_detect_shapes_and_certainty():
    assert gemini.detect({"contents": []}) == ("gemini", "request", True)
    assert gemini.detect([{"role": "model", "parts": []}]) == ("gemini", "messages", True)
    assert gemini.detect({"candidates": []}) == ("gemini", "response", True)
    assert gemini.detect({"usageMetadata": {}, "responseId": "x"}) == ("gemini", "response", True)
    assert gemini.detect([]) is None
    assert gemini.detect({"error": {"code": 429}}) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)
# Values shaped like Gemini records, so parse goes past the first check.
part_keys = st.sampled_from(["text", "thought", "thoughtSignature", "functionCall", "function_response",
                             "inlineData", "fileData", "executableCode", "toolCall", "name", "args", "id",
                             "response", "parts", "mimeType", "data", "fileUri", "role", "videoMetadata"])
shaped = st.recursive(json_values, lambda inner: st.dictionaries(part_keys, inner, max_size=4) | st.lists(inner, max_size=3),
                      max_leaves=25)
records = (json_values
           | st.builds(lambda c: {"contents": c}, st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "model", "x"]),
                                                                               "parts": st.lists(shaped, max_size=3)}), max_size=3))
           | st.builds(lambda c: {"candidates": c}, st.lists(st.fixed_dictionaries({"content": shaped}), max_size=2))
           | st.lists(st.fixed_dictionaries({"parts": st.lists(shaped, max_size=3)}), min_size=1, max_size=3))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_detect_never_raises_and_parse_raises_only_project_errors(value):
    found = gemini.detect(value)
    for shape in ([found.shape] if found else []) + ["request", "messages", "response"]:
        for strict in (False, True):
            try:
                conv = gemini.parse(value, shape=shape, strict=strict)
            except SftprepError:
                continue
            # What parses also writes back, in every shape, without raising.
            for target in ("request", "messages", "response"):
                gemini.serialize(conv, shape=target, ledger=Ledger("gemini"))


def _paths(value, prefix=()):
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from _paths(item, (*prefix, key))


FIXTURE_PATHS = [(p.name, path) for p in FIXTURE_FILES for path in _paths(json.loads(p.read_text())) if path]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIXTURE_PATHS), json_values | st.just(KeyError))
def test_mutated_fixtures_parse_or_fail_cleanly(where, replacement):
    """A valid record with one value replaced (or removed) parses or fails with a project error."""
    name, path = where
    body = _fixture(name)
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    if replacement is KeyError:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    before = copy.deepcopy(body)
    try:
        conv = gemini.parse(body)
    except SftprepError as err:
        assert err.path.startswith("$")
        return
    assert body == before
    for shape in ("request", "messages", "response"):
        gemini.serialize(conv, shape=shape, ledger=Ledger("gemini"))


def test_parse_does_not_alias_caller_top_level_dicts():
    body = _fixture("request_function_calling_ids.json")
    conv = gemini.parse(body)
    body["generationConfig"] = {"temperature": 2}
    body["contents"].append({"role": "user", "parts": [{"text": "late"}]})
    assert "generationConfig" not in conv.extras["gemini"] and len(conv.messages) == 4


# --- 4. the strict request checker --------------------------------------------------------------------

def _accepted_requests():
    out = []
    for key, it in iter_interactions(("pydantic_ai_google",)):
        body, uri = it["request"]["body"], it["request"]["uri"]
        if (isinstance(body, dict) and "enerateContent" in uri and it["response"]["status"] == 200
                and gemini.detect(body) is not None):
            out.append((key, body))
    return out


@pytest.mark.parametrize("body", params(_accepted_requests()))
def test_checker_accepts_corpus_requests(body):
    assert check_request(body) == []


@pytest.mark.parametrize("path", [p for p in FIXTURE_FILES if p.name.startswith("request_")], ids=lambda p: p.name)
def test_checker_accepts_fixture_requests(path):
    assert check_request(json.loads(path.read_text())) == []


def _broken(mutate):
    body = _fixture("request_function_calling_ids.json")
    mutate(body)
    return body


@pytest.mark.parametrize("mutate, expected", [
    (lambda b: b.update(model="gemini-2.5-flash"), "$.model: unknown field"),
    (lambda b: b["contents"][0].update(role="assistant"), "$.contents[0].role"),
    (lambda b: b["contents"][0]["parts"].clear(), "$.contents[0].parts: required"),
    (lambda b: b["contents"][1]["parts"][1]["functionCall"].update(args="{\"city\": \"Lyon\"}"),
     "$.contents[1].parts[1].functionCall.args: must be an object"),
    (lambda b: b["contents"][1]["parts"][1]["functionCall"].pop("name"), "$.contents[1].parts[1].functionCall.name: required"),
    (lambda b: b["contents"][1]["parts"][1].update(thoughtSignature="not base64!"),
     "$.contents[1].parts[1].thoughtSignature: must be base64"),
    (lambda b: b["contents"][2]["parts"].pop(), "$.contents[2]: 2 function call(s)"),
    (lambda b: b["contents"][2]["parts"][1]["functionResponse"].update(id="other"), "matches no call"),
    (lambda b: b["contents"][2]["parts"][1]["functionResponse"].pop("id"), "does not echo one"),
    (lambda b: b["contents"][2]["parts"][0]["functionResponse"].update(response="14 C"),
     "functionResponse.response: must be an object"),
    (lambda b: b["contents"][2].update(role="model"), "a function response must be in a user content"),
    (lambda b: b["contents"].pop(2), "2 function call(s) in the previous model content but 0"),
    (lambda b: b.update(contents=b["contents"][:2]), "is never answered"),
    (lambda b: b["contents"][0]["parts"].append({"text": "a", "inlineData": {"mimeType": "image/png", "data": PNG}}),
     "exactly one of"),
    (lambda b: b["contents"][0]["parts"].append({"inlineData": {"data": PNG}}), "inlineData.mimeType: required"),
    (lambda b: b["contents"][0]["parts"][0].update(colour="red"), "$.contents[0].parts[0].colour: unknown field"),
    (lambda b: b["tools"][0]["functionDeclarations"][0].update(name="get weather"), "functionDeclarations[0].name"),
    (lambda b: b["tools"][0]["functionDeclarations"][0].update(parametersJsonSchema={}), "mutually exclusive"),
    (lambda b: b["tools"][0]["functionDeclarations"][0]["parameters"].update(type="DICT"),
     "parameters.type: must be one of"),
    (lambda b: b["toolConfig"]["functionCallingConfig"].update(mode="SOMETIMES"), "mode: must be one of"),
    (lambda b: b.update(generationConfig={"temperature": "hot"}), "generationConfig.temperature: must be a number"),
    (lambda b: b.update(generationConfig={"maxOutputTokens": 10, "max_output_tokens": 20}), "given twice"),
    (lambda b: b.update(systemInstruction={"parts": [{"inlineData": {"mimeType": "image/png", "data": PNG}}]}),
     "system instructions hold text parts only"),
    (lambda b: b.update(contents=[]), "$.contents: required"),
])
def test_checker_rejects_broken_bodies(mutate, expected):
    problems = check_request(_broken(mutate))
    assert any(expected in p for p in problems), problems


def test_checker_rejects_non_objects():
    assert check_request([]) == ["$: a request body must be an object"]
    assert check_request({"contents": "hi"})


# --- 5. writing other origins into Gemini -------------------------------------------------------------

def _call(name, args, pid=None, cid=None):
    return ToolCall(id=cid or f"call_{name}_{len(json.dumps(args))}", name=name, arguments=args, provider_id=pid)


def test_write_openai_style_parallel_calls_and_text_around():
    a = _call("get_weather", {"city": "Oslo"}, "call_A")
    b = _call("get_time", {"tz": "CET"}, "call_B")
    conv = Conversation(
        system=(Text("Be brief."),),
        tools=(Tool("get_weather", "Weather.", {"type": "object", "properties": {"city": {"type": "string"}}}),
               Tool("get_time", None, {"type": "object"})),
        messages=(
            Message("user", (Text("Weather and time in Oslo?"),)),
            Message("assistant", (Text("Checking."), a, b, Text("One moment."))),
            Message("tool", (ToolResult(a.id, "call_A", content=(Text("4 C"),), matched_by="id"),)),
            Message("tool", (ToolResult(b.id, "call_B", content=(Text("13:00"),), matched_by="id"),)),
            Message("assistant", (Text("4 C at 13:00."),)),
        ),
        meta=Meta(provider="openai-chat"),
        extras={"openai-chat": {"model": "gpt-4o", "temperature": 0.2, "max_completion_tokens": 50,
                                "tool_choice": "required", "stop": "END"}})
    body, entries = _write(conv)
    assert check_request(body) == []
    parts = body["contents"][1]["parts"]
    assert [list(p) for p in parts] == [["text"], ["functionCall"], ["functionCall"], ["text"]]
    assert parts[1]["functionCall"] == {"name": "get_weather", "id": "call_A", "args": {"city": "Oslo"}}
    # The two tool messages become one user content, in order.
    assert body["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "id": "call_A", "response": {"output": "4 C"}}},
        {"functionResponse": {"name": "get_time", "id": "call_B", "response": {"output": "13:00"}}}]}
    assert body["generationConfig"] == {"temperature": 0.2, "maxOutputTokens": 50, "stopSequences": ["END"]}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["type"] == "object"
    assert entries == [("folded", "$.messages[2].blocks[0]"), ("folded", "$.messages[3].blocks[0]"),
                       ("folded", "$.messages[3]"), ("dropped", "$")]  # the model name has no place
    back = gemini.parse(body, strict=True)
    assert [r.call_id for r in back.messages[2].blocks] == [c.id for c in back.messages[1].blocks[1:3]]


def test_write_is_error_and_image_results():
    call = _call("screenshot", {"url": "https://example.com"}, "toolu_01")
    failing = _call("fetch", {}, "toolu_02")
    conv = Conversation(messages=(
        Message("user", (Text("Screenshot it."),)),
        Message("assistant", (call, failing)),
        Message("user", (
            ToolResult(call.id, "toolu_01", content=(Text("done"), Media("image", "image/png", data=PNG)),
                       matched_by="id"),
            ToolResult(failing.id, "toolu_02", content=(Text("timeout"),), is_error=True, matched_by="id"),
            Text("What do you see?"))),
    ), meta=Meta(provider="anthropic"))
    body, entries = _write(conv)
    assert check_request(body) == []
    shot, err = body["contents"][2]["parts"][:2]
    assert shot["functionResponse"]["response"] == {"output": "done"}
    assert shot["functionResponse"]["parts"] == [{"inlineData": {"mimeType": "image/png", "data": PNG}}]
    assert err["functionResponse"]["response"] == {"error": "timeout"}
    assert body["contents"][2]["parts"][2] == {"text": "What do you see?"}
    assert entries == [("folded", "$.messages[2].blocks[0]"), ("folded", "$.messages[2].blocks[1]")]
    back = gemini.parse(body)
    assert back.messages[2].blocks[1].is_error and not back.messages[2].blocks[0].is_error


def test_write_unsupported_media_in_result_moves_to_user_content():
    call = _call("record", {}, "c1")
    audio = Media("audio", "audio/wav", data="UklGRg==")
    conv = Conversation(messages=(
        Message("user", (Text("Record it."),)),
        Message("assistant", (call,)),
        Message("tool", (ToolResult(call.id, "c1", content=(Text("ok"), audio), matched_by="id"),)),
    ), meta=Meta(provider="openai-chat"))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert body["contents"][3] == {"role": "user", "parts": [{"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}}]}
    assert ("moved", "$.messages[2].blocks[0].content[1]") in entries


def test_write_calls_without_provider_ids():
    first = _call("lookup", {"q": "a"}, cid="call_x1")
    second = _call("lookup", {"q": "b"}, cid="call_x2")
    conv = Conversation(messages=(
        Message("user", (Text("Look both up."),)),
        Message("assistant", (first, second)),
        Message("tool", (ToolResult("call_x2", content=(Text("B"),)), ToolResult("call_x1", content=(Text("A"),)))),
    ))
    body, entries = _write(conv)
    assert check_request(body) == []
    ids = [p["functionCall"]["id"] for p in body["contents"][1]["parts"]]
    assert ids == ["call_x1", "call_x2"]  # canonical ids, so same-name calls pair without guessing
    assert [p["functionResponse"]["id"] for p in body["contents"][2]["parts"]] == ["call_x2", "call_x1"]
    assert ("synthesized", "$.messages[1].blocks[0]") in entries
    assert ("synthesized", "$.messages[2].blocks[0]") in entries
    back = gemini.parse(body, strict=True)
    assert back.messages[2].blocks[0].call_id == back.messages[1].blocks[1].id


def test_write_foreign_reasoning_and_opaque():
    call = _call("search", {"q": "x"}, "toolu_9")
    conv = Conversation(messages=(
        Message("user", (Text("Find x."),)),
        Message("assistant", (
            Reasoning(text="I should search.", signature="EqQBCkYIBxgCKkA=", origin="anthropic"),
            Reasoning(redacted="EmwKAhgBEgy3", origin="anthropic"),
            Reasoning(summary=("Plan the search.",), encrypted="gAAAAB", item_id="rs_1", origin="openai-responses"),
            Opaque("anthropic", "server_tool_use", {"type": "server_tool_use", "id": "srvtoolu_1"}, "call", "web_search"),
            call)),
        Message("user", (ToolResult(call.id, "toolu_9", content=(Text("found"),), matched_by="id"),)),
    ), meta=Meta(provider="anthropic"))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert body["contents"][1]["parts"][:2] == [{"text": "I should search.", "thought": True},
                                                {"text": "Plan the search.", "thought": True}]
    assert "thoughtSignature" not in json.dumps(body) and "EmwKAhgBEgy3" not in json.dumps(body)
    assert ("dropped", "$.messages[1].blocks[0]") in entries  # the Anthropic signature
    assert ("dropped", "$.messages[1].blocks[1]") in entries  # redacted thinking
    assert ("dropped", "$.messages[1].blocks[2]") in entries and ("folded", "$.messages[1].blocks[2]") in entries
    assert ("dropped", "$.messages[1].blocks[3]") in entries  # the other provider's server tool item


def test_write_invalid_arguments_and_custom_tools():
    bad = ToolCall(id="call_bad", name="run_sql", raw_arguments='{"query": "SELECT', arguments_valid=False,
                   provider_id="call_1")
    custom = ToolCall(id="call_c", name="apply_patch", arguments="*** Begin Patch", kind="custom", provider_id="call_2")
    conv = Conversation(
        tools=(Tool("run_sql", None, {"type": "object"}), Tool("apply_patch", "Patch files.", kind="custom")),
        messages=(Message("user", (Text("go"),)), Message("assistant", (bad, custom)),
                  Message("tool", (ToolResult("call_bad", "call_1", content=(Text("syntax error"),), is_error=True),
                                   ToolResult("call_c", "call_2", content=(Text("applied"),))))),
        meta=Meta(provider="openai-responses"))
    body, entries = _write(conv)
    assert check_request(body) == []
    bad_part, custom_part = body["contents"][1]["parts"]
    assert "args" not in bad_part["functionCall"]  # never a silent {}
    assert custom_part["functionCall"]["args"] == {"input": "*** Begin Patch"}
    assert ("dropped", "$.messages[1].blocks[0]") in entries and ("folded", "$.messages[1].blocks[1]") in entries
    assert ("folded", "$.tools[1]") in entries
    assert body["tools"][0]["functionDeclarations"][1]["parametersJsonSchema"]["required"] == ["input"]


def test_write_instructions_developer_and_mid_conversation_system():
    conv = Conversation(
        system=(Text("Rule one."),), developer=(Text("Rule two."),),
        messages=(Message("user", (Text("hi"),)), Message("system", (Text("Now be formal."),)),
                  Message("assistant", (Text("Good day."),), name="bot")))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert body["systemInstruction"] == {"parts": [{"text": "Rule one."}, {"text": "Rule two."}]}
    assert body["contents"][1] == {"role": "user", "parts": [{"text": "Now be formal."}]}
    assert sorted(entries) == [("dropped", "$.messages[2]"), ("folded", "$.developer[0]"), ("folded", "$.messages[1]")]


def test_write_instructions_only_conversation():
    conv = Conversation(system=(Text("You are a potato."),), meta=Meta(provider="openai-chat"))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert body == {"contents": [{"role": "user", "parts": [{"text": "You are a potato."}]}]}
    assert entries == [("moved", "$.system")]


def test_write_anthropic_params_and_hosted_tools():
    conv = Conversation(
        tools=(Tool("web_search", kind="hosted", extras={"anthropic": {"type": "web_search_20250305"}}),
               Tool("lookup", "Look up.", {"type": "object"})),
        messages=(Message("user", (Text("hi"),)),),
        meta=Meta(provider="anthropic"),
        extras={"anthropic": {"max_tokens": 1024, "top_k": 5, "stop_sequences": ["##"],
                              "tool_choice": {"type": "tool", "name": "lookup", "disable_parallel_tool_use": True},
                              "thinking": {"type": "enabled", "budget_tokens": 2000}}})
    body, entries = _write(conv)
    assert check_request(body) == []
    assert body["generationConfig"] == {"maxOutputTokens": 1024, "topK": 5, "stopSequences": ["##"]}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}}
    assert body["tools"] == [{"functionDeclarations": [{"name": "lookup", "description": "Look up.",
                                                        "parametersJsonSchema": {"type": "object"}}]}]
    reasons = [e for e in entries]
    assert ("dropped", "$.tools[0]") in reasons  # the hosted tool (and its anthropic fields)
    assert reasons.count(("dropped", "$")) == 2  # thinking, tool_choice.disable_parallel_tool_use


def test_write_response_from_other_origin():
    call = _call("lookup", {"q": 1}, "toolu_1")
    conv = Conversation(messages=(Message("user", (Text("q"),)), Message("assistant", (Text("Let me see."), call))),
                        meta=Meta(provider="anthropic", model="claude-x", response_id="msg_1", stop_reason="tool_use",
                                  usage={"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0}))
    body, entries = _write(conv, "response")
    assert body == {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Let me see."}, {"functionCall": {"name": "lookup", "id": "toolu_1", "args": {"q": 1}}}]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        "modelVersion": "claude-x", "responseId": "msg_1"}
    assert entries == [("dropped", "$.messages[0]"), ("dropped", "$.meta.usage")]
    assert gemini.parse(body).messages[0].blocks[1].provider_id == "toolu_1"


def test_write_gemini_request_as_response_and_back():
    conv = gemini.parse(_fixture("request_function_calling_ids.json"))
    body, entries = _write(conv, "response")
    assert body["candidates"][0]["content"]["parts"] == [{"text": "Lyon: 14 C and rain. Porto's station is offline."}]
    assert ("dropped", "$.messages[0]") in entries and ("dropped", "$.tools") in entries
    conv = gemini.parse(_fixture("response_function_calls.json"))
    body, entries = _write(conv, "request")
    assert check_request(body) != []  # an unanswered call: a response is not a request by itself
    assert body["contents"][0]["role"] == "model" and ("dropped", "$.messages[0]") in entries


def test_serialize_unknown_shape_is_a_config_error():
    with pytest.raises(SftprepError):
        gemini.serialize(Conversation(), shape="exchange", ledger=Ledger("gemini"))

