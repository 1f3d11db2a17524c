"""OpenAI Responses codec: corpus and fixture round trips, parse results, bad input, the strict request
checker, and writing conversations of other origins into Responses bodies."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from corpus import iter_interactions, params, request_bodies, response_bodies, tau_bench_trajectories
from formats.accept_openai_responses import check_request
from pipeline.conversation import (Conversation, Media, Message, Meta, Opaque, Reasoning, Text, Tool, ToolCall,
                                   ToolResult)
from pipeline.errors import ParseError, SftprepError, ShapeError
from pipeline.formats import openai_responses as codec
from pipeline.ids import CallIds
from pipeline.ledger import Ledger
from strategies import conversations

NAME = "openai-responses"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "openai_responses"
FIXTURE_FILES = sorted(FIXTURES.glob("*.json"))
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _mine(kind, items):
    out = []
    for key, body in items:
        found = codec.detect(body)
        if found is not None:
            out.append((f"{kind}:{key}", (found.shape, body)))
    return out


CORPUS_RECORDS = (_mine("request", request_bodies()) + _mine("response", response_bodies())
                  + _mine("messages", tau_bench_trajectories()))


def _corpus(kind: str, name_part: str):
    """The one corpus record of that kind (request, response) whose key contains `name_part`."""
    found = [value for key, value in CORPUS_RECORDS if key.startswith(kind + ":") and name_part in key]
    assert len(found) == 1, f"{name_part}: {len(found)} records"
    return found[0]


def _round_trip(body, shape):
    before = copy.deepcopy(body)
    conv = codec.parse(body, shape=shape)
    ledger = Ledger(NAME)
    out = codec.serialize(conv, shape=shape, ledger=ledger)
    assert body == before, "parse or serialize mutated its input"
    return conv, out, ledger


def _write(conv: Conversation, shape: str = "request") -> tuple[object, list[tuple[str, str]]]:
    ledger = Ledger(NAME)
    body = codec.serialize(conv, shape=shape, ledger=ledger)
    return body, [(e.kind, e.path) for e in ledger.entries]


def _fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


# --- 1. corpus ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("record", params(CORPUS_RECORDS))
def test_corpus_round_trip(record):
    shape, body = record
    conv, out, ledger = _round_trip(body, shape)
    assert out == body
    assert ledger.entries == []
    assert conv.meta.provider == NAME and conv.meta.shape == shape


def test_corpus_detection(corpus):
    folders = {key.split(":")[1].split("/")[0] for key, _ in CORPUS_RECORDS}
    assert {"pydantic_ai_openai_responses", "vercel_ai_openai_responses"} <= folders
    for key, (shape, body) in CORPUS_RECORDS:
        found = codec.detect(body)
        if "openai_responses" in key:
            assert found.certain, key
        else:  # plain role/content chat trajectories: legitimately ambiguous, never certain
            assert key.startswith("messages:tau_bench") and not found.certain, key
    # Every JSON body sent to /v1/responses (and /compact, /input_tokens) is claimed, nothing else is.
    for key, interaction in iter_interactions():
        body = interaction["request"]["body"]
        uri = interaction["request"]["uri"].split("?")[0]
        if isinstance(body, dict):
            claimed = codec.detect(body) is not None
            assert claimed == ("/responses" in uri), key
    shapes = [shape for _, (shape, _) in CORPUS_RECORDS]
    assert shapes.count("request") == 127 and shapes.count("response") >= 130


def test_corpus_reasoning_replay_and_hosted_search(corpus):
    _, body = _corpus("request", "test_openai_responses_model_web_search_tool.json#1")
    conv = codec.parse(body)
    assert [m.role for m in conv.messages] == ["user", "assistant", "user"]
    assert conv.system == (Text("You are a helpful assistant."),)
    reasoning, search, reasoning2, answer = conv.messages[1].blocks
    assert isinstance(reasoning, Reasoning) and isinstance(reasoning2, Reasoning)
    assert reasoning.origin == NAME and reasoning.item_id == body["input"][1]["id"]
    assert reasoning.encrypted == body["input"][1]["encrypted_content"]  # byte for byte
    assert isinstance(search, Opaque) and search.item_type == "web_search_call" and search.role_hint == "call"
    assert search.payload == body["input"][2]
    assert isinstance(answer, Text) and answer.text.startswith("Today (Tuesday, September 16, 2025)")


def test_corpus_tool_call_pairs_and_image_follow_up(corpus):
    _, body = _corpus("request", "[tool_return_content-binary-image-openai_responses].json#1")
    conv = codec.parse(body)
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "user"]
    call = conv.messages[1].blocks[1]
    result = conv.messages[2].blocks[0]
    assert isinstance(call, ToolCall) and call.name == "get_file" and call.arguments == {}
    assert call.raw_arguments == "{}" and call.provider_id == body["input"][2]["call_id"]
    assert result.call_id == call.id and result.provider_id == call.provider_id and result.matched_by == "id"
    assert result.content == (Text("File attached"),)
    (image,) = conv.messages[3].blocks
    assert isinstance(image, Media) and image.kind == "image" and image.media_type == "image/jpeg"
    assert body["input"][4]["content"][0]["image_url"].endswith(image.data)


def test_corpus_phase_documents_and_compaction(corpus):
    _, body = _corpus("request", "test_openai_responses_phase_live.json#1")
    commentary = codec.parse(body).messages[1].blocks[1]
    assert commentary.extras[NAME]["message.phase"] == "commentary"
    _, body = _corpus("request", "test_openai_responses_document_as_binary_content_input.json#0")
    document = codec.parse(body).messages[0].blocks[1]
    assert (document.kind, document.media_type, document.filename) == ("document", "application/pdf", "filename.pdf")
    _, body = _corpus("request", "test_openai_responses_compact_messages.json#3")
    compaction = codec.parse(body).messages[0].blocks[0]
    assert isinstance(compaction, Opaque) and compaction.item_type == "compaction"


def test_corpus_response_objects(corpus):
    shape, body = _corpus("response", "vercel_ai_openai_responses/openai-custom-tool.1.json")
    conv = codec.parse(body, shape=shape)
    (call,) = conv.messages[0].blocks
    assert call.kind == "custom" and call.arguments == "SELECT * FROM users WHERE age > 25"
    assert conv.tools[0].kind == "custom" and conv.meta.response_id == "resp_custom_tool_test_001"
    assert conv.meta.stop_reason == "completed" and conv.meta.usage["total_tokens"] == 70
    shape, body = _corpus("response", "vercel_ai_openai_responses/openai-shell-container.1.json")
    hints = [(b.item_type, b.role_hint) for m in codec.parse(body).messages for b in m.blocks if isinstance(b, Opaque)]
    assert ("shell_call", "call") in hints and ("shell_call_output", "result") in hints


# --- 2. fixtures -------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_round_trip(path):
    body = json.loads(path.read_text())
    found = codec.detect(body)
    assert found is not None and found.certain
    _, out, ledger = _round_trip(body, found.shape)
    assert out == body
    assert ledger.entries == []
    if found.shape == "request":
        assert check_request(body) == []


def test_fixture_tools_and_calls():
    body = _fixture("request_tools.json")
    conv = codec.parse(body)
    assert conv.system == (Text("You are a travel assistant. Use the tools to answer."),)
    assert conv.developer == (Text("Answer in metric units.", form=conv.developer[0].form),)
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
    reasoning, commentary, oslo, bergen = conv.messages[1].blocks
    assert reasoning.summary == ("**Checking two cities**\n\nI should call get_weather twice.",)
    assert reasoning.encrypted == "gAAAAABo-opaque-state-1==" and reasoning.item_id == "rs_0a1b2c3d4e5f"
    assert commentary.text == "Let me check both cities."
    assert commentary.extras[NAME] == {"message.phase": "commentary"}
    assert (oslo.arguments, oslo.raw_arguments) == ({"city": "Oslo"}, '{"city": "Oslo"}')
    assert bergen.arguments == {"city": "Bergen", "units": "metric"} and oslo.id != bergen.id
    r_oslo, r_bergen = conv.messages[2].blocks
    assert (r_oslo.call_id, r_bergen.call_id) == (oslo.id, bergen.id)
    assert r_oslo.content == (Text("4°C, overcast", form=r_oslo.content[0].form),)
    assert [type(c) for c in r_bergen.content] == [Text, Media]
    assert r_bergen.content[1].url == "https://example.com/bergen-radar.png"
    first, second = conv.messages[3].blocks
    assert first.text == "Oslo: 4°C and overcast. " and second.extras[NAME]["annotations"][0]["url"] == "https://www.yr.no/"
    (sql,) = conv.messages[5].blocks
    assert sql.kind == "custom" and sql.arguments == "SELECT day FROM weather WHERE rain > 0"
    assert conv.messages[6].blocks[0].call_id == sql.id and conv.messages[6].blocks[0].kind == "custom"
    user = conv.messages[0].blocks
    assert (user[1].kind, user[1].url) == ("image", "https://example.com/fjord.jpg")
    assert (user[2].media_type, user[2].data, user[2].extras[NAME]) == ("image/png", PNG, {"detail": "high"})
    assert (user[3].kind, user[3].filename, user[3].media_type) == ("document", "itinerary.pdf", "application/pdf")
    assert user[4].file_id == "file-abc123"
    assert [(t.kind, t.name) for t in conv.tools] == [("function", "get_weather"), ("custom", "write_sql"),
                                                      ("hosted", "web_search"), ("hosted", "file_search"),
                                                      ("hosted", "mcp")]
    assert conv.tools[0].extras[NAME] == {"strict": False}
    assert conv.extras[NAME]["tool_choice"] == "auto" and conv.meta.model == "gpt-5"


def test_fixture_builtin_items():
    conv = codec.parse(_fixture("request_builtin_items.json"))
    assert conv.system[0].text == "You operate a workstation." and conv.developer[0].text == "Ask before deleting files."
    roles = [m.role for m in conv.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant", "tool",
                     "assistant", "user", "assistant", "tool", "developer", "assistant", "user"]
    opaque = [(b.item_type, b.role_hint) for m in conv.messages for b in m.blocks if isinstance(b, Opaque)]
    assert opaque[:5] == [("web_search_call", "call"), ("file_search_call", "call"), ("code_interpreter_call", "call"),
                          ("image_generation_call", "call"), ("computer_call", "call")]
    assert ("mcp_approval_response", "other") in opaque and ("additional_tools", "other") in opaque
    assert ("item_reference", "other") in opaque  # both with and without its type
    *_, refusal = conv.messages[-2].blocks
    assert refusal.text == "I will not delete the home directory." and refusal.extras[NAME]["refusal"] is True
    assert conv.extras[NAME]["previous_response_id"] == "resp_prev_001"
    assert [t.kind for t in conv.tools] == ["hosted"] * 8


def test_fixture_bare_item_list():
    conv = codec.parse(_fixture("messages_items.json"))
    assert conv.meta.shape == "messages" and conv.system[0].text == "You are terse."
    reasoning, answer = conv.messages[1].blocks
    assert reasoning.text == "17 * 3 = 51. Double-check: 51." and reasoning.summary == ()
    assert answer.text == "51"
    assert conv.messages[2].blocks == ()  # content: [] kept as an empty user turn
    (audio,) = conv.messages[4].blocks
    assert (audio.kind, audio.media_type, audio.data) == ("audio", "audio/wav", "UklGRiQAAABXQVZF")


def test_fixture_responses():
    conv = codec.parse(_fixture("response_function_call.json"))
    meta = conv.meta
    assert (meta.shape, meta.response_id, meta.model, meta.stop_reason) == (
        "response", "resp_0f1e2d3c", "gpt-5-2025-08-07", "completed")
    assert meta.created == "2026-01-01T00:00:00+00:00" and meta.usage["total_tokens"] == 200
    (turn,) = conv.messages
    assert [type(b) for b in turn.blocks] == [Reasoning, Text, ToolCall, ToolCall]
    broken = turn.blocks[3]
    assert broken.arguments is UNSET and not broken.arguments_valid and broken.raw_arguments == '{"city":"Bergen"'
    assert conv.system == (Text("You are a travel assistant."),) and conv.tools[0].description is None
    conv = codec.parse(_fixture("response_incomplete.json"))
    assert conv.meta.stop_reason == "max_output_tokens"


def test_fixture_string_input():
    body = _fixture("request_string_input.json")
    conv = codec.parse(body)
    assert conv.system == () and conv.messages == (Message(role="user", blocks=(Text("Say hello in French."),)),)
    assert conv.extras[NAME] == {"model": "gpt-4.1-mini", "temperature": 0.2, "stream": True}


@pytest.mark.parametrize("items", [
    [{"role": "assistant", "content": [{"type": "output_text", "text": "a"}, {"type": "output_text", "text": "b"}]}],
    [{"type": "function_call_output", "call_id": "c", "name": "f", "output": [{"type": "input_text", "text": "x"}]}],
    [{"type": "function_call_output", "call_id": "c", "output": []}],
    [{"type": "reasoning"}],
    [{"role": "user", "content": [{"type": "input_text", "text": "a"}]}, {"role": "user", "content": "b"}],
    [{"type": "reasoning", "summary": [], "content": [{"type": "text", "text": "a"},
                                                       {"type": "reasoning_text", "text": "b"}]}],
], ids=["parts-without-annotations", "named-output", "empty-output-list", "reasoning-without-id", "two-users",
        "reasoning-text-parts"])
def test_edge_layouts_round_trip(items):
    conv, out, ledger = _round_trip(items, "messages")
    assert out == items and ledger.entries == []


def test_reasoning_in_plain_text_parts_is_visible_reasoning():
    """Codex CLI writes reasoning it got from Chat Completions servers as `text` content parts."""
    item = {"type": "reasoning", "summary": [], "content": [{"type": "text", "text": "Check the tests first."}],
            "encrypted_content": None}
    [message] = codec.parse([item], shape="messages").messages
    assert message.blocks[0].text == "Check the tests first."


def test_orphan_result_kept():
    conv = codec.parse({"model": "gpt-5", "input": [
        {"type": "function_call_output", "call_id": "call_gone", "output": "late"}]})
    (result,) = conv.messages[0].blocks
    assert result.call_id is None and result.provider_id == "call_gone" and result.matched_by is None
    body, ledger = _write(conv)
    assert body["input"][0]["call_id"] == "call_gone" and ledger == []


# --- 3. bad input ------------------------------------------------------------------------------------

def _body(*items, **extra):
    return {"model": "gpt-5", "input": list(items), **extra}


CALL = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}


@pytest.mark.parametrize("body, path, words", [
    (_body({"type": "function_call", "call_id": "c1", "arguments": "{}"}), "$.input[0]", "'name'"),
    (_body({**CALL, "arguments": {"a": 1}}), "$.input[0].arguments", "must be a string"),
    (_body({"role": "user"}), "$.input[0]", "'content'"),
    (_body({"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": 3}]}),
     "$.input[0].content[1].text", "must be a string"),
    (_body({"role": "tool", "content": "x"}), "$.input[0].role", "unknown role"),
    (_body({"content": "x"}), "$.input[0]", "'type'"),
    (_body("hello"), "$.input[0]", "must be an object"),
    (_body(CALL, {"type": "function_call_output", "call_id": "c1", "output": {"ok": True}}), "$.input[1].output",
     "must be a string or an array"),
    (_body({"type": "reasoning", "id": "rs_1", "summary": "short"}), "$.input[0].summary", "must be an array"),
    (_body({"role": "user", "content": [{"type": "input_image", "image_url": 7}]}), "$.input[0].content[0].image_url",
     "must be a string"),
    (_body(tools=[{"type": "function", "name": "f", "parameters": ["x"]}]), "$.tools[0].parameters",
     "must be an object"),
    (_body(tools=[{"name": "f"}]), "$.tools[0]", "'type'"),
    (_body(tools={"type": "web_search"}), "$.tools", "must be an array"),
    (_body(instructions=42), "$.instructions", "must be a string or an array"),
    (_body({"role": "user", "content": [{"text": "no type"}]}), "$.input[0].content[0]", "'type'"),
])
def test_bad_request_names_path(body, path, words):
    with pytest.raises(ParseError) as info:
        codec.parse(body, shape=None if body["input"] != ["hello"] else "request")
    assert info.value.path == path
    assert words in info.value.message


def test_bad_response_and_messages_name_path():
    with pytest.raises(ParseError) as info:
        codec.parse({"object": "response", "id": "resp_1"}, shape="response")
    assert (info.value.path, info.value.message) == ("$", "missing required field 'output'")
    with pytest.raises(ParseError) as info:
        codec.parse([{"role": "user", "content": "hi"}, {**CALL, "call_id": 5}], shape="messages")
    assert info.value.path == "$[1].call_id"
    with pytest.raises(ParseError) as info:
        codec.parse([1, 2], shape="request")
    assert info.value.path == "$"


def test_unknown_types_kept_or_refused():
    body = _body({"role": "user", "content": [{"type": "input_video", "video_url": "https://v/1.mp4"}]},
                 {"type": "hologram_call", "id": "hg_1", "status": "completed"})
    conv, out, ledger = _round_trip(body, "request")
    assert out == body and ledger.entries == []
    (part,) = conv.messages[0].blocks
    assert isinstance(part, Opaque) and part.item_type == "input_video" and part.payload == body["input"][0]["content"][0]
    (item,) = conv.messages[1].blocks
    assert (item.item_type, item.role_hint, item.payload) == ("hologram_call", "call", body["input"][1])
    with pytest.raises(ParseError) as info:
        codec.parse(body, strict=True)
    assert (info.value.code, info.value.path) == ("unknown_block", "$.input[0].content[0].type")
    with pytest.raises(ParseError) as info:
        codec.parse(_body({"type": "hologram_call"}), shape="request", strict=True)
    assert (info.value.code, info.value.path) == ("unknown_block", "$.input[0].type")
    # Known hosted items are not "unknown": strict mode keeps them.
    codec.parse(_fixture("request_builtin_items.json"), strict=True)


def test_not_responses_is_a_shape_error():
    with pytest.raises(ShapeError):
        codec.parse({"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(ShapeError):
        codec.parse([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])


def test_detect_shapes_and_certainty():
    d = codec.detect
    assert d([{"role": "user", "content": "hi"}]) == (NAME, "messages", False)
    assert d([{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]) == (NAME, "messages", True)
    assert d([{"role": "user", "content": "hi"}, CALL]) == (NAME, "messages", True)
    assert d({"model": "gpt-5", "input": "hi"}) == (NAME, "request", False)  # embeddings look the same
    assert d({"model": "gpt-5", "input": "hi", "instructions": "x"}) == (NAME, "request", True)
    assert d({"model": "gpt-5", "input": []}) == (NAME, "request", True)
    assert d({"model": "gpt-5", "previous_response_id": "resp_1"}) == (NAME, "request", True)
    assert d({"model": "gpt-5", "input": [{"role": "tool", "content": "x"}]}) == (NAME, "request", True)  # broken
    assert d({"object": "response", "output": []}) == (NAME, "response", True)
    assert d({"object": "response.compaction", "output": []}) == (NAME, "response", True)
    # Other formats, other endpoints and nonsense: not ours.
    for other in ({"model": "m", "messages": []}, {"contents": []}, {"input": ["a", "b"], "model": "emb"},
                  {"input": [[1, 2, 3]]}, {"input": [{"type": "text", "text": "moderate me"}]},
                  [{"role": "tool", "tool_call_id": "1", "content": "x"}],
                  [{"role": "assistant", "content": None, "tool_calls": []}],
                  [{"role": "model", "parts": [{"text": "x"}]}], [{"type": "text", "text": "x"}],
                  [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}],
                  {"object": "chat.completion", "choices": []}, {"type": "message", "content": []},
                  [], {}, "input", 3, None):
        assert d(other) is None, other


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=25)
# Keys and type names of this format, so random records reach deep into the parser.
VOCAB = ["type", "role", "content", "input", "output", "instructions", "tools", "call_id", "name", "arguments",
         "id", "status", "summary", "text", "image_url", "file_data", "file_id", "filename", "encrypted_content",
         "input_audio", "data", "format", "parameters", "description", "object", "model", "annotations", "detail"]
TYPES = ["message", "function_call", "function_call_output", "reasoning", "custom_tool_call",
         "custom_tool_call_output", "input_text", "output_text", "input_image", "input_file", "input_audio",
         "refusal", "summary_text", "reasoning_text", "web_search_call", "function", "custom", "response", "user",
         "assistant", "system", "developer", "data:image/png;base64,AAAA", "{}", "{\"a\": 1}", "{"]
near_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(TYPES) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(VOCAB), inner, max_size=6),
    max_leaves=40)


near_items = st.fixed_dictionaries({"type": st.sampled_from(TYPES)},
                                   optional={k: near_values for k in VOCAB if k != "type"})
near_bodies = st.fixed_dictionaries({"input": st.lists(near_items, max_size=6)},
                                    optional={"instructions": near_values, "model": st.text(max_size=3),
                                              "tools": st.lists(near_values, max_size=3)})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(json_values, near_values, near_bodies, st.lists(near_items, max_size=6)))
def test_detect_never_raises_and_parse_raises_only_project_errors(value):
    codec.detect(value)
    for shape in ("request", "messages", "response"):
        try:
            conv = codec.parse(value, shape=shape)
        except SftprepError:
            continue
        # Whatever parse accepts, serialize gives back exactly, and every shape can be written.
        ledger = Ledger(NAME)
        assert codec.serialize(conv, shape=shape, ledger=ledger) == value and ledger.entries == []
        for other in ("request", "messages", "response"):
            codec.serialize(conv, shape=other, ledger=Ledger(NAME))


# Well-formed items with every optional key toggled: whatever the layout, the round trip is exact.
_str = st.sampled_from(["", "a", "Oslo", "{}", '{"a": 1}', "{", "data:image/png;base64,AAAA", "x" * 70])
_opt = st.one_of(st.none(), _str, st.just([]), st.just([{"type": "url_citation", "url": "u"}]))
_nstr = st.one_of(st.none(), _str)
_parts = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text"]), "text": _str},
                          optional={"annotations": _opt, "logprobs": _opt, "extra": _opt}),
    st.fixed_dictionaries({"type": st.just("refusal"), "refusal": _str}),
    st.fixed_dictionaries({"type": st.just("input_image")},
                          optional={"image_url": _nstr, "file_id": _nstr, "detail": st.sampled_from([None, "auto", "low"])}),
    st.fixed_dictionaries({"type": st.just("input_file")},
                          optional={"file_data": _nstr, "file_url": _nstr, "filename": _nstr, "file_id": _nstr}),
    st.fixed_dictionaries({"type": st.just("input_audio"),
                           "input_audio": st.fixed_dictionaries({"data": _str, "format": st.sampled_from(["wav", "ogg"])})}),
    st.fixed_dictionaries({"type": st.just("input_hologram")}, optional={"x": _opt}))
_layout = {"type": st.just("message"), "id": _opt, "status": _opt, "phase": _opt}
_items = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "developer"]),
                           "content": st.one_of(_str, st.lists(_parts, max_size=3))}, optional=_layout),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": st.sampled_from(["c1", "c2"]), "name": _str,
                           "arguments": _str}, optional={"id": _opt, "status": _opt, "namespace": _opt}),
    st.fixed_dictionaries({"type": st.just("custom_tool_call"), "call_id": st.sampled_from(["c1", "c2"]),
                           "name": _str, "input": _str}, optional={"id": _opt}),
    st.fixed_dictionaries({"type": st.sampled_from(["function_call_output", "custom_tool_call_output"]),
                           "output": st.one_of(_str, st.lists(_parts, max_size=3))},
                          optional={"call_id": st.sampled_from([None, "c1", "c2", "c9"]), "name": _nstr, "id": _opt,
                                    "status": _opt}),
    st.fixed_dictionaries({"type": st.just("reasoning")}, optional={
        "id": _nstr, "encrypted_content": _nstr, "status": _opt,
        "summary": st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": _str},
                                                  optional={"x": _opt}), max_size=2),
        "content": st.one_of(st.none(), st.lists(st.fixed_dictionaries(
            {"type": st.just("reasoning_text"), "text": _str}), max_size=3))}),
    st.fixed_dictionaries({"type": st.sampled_from(["web_search_call", "shell_call_output", "mcp_approval_response",
                                                    "additional_tools", "item_reference", "hologram"])},
                          optional={"id": _opt, "role": _opt}),
    st.fixed_dictionaries({"id": _str}))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_items, max_size=8), st.one_of(st.none(), _str))
def test_every_well_formed_layout_round_trips(items, instructions):
    body = {"model": "gpt-5", "input": items} if instructions is None else \
        {"model": "gpt-5", "instructions": instructions, "input": items}
    for shape, value in (("request", body), ("messages", items), ("response", {"object": "response", "output": items})):
        conv, out, ledger = _round_trip(value, shape)
        assert out == value and ledger.entries == []


# --- 4. the strict checker ---------------------------------------------------------------------------

def _corpus_requests(status: int):
    out = []
    for key, interaction in iter_interactions(("pydantic_ai_openai_responses",)):
        body = interaction["request"]["body"]
        if interaction["response"]["status"] == status and isinstance(body, dict) and codec.detect(body):
            uri = interaction["request"]["uri"]
            endpoint = "compact" if uri.endswith("/compact") else "input_tokens" if uri.endswith("/input_tokens") \
                else "create"
            out.append((key, (endpoint, body)))
    return out


@pytest.mark.parametrize("record", params(_corpus_requests(200)))
def test_checker_accepts_corpus_requests(record):
    endpoint, body = record
    assert check_request(body, endpoint=endpoint) == []


def test_checker_refuses_the_corpus_400s(corpus):
    reasons = {key.rsplit("__", 1)[1]: check_request(body) for key, (_, body) in _corpus_requests(400)}
    assert reasons == {
        "test_openai_responses_model_http_error.json#0": ["$.temperature: must be between 0 and 2, got -1"],
        "test_openai_responses_thinking_with_modified_history.json#1": [
            "$.input[1]: a reasoning item must be followed by the output item it belongs to (with its id)"],
    }


OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "ok"}


@pytest.mark.parametrize("body, expected", [
    (_body(CALL, OUTPUT, temperatur=1), "$.temperatur: unknown key"),
    (_body({"role": "user", "content": "hi", "name": "bob"}), "$.input[0]"),
    (_body({**CALL, "arguments": {"a": 1}}, OUTPUT), "$.input[0].arguments: must be a string"),
    (_body({"type": "function_call", "name": "f", "arguments": "{}"}), "missing required key 'call_id'"),
    (_body(CALL), "$.input[0]: function_call 'c1' has no function_call_output after it"),
    (_body(OUTPUT), "$.input[0].call_id: no earlier call has id 'c1'"),
    (_body(CALL, CALL, OUTPUT), "$.input[1].call_id: duplicate call id 'c1'"),
    (_body({**CALL, "call_id": "x" * 65}, {**OUTPUT, "call_id": "x" * 65}), "must be 1-64 characters, got 65"),
    (_body({**CALL, "arguments": "{oops"}, OUTPUT), "$.input[0].arguments: not valid JSON"),
    (_body({**CALL, "arguments": "[1]"}, OUTPUT), "$.input[0].arguments: must be a JSON object"),
    (_body({**CALL, "id": "toolu_01"}, OUTPUT), "$.input[0].id: 'toolu_01' is not an id OpenAI issued"),
    (_body({"role": "assistant", "content": [{"type": "input_text", "text": "hi"}]}),
     "$.input[0].content[0].type: an assistant message holds output_text or refusal"),
    (_body({"role": "user", "content": [{"type": "input_image", "detail": "auto"}]}), "needs image_url or file_id"),
    (_body({"role": "user", "content": [{"type": "input_file", "file_data": "data:application/pdf;base64,AA=="}]}),
     "$.input[0].content[0].filename: required with file_data"),
    (_body({"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]}),
     "missing required key 'detail'"),
    (_body({"type": "reasoning", "id": "rs_1", "summary": []}, {"role": "user", "content": "hi"}),
     "a reasoning item must be followed by the output item"),
    (_body(CALL, {**OUTPUT, "type": "custom_tool_call_output"}), "answered by function_call_output"),
    (_body(tool_choice={"type": "function", "name": "g"}, tools=[
        {"type": "function", "name": "f", "parameters": None, "strict": False}]), "'g' is not a function tool"),
    (_body(tools=[{"type": "function", "name": "f.g", "parameters": None, "strict": False}]), "must be 1-128 of"),
    (_body(tools=[{"type": "function", "name": "f", "parameters": {}}]), "missing required key 'strict'"),
    (_body(previous_response_id="resp_1", conversation="conv_1"), "cannot be used together"),
    (_body(stream="yes"), "$.stream"),
])
def test_checker_rejects_broken_bodies(body, expected):
    problems = check_request(body)
    assert any(expected in p for p in problems), problems


def test_checker_rejects_non_objects_and_knows_endpoints():
    assert check_request([]) == ["$: a request body must be an object"]
    assert check_request({"model": "gpt-5", "input": []}, endpoint="compact") == []
    assert check_request({"input": []}, endpoint="compact") == ["$: missing required key 'model' (ResponseCompactParams)"]


# --- 5. writing conversations of other origins ---------------------------------------------------------

WEATHER = Tool(name="get_weather", description="Weather for a city.",
               parameters={"type": "object", "properties": {"city": {"type": "string"}}})


def _call(ids: CallIds, city: str, provider_id: str | None, name: str = "get_weather") -> ToolCall:
    args = {"city": city}
    return ToolCall(id=ids.new(name, args), name=name, arguments=args, provider_id=provider_id)


def test_write_parallel_calls_text_around_and_errors():
    ids = CallIds()
    oslo, bergen = _call(ids, "Oslo", "toolu_01A"), _call(ids, "Bergen", "toolu_01B")
    conv = Conversation(system=(Text("Be brief."),), tools=(WEATHER,), messages=(
        Message(role="user", blocks=(Text("Weather in Oslo and Bergen?"),)),
        Message(role="assistant", blocks=(Text("Checking both."), oslo, bergen, Text("One moment."))),
        Message(role="tool", blocks=(
            ToolResult(call_id=oslo.id, provider_id="toolu_01A", content=(Text("4C"),), matched_by="id"),
            ToolResult(call_id=bergen.id, provider_id="toolu_01B", content=(Text("no data"),), is_error=True,
                       matched_by="id"))),
        Message(role="assistant", blocks=(Text("Oslo is 4C."),)),
    ))
    body, ledger = _write(conv)
    assert body == {
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Weather in Oslo and Bergen?"},
            {"role": "assistant", "content": "Checking both."},
            {"type": "function_call", "call_id": "toolu_01A", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
            {"type": "function_call", "call_id": "toolu_01B", "name": "get_weather", "arguments": '{"city":"Bergen"}'},
            {"role": "assistant", "content": "One moment."},
            {"type": "function_call_output", "call_id": "toolu_01A", "output": "4C"},
            {"type": "function_call_output", "call_id": "toolu_01B", "output": "Error: no data"},
            {"role": "assistant", "content": "Oslo is 4C."},
        ],
        "tools": [{"type": "function", "name": "get_weather", "description": "Weather for a city.",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": False}],
    }
    assert ledger == [("folded", "$.messages[2].blocks[1]")]
    assert check_request({"model": "gpt-5", **body}) == []
    back = codec.parse(body)
    assert [b.call_id for b in back.messages[2].blocks] == [b.id for b in back.messages[1].blocks[1:3]]


def test_write_calls_without_provider_ids_and_overlong_ids():
    ids = CallIds()
    first, second = _call(ids, "Oslo", None), _call(ids, "Rome", "x" * 80)
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("Two cities"),)),
        Message(role="assistant", blocks=(first, second)),
        Message(role="user", blocks=(
            ToolResult(call_id=first.id, name="get_weather", content=(Text("4C"),), matched_by="name_order"),
            ToolResult(call_id=second.id, provider_id="x" * 80, content=(Text("20C"),), matched_by="id"))),
    ))
    body, ledger = _write(conv)
    calls, outputs = body["input"][1:3], body["input"][3:5]
    assert [c["call_id"] for c in calls] == [first.id, second.id] == [o["call_id"] for o in outputs]
    assert ledger == [("synthesized", "$.messages[1].blocks[0]"), ("synthesized", "$.messages[1].blocks[1]"),
                      ("synthesized", "$.messages[2].blocks[0]"), ("synthesized", "$.messages[2].blocks[1]")]
    assert check_request({"model": "gpt-5", **body}) == []


def test_write_reused_provider_ids_get_unique_ids():
    ids = CallIds()
    first, again = _call(ids, "Oslo", "toolu_1"), _call(ids, "Rome", "toolu_1")
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("go"),)),
        Message(role="assistant", blocks=(first,)),
        Message(role="tool", blocks=(ToolResult(call_id=first.id, provider_id="toolu_1", content=(Text("a"),)),)),
        Message(role="assistant", blocks=(again,)),
        Message(role="tool", blocks=(ToolResult(call_id=again.id, provider_id="toolu_1", content=(Text("b"),)),)),
    ))
    body, ledger = _write(conv)
    assert [item["call_id"] for item in body["input"][1:]] == ["toolu_1", "toolu_1", again.id, again.id]
    assert ledger == [("synthesized", "$.messages[3].blocks[0]"), ("synthesized", "$.messages[4].blocks[0]")]
    assert check_request({"model": "gpt-5", **body}) == []


def test_write_image_results_and_other_media():
    ids = CallIds()
    shot = _call(ids, "Oslo", "call_1", name="screenshot")
    conv = Conversation(messages=(
        Message(role="user", blocks=(
            Text("Read these"),
            Media(kind="document", media_type="application/pdf", data="JVBERi0="),
            Media(kind="document", text="plain notes"),
            Media(kind="audio", media_type="audio/wav", data="UklGRg=="),
            Media(kind="image", url="https://example.com/a.png"))),
        Message(role="assistant", blocks=(shot, Media(kind="image", media_type="image/png", data=PNG))),
        Message(role="tool", blocks=(ToolResult(call_id=shot.id, provider_id="call_1", content=(
            Text("here"), Media(kind="image", media_type="image/png", data=PNG))),)),
    ))
    body, ledger = _write(conv)
    assert body["input"][0] == {"role": "user", "content": [
        {"type": "input_text", "text": "Read these"},
        {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "file.pdf"},
        {"type": "input_text", "text": "plain notes"},
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}]}
    assert body["input"][2]["output"] == [
        {"type": "input_text", "text": "here"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"}]
    assert ledger == [("synthesized", "$.messages[0].blocks[1]"), ("folded", "$.messages[0].blocks[2]"),
                      ("dropped", "$.messages[0].blocks[3]"), ("dropped", "$.messages[1].blocks[1]")]
    assert check_request({"model": "gpt-5", **body}) == []


def test_write_foreign_reasoning_opaque_and_extras():
    ids = CallIds()
    call = _call(ids, "Oslo", "toolu_9")
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("hi", extras={"anthropic": {"cache_control": {"type": "ephemeral"}}}),)),
        Message(role="assistant", blocks=(
            Reasoning(text="Let me think.", signature="c2lnbmF0dXJl", origin="anthropic"),
            Opaque(provider="anthropic", item_type="server_tool_use", payload={"type": "server_tool_use"},
                   role_hint="call"),
            Reasoning(summary=("short",), origin=NAME),  # ours, but without its item id: not replayable
            call)),
        Message(role="tool", blocks=(ToolResult(call_id=call.id, provider_id="toolu_9", content=(Text("ok"),)),)),
    ))
    body, ledger = _write(conv)
    assert [item.get("type", "message") for item in body["input"]] == ["message", "function_call",
                                                                        "function_call_output"]
    assert "Let me think." not in json.dumps(body) and "c2lnbmF0dXJl" not in json.dumps(body)
    assert ledger == [("dropped", "$.messages[0].blocks[0]"), ("dropped", "$.messages[1].blocks[1]"),
                      ("dropped", "$.messages[1].blocks[0]"), ("dropped", "$.messages[1].blocks[2]")]
    assert check_request({"model": "gpt-5", **body}) == []


def test_write_invalid_arguments_custom_calls_and_structured_output():
    ids = CallIds()
    broken = ToolCall(id=ids.new("f", raw_arguments='{"a": '), name="f", raw_arguments='{"a": ',
                      arguments_valid=False, provider_id="call_b")
    sql = ToolCall(id=ids.new("sql", "SELECT 1"), name="sql", arguments="SELECT 1", kind="custom", provider_id="call_s")
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("go"),)),
        Message(role="assistant", blocks=(broken, sql)),
        Message(role="tool", blocks=(
            ToolResult(call_id=broken.id, provider_id="call_b", output={"rows": 2}),
            ToolResult(call_id=sql.id, provider_id="call_s", kind="custom", content=(Text("1"),)))),
    ))
    body, ledger = _write(conv)
    assert body["input"][1]["arguments"] == '{"a": '  # the raw text is the truth, kept verbatim
    assert body["input"][2] == {"type": "custom_tool_call", "call_id": "call_s", "name": "sql", "input": "SELECT 1"}
    assert body["input"][3]["output"] == '{"rows":2}'
    assert body["input"][4] == {"type": "custom_tool_call_output", "call_id": "call_s", "output": "1"}
    assert ledger == [("folded", "$.messages[2].blocks[0]")]
    assert check_request({"model": "gpt-5", **body}) == ["$.input[1].arguments: not valid JSON"]


def test_write_other_providers_params():
    conv = Conversation(meta=Meta(provider="anthropic", model="claude-sonnet-4-5"), tools=(WEATHER,), extras={
        "anthropic": {"model": "claude-sonnet-4-5", "max_tokens": 1024, "temperature": 0.3,
                      "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                      "stop_sequences": ["END"]}},
        messages=(Message(role="user", blocks=(Text("hi"),)),))
    body, ledger = _write(conv)
    assert {k: body[k] for k in ("max_output_tokens", "temperature", "tool_choice", "parallel_tool_calls")} == {
        "max_output_tokens": 1024, "temperature": 0.3, "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False}
    assert "model" not in body and "stop_sequences" not in body
    assert ledger == [("dropped", "$.meta.model"), ("dropped", "$")]  # the model name, then stop_sequences
    conv = Conversation(tools=(WEATHER,), messages=conv.messages, extras={
        "gemini": {"generationConfig": {"maxOutputTokens": 100, "topP": 0.5, "stopSequences": ["x"]},
                   "toolConfig": {"functionCallingConfig": {"mode": "ANY"}}},
        "openai-chat": {"max_completion_tokens": 50, "n": 2,
                        "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}})
    body, ledger = _write(conv)
    assert (body["max_output_tokens"], body["top_p"], body["tool_choice"]) == (100, 0.5, "required")
    # Left over: generationConfig.stopSequences, then chat's max_completion_tokens, n and tool_choice
    # (gemini's max tokens and tool choice were mapped first).
    assert ledger == [("dropped", "$")] * 4
    assert check_request({"model": "gpt-5", **body}) == []


def test_write_hosted_tools_of_other_providers():
    conv = Conversation(tools=(WEATHER, Tool(name="web_search", kind="hosted", extras={
        "anthropic": {"type": "web_search_20250305", "max_uses": 3}})),
        messages=(Message(role="user", blocks=(Text("hi"),)),))
    body, ledger = _write(conv)
    assert [t["name"] for t in body["tools"]] == ["get_weather"]
    assert ledger == [("dropped", "$.tools[1]"), ("dropped", "$.tools[1]"), ("dropped", "$.tools[1]")]


def test_write_signatures_names_and_weights_are_ledgered():
    ids = CallIds()
    call = ToolCall(id=ids.new("f", {}), name="f", arguments={}, provider_id="g1", signature="CiQBsig")
    conv = Conversation(messages=(
        Message(role="user", name="alice", blocks=(Text("hi"),)),
        Message(role="assistant", weight=0, blocks=(Text("ok", signature="CiQBtext"), call)),
        Message(role="tool", blocks=(ToolResult(call_id=call.id, provider_id="g1", content=(
            Text("done"), Media(kind="image", url="https://x/y.png", filename="y.png", signature="CiQBm"))),)),
    ))
    body, ledger = _write(conv)
    assert "CiQB" not in json.dumps(body)
    assert ledger == [("dropped", "$.messages[0]"), ("dropped", "$.messages[1]"),
                      ("dropped", "$.messages[1].blocks[0]"), ("dropped", "$.messages[1].blocks[1]"),
                      ("dropped", "$.messages[2].blocks[0].content[1]"),
                      ("dropped", "$.messages[2].blocks[0].content[1]")]
    assert check_request({"model": "gpt-5", **body}) == []


def test_write_tool_message_text_moves_to_user():
    conv = Conversation(messages=(Message(role="tool", blocks=(Text("stray note"),)),))
    body, ledger = _write(conv)
    assert body["input"] == [{"role": "user", "content": "stray note"}]
    assert ledger == [("moved", "$.messages[0].blocks[0]")]


def test_write_response_from_other_origin():
    conv = Conversation(meta=Meta(provider="anthropic", shape="response", response_id="msg_01", model="claude-x",
                                  stop_reason="max_tokens", usage={"input_tokens": 3, "output_tokens": 5}),
                        messages=(Message(role="user", blocks=(Text("hi"),)),
                                  Message(role="assistant", blocks=(Text("Hel"),))))
    body, ledger = _write(conv, "response")
    assert body["id"] == "msg_01" and body["status"] == "incomplete" and "model" not in body
    (item,) = body["output"]
    assert item["type"] == "message" and item["id"].startswith("msg_") and item["content"] == [
        {"type": "output_text", "text": "Hel", "annotations": []}]
    assert ledger == [("dropped", "$.meta.model"), ("dropped", "$.messages[0]"),
                      ("synthesized", "$.messages[1]"), ("dropped", "$.meta.usage")]


def test_write_own_request_as_bare_items():
    conv = codec.parse(_fixture("request_tools.json"))
    items, ledger = _write(conv, "messages")
    assert items[0] == {"role": "system", "content": "You are a travel assistant. Use the tools to answer."}
    assert items[1:] == codec.serialize(conv, ledger=Ledger(NAME))["input"]
    kinds = [k for k, _ in ledger]
    assert kinds[0] == "moved" and kinds.count("dropped") == len(conv.extras[NAME]) + 1  # params and the tools


def test_response_written_as_request_keeps_request_parameters_only():
    conv = codec.parse(_fixture("response_incomplete.json"))
    body, ledger = _write(conv, "request")
    assert body == {"model": "gpt-4.1", "input": [_fixture("response_incomplete.json")["output"][0]]}
    assert sorted(p for _, p in ledger) == ["$"] * 6  # id, object, created_at, status, incomplete_details, usage


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(reasoning_origin="anthropic"))
def test_generated_conversations_make_accepted_bodies(conv):
    body, ledger = _write(conv)
    assert check_request({"model": "gpt-5", **body}) == []
    back = codec.parse(body)
    calls = [(b.name, b.arguments) for m in back.messages for b in m.blocks if isinstance(b, ToolCall)]
    assert calls == [(b.name, b.arguments) for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)]
    by_id = {b.id: b.name for m in back.messages for b in m.blocks if isinstance(b, ToolCall)}
    assert all(by_id.get(b.call_id) for m in back.messages for b in m.blocks if isinstance(b, ToolResult))
    reasoning = sum(isinstance(b, Reasoning) for m in conv.messages for b in m.blocks)
    errors = sum(b.is_error for m in conv.messages for b in m.blocks if isinstance(b, ToolResult))
    provider_ids = [b.provider_id for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)]
    reused = len(provider_ids) - len(set(provider_ids))  # each rewritten on the call and on its result
    assert sorted(k for k, _ in ledger) == sorted(["dropped"] * reasoning + ["folded"] * errors
                                                  + ["synthesized"] * 2 * reused)
