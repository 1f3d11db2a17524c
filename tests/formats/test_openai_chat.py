"""The OpenAI Chat Completions codec: exact round trips on the corpus and on fixtures, what parse
builds, bad input, the strict request checker, and conversion into Chat from canonical conversations."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from corpus import iter_interactions, params, request_bodies, response_bodies, tau_bench_trajectories
from formats.accept_openai_chat import check_request
from pipeline.conversation import (
    Conversation, Media, Message, Meta, Opaque, Reasoning, Text, Tool, ToolCall, ToolResult,
)
from pipeline.errors import ParseError, SftprepError, ShapeError
from pipeline.formats import openai_chat as oc
from pipeline.ids import CallIds
from pipeline.ledger import Ledger

NAME = oc.NAME
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "openai_chat"


def round_trip(body, shape=None):
    shape = shape or oc.detect(body).shape
    conv = oc.parse(body, shape=shape)
    ledger = Ledger(NAME)
    out = oc.serialize(conv, shape=shape, ledger=ledger)
    return conv, out, ledger.entries


def write(conv, shape="request"):
    ledger = Ledger(NAME)
    body = oc.serialize(conv, shape=shape, ledger=ledger)
    return body, [(e.kind, e.path) for e in ledger.entries]


def kinds(message):
    return [type(b).__name__ for b in message.blocks]


def fixture(name):
    return json.loads((FIXTURES / name).read_text())


# --- 1. corpus ------------------------------------------------------------------------------------

def _mine(items):
    return [(key, body) for key, body in items if oc.detect(body) is not None]


@pytest.mark.parametrize("body", params(_mine(request_bodies())))
def test_corpus_request_round_trips(body):
    assert oc.detect(body).shape == "request"
    _, out, entries = round_trip(body)
    assert entries == []
    assert out == body


@pytest.mark.parametrize("body", params(_mine(response_bodies())))
def test_corpus_response_round_trips(body):
    assert oc.detect(body) == (NAME, "response", True)
    _, out, entries = round_trip(body)
    assert entries == []
    assert out == body


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()))
def test_tau_bench_trajectory_round_trips(traj):
    assert oc.detect(traj).shape == "messages"
    conv, out, entries = round_trip(traj, "messages")
    assert entries == []
    assert out == traj
    # Every call is answered by a result paired by id, and every result names its call.
    calls = {b.id for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)}
    results = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolResult)]
    assert len(results) == len(calls)
    assert {r.call_id for r in results} == calls
    assert all(r.matched_by == "id" for r in results)


def _interaction(name, index=0, side="request"):
    for key, it in iter_interactions():
        if key.endswith(f"{name}#{index}"):
            return it[side]["body"]
    pytest.skip(f"corpus record {name} not found")


def test_corpus_tau_bench_null_content_and_empty_arguments(corpus):
    def has_empty_arguments(traj):
        return any(c["function"]["arguments"] == "{}" for m in traj for c in m.get("tool_calls") or ())

    key, traj = next((k, t) for k, t in tau_bench_trajectories() if has_empty_arguments(t))
    conv = oc.parse(traj, shape="messages")
    assert conv.system and conv.system[0].text.startswith("# Airline Agent Policy")
    i = next(i for i, m in enumerate(traj) if m["role"] == "assistant" and m.get("tool_calls") and m["content"] is None)
    message = conv.messages[i - 1]  # the leading system message went to conv.system
    assert kinds(message) == ["ToolCall"] * len(traj[i]["tool_calls"])
    call = message.blocks[0]
    assert call.provider_id == traj[i]["tool_calls"][0]["id"]
    assert call.raw_arguments == traj[i]["tool_calls"][0]["function"]["arguments"]
    result = conv.messages[i].blocks[0]
    assert isinstance(result, ToolResult) and result.call_id == call.id and result.name == call.name
    empty = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolCall) and b.raw_arguments == "{}"]
    assert empty and all(b.arguments == {} and b.arguments_valid for b in empty), key


def test_corpus_groq_reasoning_response(corpus):
    body = _interaction("test_reasoning_wire_contract[groq-gpt-oss-thinking-high].json", side="response")
    conv = oc.parse(body)
    (message,) = conv.messages
    assert isinstance(message.blocks[0], Reasoning)
    assert message.blocks[0].origin == NAME
    assert message.blocks[0].text == body["choices"][0]["message"]["reasoning"]
    assert conv.meta.model == body["model"] and conv.meta.response_id == body["id"]
    assert conv.meta.stop_reason == body["choices"][0]["finish_reason"]
    assert conv.meta.usage == body["usage"]


def test_corpus_mistral_thinking_part(corpus):
    body = _interaction("test_reasoning_wire_contract[mistral-small-thinking-high].json", side="response")
    (message,) = oc.parse(body).messages
    assert kinds(message) == ["Reasoning", "Text"]
    assert message.blocks[0].text.startswith("The user is asking for the result of 2+2")
    assert message.blocks[1].text == "4"


def test_corpus_gemini_compat_response_keeps_empty_id_and_signature(corpus):
    body = _interaction("test_compatible_api_with_tool_calls_without_id.json", side="response")
    conv = oc.parse(body)
    call = conv.messages[0].blocks[0]
    assert isinstance(call, ToolCall) and call.provider_id == "" and call.arguments == {}
    assert "extra_content" in conv.messages[0].extras[NAME]  # Gemini's thought signature, kept as data


def test_corpus_tool_image_moved_to_user_message(corpus):
    body = _interaction("test_multimodal_tool_return_matrix[tool_return_content-url-image-openai_chat].json", 1)
    conv = oc.parse(body)
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "user"]
    image = conv.messages[3].blocks[0]
    assert isinstance(image, Media) and image.kind == "image" and image.url.endswith("1.png")
    assert conv.messages[2].blocks[0].call_id == conv.messages[1].blocks[0].id


def test_corpus_audio_and_pdf_inputs(corpus):
    audio = oc.parse(_interaction("test_audio_as_binary_content_input.json")).messages[0].blocks[1]
    assert isinstance(audio, Media) and audio.kind == "audio" and audio.media_type == "audio/mpeg"
    pdf = oc.parse(_interaction("test_document_as_binary_content_input.json")).messages[0].blocks[1]
    assert isinstance(pdf, Media) and pdf.kind == "document" and pdf.media_type == "application/pdf"
    assert pdf.filename == "filename.pdf" and pdf.data.startswith("JVBERi0")


def test_corpus_mistral_untyped_tools_and_call_index(corpus):
    body = _interaction("test_tool_choice_matrix[auto-mistral].json", 1)
    conv = oc.parse(body)
    assert conv.tools[0].name == "get_weather" and conv.tools[0].kind == "function"
    call = conv.messages[1].blocks[0]
    assert call.extras[NAME] == {"index": 0}
    assert conv.messages[1].extras[NAME] == {"prefix": False}


def _accepted_chat_bodies():
    out = []
    for key, it in iter_interactions(("pydantic_ai_openai_chat", "pydantic_ai_google")):
        body = it["request"].get("body")
        if isinstance(body, dict) and it["response"]["status"] == 200 and oc.detect(body) is not None:
            out.append((key, (body, urlparse(it["request"]["uri"]).netloc)))
    return out


@pytest.mark.parametrize("record", params(_accepted_chat_bodies()))
def test_checker_accepts_corpus_bodies_the_api_accepted(record):
    body, host = record
    # Bodies sent to OpenAI itself are checked strictly; other servers' bodies with their extensions.
    assert check_request(body, compat=host != "api.openai.com") == []


# --- 2. fixtures ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_fixture_round_trips(name):
    body = fixture(name)
    _, out, entries = round_trip(body)
    assert entries == []
    assert out == body
    if name.startswith("request_"):
        # `x_` keys are deliberately unknown to the API: the codec must keep them, the checker flag them.
        flagged = [e for e in check_request(body, compat="reasoning" in name) if not e.startswith("$.x_")]
        assert flagged == []


def test_fixture_parallel_calls():
    conv = oc.parse(fixture("request_parallel_calls.json"))
    assert conv.meta == Meta(provider=NAME, shape="request", model="gpt-4.1")
    assert [b.text for b in conv.system] == ["You are a travel assistant."]
    assert [b.text for b in conv.developer] == ["Answer in metric units."]
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "tool", "assistant", "system", "user"]
    assert conv.messages[0].name == "kari"
    first, second = conv.messages[1].blocks
    assert (first.name, first.arguments, first.provider_id) == ("get_weather", {"city": "Oslo"}, "call_oslo01")
    assert second.raw_arguments == '{"city":"Bergen","unit":"c"}'
    assert first.id != second.id and first.id.startswith("call_")
    r1, r2 = conv.messages[2].blocks[0], conv.messages[3].blocks[0]
    assert (r1.call_id, r1.provider_id, r1.matched_by) == (first.id, "call_oslo01", "id")
    assert r2.call_id == second.id and [t.text for t in r2.content] == ["7C", "rain"]
    assert conv.tools[0].parameters["required"] == ["city"] and conv.tools[0].extras[NAME] == {"strict": False}
    params_ = conv.extras[NAME]
    assert params_["x_gateway_trace"] == "abc-123" and params_["stream_options"] == {"include_usage": True}


def test_fixture_multimodal_parts():
    conv = oc.parse(fixture("request_multimodal.json"))
    assert [b.text for b in conv.system] == ["Describe inputs precisely.", "Be brief."]
    text, url_image, data_image, audio, file_id, pdf = conv.messages[0].blocks
    assert isinstance(text, Text)
    assert (url_image.kind, url_image.url, url_image.extras[NAME]) == ("image", "https://example.com/cat.png", {"detail": "high"})
    assert (data_image.media_type, data_image.url) == ("image/png", None) and data_image.data.startswith("iVBOR")
    assert (audio.kind, audio.media_type) == ("audio", "audio/wav")
    assert (file_id.kind, file_id.file_id) == ("file", "file-6F2ksmvXxt4VdoqmHRw6kL")
    assert (pdf.kind, pdf.media_type, pdf.filename) == ("document", "application/pdf", "report.pdf")
    assert kinds(conv.messages[1]) == ["Text", "Text"]


def test_fixture_legacy_functions_pair_by_name_and_order():
    conv = oc.parse(fixture("request_legacy_functions.json"))
    calls = [m.blocks[0] for m in conv.messages if m.role == "assistant" and isinstance(m.blocks[0], ToolCall)]
    results = [m.blocks[0] for m in conv.messages if m.role == "tool"]
    assert [c.provider_id for c in calls] == [None, None]
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert all(r.matched_by == "name_order" for r in results)
    assert conv.meta.notes and "name and order" in conv.meta.notes[0]
    assert conv.tools[0].name == "convert"


def test_legacy_ambiguous_pairing_refused_in_strict_mode():
    body = {"model": "m", "messages": [
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{\"a\":1}"}},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{\"a\":2}"}},
        {"role": "function", "name": "f", "content": "one"}]}
    assert oc.parse(body).messages[2].blocks[0].matched_by == "name_order"
    with pytest.raises(ParseError) as err:
        oc.parse(body, strict=True)
    assert err.value.code == "ambiguous_pairing" and err.value.path == "$.messages[2]"


def test_fixture_custom_tool_call():
    conv = oc.parse(fixture("request_custom_tool.json"))
    assert [t.kind for t in conv.tools] == ["custom", "custom"]
    assert conv.tools[1].extras[NAME]["format"]["type"] == "grammar"
    text, call = conv.messages[1].blocks
    assert text.text == "Running it."
    assert (call.kind, call.name, call.arguments) == ("custom", "run_python", "for i in range(1, 4):\n    print(i)")
    assert conv.messages[2].blocks[0].call_id == call.id


def test_fixture_refusal_audio_reasoning_prefix():
    conv = oc.parse(fixture("request_refusal_reasoning_prefix.json"))
    refusal = conv.messages[1].blocks[0]
    assert refusal.text == "I can't help with that." and refusal.extras[NAME]["refusal"] is True
    assert [b.text for b in conv.messages[3].blocks] == ["Here is one: ", "No jokes about locks."]
    assert conv.messages[3].blocks[1].extras[NAME] == {"refusal": True}
    audio = conv.messages[4].blocks[0]
    assert isinstance(audio, Opaque) and audio.payload == {"id": "audio_abc123"}
    assert kinds(conv.messages[5]) == ["Reasoning", "ToolCall"]
    assert conv.messages[5].blocks[0].text == "The user wants the date; call the tool."
    assert kinds(conv.messages[7]) == ["Reasoning", "Text"] and conv.messages[7].blocks[0].origin == NAME
    assert conv.messages[9].extras[NAME] == {"prefix": True}


def test_fixture_messages_invalid_arguments_and_orphan():
    conv = oc.parse(fixture("messages_loop.json"))
    bad = conv.messages[5].blocks[0]
    assert bad.arguments is UNSET and bad.arguments_valid is False
    assert bad.raw_arguments == '{"reservation_id": "ZFA04Y"'
    orphan = conv.messages[7].blocks[0]
    assert orphan.call_id is None and orphan.provider_id == "call_zz"
    assert kinds(conv.messages[1]) == ["Text", "ToolCall"]
    assert conv.messages[2].blocks[0].name == "get_reservation_details"
    assert conv.messages[4].blocks[0].content == ()  # "" content: no empty text block


def test_fixture_responses():
    conv = oc.parse(fixture("response_tool_calls.json"))
    assert conv.meta.response_id == "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
    assert conv.meta.stop_reason == "tool_calls" and conv.meta.created == "2025-03-10T01:31:23Z"
    assert kinds(conv.messages[0]) == ["ToolCall", "ToolCall"]
    conv = oc.parse(fixture("response_two_choices_audio.json"))
    assert conv.messages[0].blocks[0].payload["transcript"] == "Hello there!"
    assert conv.extras[NAME]["$more_choices"][0]["message"]["content"] == "Hi!"
    assert any("1 more choice(s) (n > 1)" in note for note in conv.meta.notes)  # said, not silent
    conv = oc.parse(fixture("response_reasoning.json"))
    assert kinds(conv.messages[0]) == ["Reasoning", "Text"]


def test_response_to_request_ledgers_response_fields():
    conv = oc.parse(fixture("response_tool_calls.json"))
    body, entries = write(conv, "request")
    assert body["messages"][0]["tool_calls"][0]["id"] == "call_abc123"
    assert ("dropped", "$") in entries  # the response metadata has no place in a request


# --- 3. bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("body, path", [
    ({"model": "m"}, "$"),
    ({"messages": {}}, "$.messages"),
    ({"messages": ["hi"]}, "$.messages[0]"),
    ({"messages": [{"content": "x"}]}, "$.messages[0]"),
    ({"messages": [{"role": 3}]}, "$.messages[0].role"),
    ({"messages": [{"role": "model", "content": "x"}]}, "$.messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "$.messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"text": "x"}]}]}, "$.messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}, "$.messages[0].content[0].text"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "$.messages[0].content[0].image_url"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}]}]},
     "$.messages[0].tool_calls[0].function"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                          "function": {"name": "f", "arguments": 3}}]}]},
     "$.messages[0].tool_calls[0].function.arguments"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": 7, "type": "function",
                                                          "function": {"name": "f", "arguments": "{}"}}]}]},
     "$.messages[0].tool_calls[0].id"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "$.messages[0]"),
    ({"messages": [{"role": "function", "content": "x"}]}, "$.messages[0]"),
    ({"messages": [], "tools": [{"type": "function", "function": {"description": "no name"}}]}, "$.tools[0].function"),
    ({"messages": [], "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]},
     "$.tools[0].function.parameters"),
])
def test_bad_request_names_the_path(body, path):
    with pytest.raises(ParseError) as err:
        oc.parse(body, shape="request")
    assert err.value.path == path


def test_bad_response_and_messages_name_the_path():
    with pytest.raises(ParseError) as err:
        oc.parse({"object": "chat.completion", "choices": [{"index": 0}]}, shape="response")
    assert err.value.path == "$.choices[0]"
    with pytest.raises(ParseError) as err:
        oc.parse([{"role": "user", "content": "a"}, {"role": "assistant", "refusal": 1}], shape="messages")
    assert err.value.path == "$[1].refusal"
    with pytest.raises(ShapeError):
        oc.parse("not a body")


def test_unknown_part_is_opaque_unless_strict():
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "see"}, {"type": "video_url", "video_url": {"url": "https://v.example/a.mp4"}}]}]}
    conv = oc.parse(body)
    opaque = conv.messages[0].blocks[1]
    assert isinstance(opaque, Opaque) and opaque.item_type == "video_url" and opaque.provider == NAME
    assert oc.serialize(conv, ledger=Ledger(NAME)) == body
    with pytest.raises(ParseError) as err:
        oc.parse(body, strict=True)
    assert err.value.code == "unknown_block" and err.value.path == "$.messages[0].content[1]"


def test_unknown_call_type_is_opaque_unless_strict():
    body = {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "x1", "type": "mcp", "mcp": {"server": "s"}}]}]}
    conv = oc.parse(body)
    assert conv.messages[0].blocks[0].role_hint == "call"
    assert round_trip(body)[1] == body
    with pytest.raises(ParseError) as err:
        oc.parse(body, strict=True)
    assert err.value.path == "$.messages[0].tool_calls[0]"


def test_parse_never_mutates_its_input():
    body = fixture("request_parallel_calls.json")
    before = json.dumps(body, sort_keys=True)
    conv = oc.parse(body)
    oc.serialize(conv, ledger=Ledger(NAME))
    assert json.dumps(body, sort_keys=True) == before
    assert conv.extras[NAME] is not body


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
# Chat-shaped values reach the deeper branches that arbitrary JSON rarely does.
_keys = st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name", "function_call", "refusal",
                         "audio", "reasoning_content", "reasoning", "type", "text", "image_url", "url", "function",
                         "arguments", "id", "custom", "input", "file", "file_data", "input_audio", "weight"])
_atoms = st.sampled_from(["user", "assistant", "tool", "function", "system", "developer", "text", "image_url",
                          "function", "custom", "file", "refusal", "thinking", "{}", "{\"a\":1}", "data:x;base64,AA"])
chat_like = st.recursive(
    st.none() | st.booleans() | st.integers() | _atoms,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(json_values, chat_like, st.builds(lambda m: {"messages": m}, chat_like),
                 st.builds(lambda c: {"object": "chat.completion", "choices": c}, chat_like)))
def test_detect_and_parse_never_crash(value):
    found = oc.detect(value)
    assert found is None or found.format == NAME
    for shape in (None, "request", "messages", "response"):
        try:
            conv = oc.parse(value, shape=shape)
        except SftprepError:
            continue
        oc.serialize(conv, shape=conv.meta.shape, ledger=Ledger(NAME))


# --- 4. the checker rejects broken bodies ---------------------------------------------------------

def _ok_body():
    return {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}


def _broken(edit):
    body = _ok_body()
    edit(body)
    return body


@pytest.mark.parametrize("body, expected", [
    (_broken(lambda b: b.pop("model")), "$: missing required key 'model'"),
    (_broken(lambda b: b["messages"][0].update(foo=1)), "$.messages[0].foo: unknown key"),
    (_broken(lambda b: b["messages"][0].update(role="human")), "$.messages[0].role: must be one of"),
    (_broken(lambda b: b["messages"][1]["tool_calls"][0]["function"].update(arguments={})),
     "$.messages[1].tool_calls[0].function.arguments: must be a string"),
    (_broken(lambda b: b["messages"][1]["tool_calls"][0]["function"].update(arguments="{oops")),
     "$.messages[1].tool_calls[0].function.arguments: must be a string holding JSON"),
    (_broken(lambda b: b["messages"].pop()), "$.messages[1]: tool call(s) ['call_1'] never answered"),
    (_broken(lambda b: b["messages"][2].update(tool_call_id="call_2")), "$.messages[2].tool_call_id: 'call_2'"),
    (_broken(lambda b: b["messages"].insert(2, {"role": "user", "content": "wait"})),
     "$.messages[1]: tool call(s) ['call_1'] not answered"),
    (_broken(lambda b: b["messages"][1]["tool_calls"][0].update(id="c" * 41)),
     "$.messages[1].tool_calls[0].id: must be 1 to 40"),
    (_broken(lambda b: b["messages"][1].pop("tool_calls")), "$.messages[1]: an assistant message needs content"),
    (_broken(lambda b: b["messages"][0].update(content=[{"type": "image_url", "image_url": {"url": "x.png"}}])),
     "$.messages[0].content[0].image_url.url"),
    (_broken(lambda b: b["messages"][2].update(content=[{"type": "image_url", "image_url": {"url": "https://a/b.png"}}])),
     "$.messages[2].content[0].type: must be \"text\""),
    (_broken(lambda b: b["tools"][0]["function"].update(name="has space")), "$.tools[0]: tool name"),
    (_broken(lambda b: b.update(tool_choice={"type": "function", "function": {"name": "g"}})),
     "$.tool_choice: names function tool 'g'"),
    (_broken(lambda b: b.update(stream_options={"include_usage": True})), "$.stream_options: only allowed"),
    (_broken(lambda b: b.update(temperature="hot")), "$.temperature: must be"),
    (_broken(lambda b: b["messages"][0].update(content=[{"type": "input_audio", "input_audio": {"data": "AA", "format": "ogg"}}])),
     "$.messages[0].content[0].input_audio.format"),
    (_broken(lambda b: b["messages"][1].update(prefix=True)), "$.messages[1].prefix: unknown key"),
])
def test_checker_rejects_broken_bodies(body, expected):
    errors = check_request(body)
    assert any(e.startswith(expected) for e in errors), errors


def test_checker_accepts_the_base_body_and_compat_extensions():
    assert check_request(_ok_body()) == []
    body = _broken(lambda b: b["messages"][1].update(reasoning_content="think", prefix=False))
    assert check_request(body) != [] and check_request(body, compat=True) == []


# --- 5. cross-format into Chat ----------------------------------------------------------------------

def _call(ids, name, arguments, provider_id=None, **kw):
    return ToolCall(id=ids.new(name, arguments), name=name, arguments=arguments, provider_id=provider_id, **kw)


def _tools(*names):
    return tuple(Tool(name=n, parameters={"type": "object"}) for n in names)


def test_cross_parallel_calls_without_ids_text_around_and_error_result():
    ids = CallIds()
    a, b = _call(ids, "lookup", {"q": "x"}), _call(ids, "lookup", {"q": "y"})
    conv = Conversation(
        system=(Text("be brief", extras={"anthropic": {"cache_control": {"type": "ephemeral"}}}),),
        tools=_tools("lookup"), meta=Meta(provider="anthropic", model="claude-x"),
        messages=(
            Message("user", (Text("find x and y"),)),
            Message("assistant", (Text("Looking."), a, b, Text("Done soon."))),
            Message("user", (ToolResult(call_id=a.id, content=(Text("x=1"),)),
                             ToolResult(call_id=b.id, content=(Text("no such key"),), is_error=True),
                             Text("and hurry"))),
        ))
    body, entries = write(conv)
    assert check_request(body) == []
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool", "user"]
    assistant = body["messages"][2]
    assert [c["id"] for c in assistant["tool_calls"]] == [a.id, b.id]
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"]) == {"q": "y"}
    assert assistant["content"] == [{"type": "text", "text": "Looking."}, {"type": "text", "text": "Done soon."}]
    assert body["messages"][4] == {"role": "tool", "tool_call_id": b.id, "content": "Error: no such key"}
    assert body["model"] == "gpt-4o"  # an Anthropic model is no OpenAI one: dropped, the default written
    assert set(entries) == {
        ("dropped", "$.meta.model"), ("synthesized", "$.meta.model"),
        ("dropped", "$.system[0]"),  # cache_control
        ("synthesized", "$.messages[1].blocks[1]"), ("synthesized", "$.messages[1].blocks[2]"),
        ("reordered", "$.messages[1].blocks[3]"),
        ("folded", "$.messages[2].blocks[1]"),
    }


def test_cross_image_result_moves_after_all_tool_messages():
    ids = CallIds()
    a, b = _call(ids, "shot", {}, "toolu_01A"), _call(ids, "shot", {"n": 2}, "toolu_01B")
    image = Media(kind="image", media_type="image/png", data="iVBORw0KGgo=")
    conv = Conversation(tools=_tools("shot"), meta=Meta(model="m"), messages=(
        Message("user", (Text("screenshots please"),)),
        Message("assistant", (a, b)),
        Message("user", (ToolResult(call_id=a.id, provider_id="toolu_01A", content=(Text("first"), image)),
                         ToolResult(call_id=b.id, provider_id="toolu_01B", content=(image,)))),
        Message("assistant", (Text("Two screenshots."),)),
    ))
    body, entries = write(conv)
    assert check_request(body) == []
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "toolu_01A", "content": "first"}
    assert body["messages"][3]["content"] == ""
    moved = body["messages"][4]["content"]
    assert [p["image_url"]["url"] for p in moved] == ["data:image/png;base64,iVBORw0KGgo="] * 2
    assert entries == [("moved", "$.messages[2].blocks[0].content[1]"), ("moved", "$.messages[2].blocks[1].content[0]")]


def test_cross_foreign_reasoning_and_opaque_are_dropped():
    ids = CallIds()
    call = _call(ids, "f", {"a": 1}, "toolu_X", signature="sig-on-call")
    conv = Conversation(tools=_tools("f"), meta=Meta(model="m"), messages=(
        Message("user", (Text("go"),)),
        Message("assistant", (Reasoning(text="thinking...", signature="EqQBCkYIAxgCIkA", origin="anthropic"),
                              Opaque(provider="anthropic", item_type="server_tool_use", payload={"id": "srvtoolu_1"},
                                     role_hint="call", name="web_search"),
                              call)),
        Message("tool", (ToolResult(call_id=call.id, provider_id="toolu_X", content=(Text("1"),)),)),
    ))
    body, entries = write(conv)
    assert check_request(body) == []
    assistant = body["messages"][1]
    assert "reasoning_content" not in assistant and assistant["content"] is None
    assert [c["id"] for c in assistant["tool_calls"]] == ["toolu_X"]
    assert set(entries) == {("dropped", "$.messages[1].blocks[0]"), ("dropped", "$.messages[1].blocks[1]"),
                            ("dropped", "$.messages[1].blocks[2]")}


def test_cross_long_ids_structured_output_and_params():
    ids = CallIds()
    long_id = "function-call-" + "9" * 40
    call = _call(ids, "weather", {"city": "Rome"}, long_id)
    conv = Conversation(
        tools=_tools("weather"), meta=Meta(model="gemini-2.5-flash"),
        extras={"anthropic": {"max_tokens": 256, "temperature": 0.1, "stop_sequences": ["END"],
                              "tool_choice": {"type": "any"}, "top_k": 5}},
        messages=(
            Message("user", (Text("weather?"), Media(kind="video", url="https://v.example/clip.mp4"))),
            Message("assistant", (call,)),
            Message("user", (ToolResult(call_id=call.id, provider_id=long_id, name="weather",
                                        output={"temp": 21}),)),
        ))
    body, entries = write(conv)
    assert check_request(body) == []
    (tool_call,) = body["messages"][1]["tool_calls"]
    assert tool_call["id"] == call.id and body["messages"][2]["tool_call_id"] == call.id
    assert body["messages"][2]["content"] == '{"temp":21}'
    assert (body["max_completion_tokens"], body["temperature"], body["stop"], body["tool_choice"]) == \
        (256, 0.1, ["END"], "required")
    assert set(entries) == {("dropped", "$"),  # top_k, the one parameter without an equivalent
                            ("dropped", "$.messages[0].blocks[1]"),  # video
                            ("synthesized", "$.messages[1].blocks[0]"),  # id too long
                            ("folded", "$.messages[2].blocks[0]")}  # structured output as JSON text


def test_cross_invalid_arguments_keep_the_raw_string_and_results_before_text_reorder():
    ids = CallIds()
    raw = '{"q": "unterminated'
    call = ToolCall(id=ids.new("s", raw_arguments=raw), name="s", raw_arguments=raw, arguments_valid=False,
                    provider_id="fc_1")
    conv = Conversation(meta=Meta(model="m"), tools=_tools("s"), messages=(
        Message("assistant", (call,)),
        Message("user", (Text("here:"), ToolResult(call_id=call.id, provider_id="fc_1", content=(Text("r"),)))),
    ))
    body, entries = write(conv)
    assert body["messages"][0]["tool_calls"][0]["function"]["arguments"] == raw
    assert [m["role"] for m in body["messages"]] == ["assistant", "tool", "user"]
    assert entries == [("reordered", "$.messages[1].blocks[1]")]


def test_cross_response_shape_from_another_format():
    ids = CallIds()
    call = _call(ids, "f", {}, "toolu_9")
    conv = Conversation(meta=Meta(provider="anthropic", model="claude-x", response_id="msg_01",
                                  stop_reason="tool_use", usage={"input_tokens": 5, "output_tokens": 7}),
                        messages=(Message("user", (Text("hi"),)), Message("assistant", (Text("Calling."), call))))
    body, entries = write(conv, "response")
    assert body["object"] == "chat.completion" and body["id"] == "msg_01" and body["model"] == "claude-x"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Calling." and choice["message"]["tool_calls"][0]["id"] == "toolu_9"
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
    assert entries == [("dropped", "$.messages[0]"), ("synthesized", "$.meta.created")]
    assert oc.detect(body) == (NAME, "response", True)


def test_arguments_keep_big_integers_exact_and_bare_lists_drop_request_params():
    raw = '{"account": 123456789012345678901234567890}'
    body = {"model": "m", "temperature": 0, "messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": raw}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
        "tools": [{"type": "function", "function": {"name": "pay"}}]}
    conv = oc.parse(body)
    assert conv.messages[0].blocks[0].arguments == {"account": 123456789012345678901234567890}
    listed, entries = write(conv, "messages")
    assert listed == body["messages"]
    assert sorted(entries) == [("dropped", "$"), ("dropped", "$"), ("dropped", "$.tools[0]")]  # model, temperature


def test_cross_repeated_ids_no_model_and_tool_choice_without_function_tools():
    ids = CallIds()
    a, b = _call(ids, "f", {"n": 1}, "dup_1"), _call(ids, "f", {"n": 2}, "dup_1")
    conv = Conversation(
        tools=(Tool(name="web_search", kind="hosted", extras={"anthropic": {"type": "web_search_20250305"}}),),
        extras={"anthropic": {"tool_choice": {"type": "auto"}}},
        messages=(Message("assistant", (a, b)),
                  Message("user", (ToolResult(call_id=a.id, provider_id="dup_1", content=(Text("1"),)),
                                   ToolResult(call_id=b.id, provider_id="dup_1", content=(Text("2"),))))))
    body, entries = write(conv)
    assert check_request(body) == []
    assert [c["id"] for c in body["messages"][0]["tool_calls"]] == ["dup_1", b.id]
    assert [m["tool_call_id"] for m in body["messages"][1:]] == ["dup_1", b.id]
    assert body["model"] == "gpt-4o" and "tool_choice" not in body and "tools" not in body
    assert sorted(entries) == sorted([
        ("synthesized", "$.meta.model"),
        ("synthesized", "$.messages[0].blocks[1]"),  # the repeated id
        ("dropped", "$.tools[0]"), ("dropped", "$.tools[0]"),  # the hosted tool, and its anthropic type
        ("dropped", "$"),  # tool_choice with no function tool left
    ])
