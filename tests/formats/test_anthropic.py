"""Anthropic Messages codec: corpus and fixture round trips, parse results, bad input, the strict
request checker, and writing conversations of other origins into Anthropic bodies."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from corpus import CORPUS, corpus_available, iter_interactions, params, request_bodies, response_bodies
from formats.accept_anthropic import check_request
from pipeline.conversation import (Conversation, Media, Message, Meta, Opaque, Reasoning, Text, Tool, ToolCall,
                                   ToolResult)
from pipeline.errors import ParseError, SftprepError, ShapeError
from pipeline.formats import anthropic
from pipeline.ledger import Ledger

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "anthropic"


def _mine(kind, items):
    out = []
    for key, body in items:
        found = anthropic.detect(body)
        if found is not None:
            out.append((f"{kind}:{key}", (found.shape, body)))
    return out


CORPUS_RECORDS = _mine("request", request_bodies()) + _mine("response", response_bodies())


def _by_key() -> dict:
    return {key: value[1] for key, value in CORPUS_RECORDS}


def _round_trip(body, shape):
    before = copy.deepcopy(body)
    conv = anthropic.parse(body, shape=shape)
    ledger = Ledger("anthropic")
    out = anthropic.serialize(conv, shape=shape, ledger=ledger)
    assert body == before, "parse mutated its input"
    return conv, out, ledger


def _write(conv: Conversation, shape: str = "request") -> tuple[dict, list[tuple[str, str]]]:
    ledger = Ledger("anthropic")
    body = anthropic.serialize(conv, shape=shape, ledger=ledger)
    return body, [(e.kind, e.path) for e in ledger.entries]


# --- 1. corpus ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("record", params(CORPUS_RECORDS))
def test_corpus_round_trip(record):
    shape, body = record
    conv, out, ledger = _round_trip(body, shape)
    assert out == body
    assert ledger.entries == []
    assert conv.meta.provider == "anthropic" and conv.meta.shape == shape


def test_corpus_covers_every_folder(corpus):
    folders = {key.split(":")[1].split("/")[0] for key, _ in CORPUS_RECORDS}
    assert {"pydantic_ai_anthropic", "vercel_ai_anthropic"} <= folders
    # Other providers' bodies are never claimed for certain.
    for key, (_, body) in CORPUS_RECORDS:
        if not key.split(":")[1].startswith(("pydantic_ai_anthropic", "vercel_ai_anthropic")):
            assert not anthropic.detect(body).certain, key
    assert len(CORPUS_RECORDS) >= 300


def _session_messages():
    if not corpus_available():
        return []
    out = []
    for path in sorted((CORPUS / "claude_code_spotter_sessions").rglob("*.jsonl")):
        messages = []
        for line in path.read_text().splitlines():
            message = json.loads(line).get("message")
            if isinstance(message, dict) and "role" in message:
                messages.append(message)
        out.append((path.name, messages))
    return out


@pytest.mark.parametrize("messages", params(_session_messages()))
def test_session_messages_as_bare_list(messages):
    found = anthropic.detect(messages)
    assert found is not None and found.shape == "messages"
    conv, out, ledger = _round_trip(messages, "messages")
    assert out == messages and ledger.entries == []
    calls = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)]
    results = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolResult)]
    # Every result in a Claude Code session answers a call logged before it.
    assert all(r.call_id is not None and r.matched_by == "id" for r in results)
    assert {r.call_id for r in results} <= {c.id for c in calls}


def _corpus_record(name: str):
    value = _by_key().get(name)
    if value is not None:
        return value
    pytest.fail(f"corpus record {name} not found")


def test_corpus_thinking_keeps_signature(corpus):
    body = _corpus_record("request:pydantic_ai_anthropic/cassettes__test_cache_prefix_stability__"
                          "test_anthropic_thinking_roundtrip_wire_stable[ag_ui-0_1_13].json#1")
    conv = anthropic.parse(body)
    raw = next(b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])
               if b["type"] == "thinking")
    reasoning = [b for m in conv.messages for b in m.blocks if isinstance(b, Reasoning)]
    assert reasoning and reasoning[0].signature == raw["signature"] and reasoning[0].text == raw["thinking"]
    assert reasoning[0].origin == "anthropic"


def test_corpus_redacted_thinking_and_server_tools(corpus):
    redacted = [r for key, r in _by_key().items() if "redacted_thinking" in json.dumps(r)]
    assert redacted
    conv = anthropic.parse(redacted[0])
    assert any(isinstance(b, Reasoning) and b.redacted for m in conv.messages for b in m.blocks)
    search = _corpus_record("response:vercel_ai_anthropic/anthropic-web-search-tool.1.json")
    conv = anthropic.parse(search)
    kinds = [(b.item_type, b.role_hint) for b in conv.messages[0].blocks if isinstance(b, Opaque)]
    assert ("server_tool_use", "call") in kinds and ("web_search_tool_result", "result") in kinds
    assert conv.meta.response_id == search["id"] and conv.meta.usage == search["usage"]


def test_corpus_parallel_calls_pair_by_id(corpus):
    body = _corpus_record("request:pydantic_ai_anthropic/models__cassettes__test_anthropic__"
                          "test_multiple_parallel_tool_calls.json#1")
    conv = anthropic.parse(body)
    calls = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)]
    results = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolResult)]
    assert len(calls) >= 2 and len(results) == len(calls)
    by_id = {c.id: c for c in calls}
    for result in results:
        assert by_id[result.call_id].provider_id == result.provider_id


def test_corpus_mid_conversation_system_message(corpus):
    body = _corpus_record("request:pydantic_ai_anthropic/models__cassettes__test_anthropic_mid_conversation_system__"
                          "test_mid_conversation_system_prompt_kept_mid_history.json#0")
    conv = anthropic.parse(body)
    assert any(m.role == "system" for m in conv.messages[1:])


# --- 2. fixtures ---------------------------------------------------------------------------------------

FIXTURE_FILES = sorted(FIXTURES.glob("*.json"))


def _fixture(name: str):
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixture_round_trip(path):
    body = json.loads(path.read_text())
    found = anthropic.detect(body)
    assert found is not None and found.certain
    _, out, ledger = _round_trip(body, found.shape)
    assert out == body and ledger.entries == []
    if found.shape == "request":
        assert check_request(body) == []


def test_fixture_tools_parse():
    conv = anthropic.parse(_fixture("request_tools.json"))
    assert [type(b) for b in conv.system] == [Text, Text]
    assert conv.system[1].extras == {"anthropic": {"cache_control": {"type": "ephemeral"}}}
    assert [(t.name, t.kind) for t in conv.tools] == [("get_weather", "function"), ("get_map", "function"),
                                                      ("web_search", "hosted")]
    assert conv.tools[2].extras["anthropic"] == {"type": "web_search_20250305", "max_uses": 3}
    assert conv.extras["anthropic"]["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert conv.meta.model == "claude-sonnet-4-5"

    user, assistant, results, final, _ = conv.messages
    assert user.blocks == (Text("Weather and a map for Oslo and Bergen?"),)
    assert [type(b) for b in assistant.blocks] == [Reasoning, Text, ToolCall, ToolCall, ToolCall]
    thinking = assistant.blocks[0]
    assert thinking.signature == "EqQBCkYIARgCKkBzaWduYXR1cmUtb25l" and thinking.origin == "anthropic"
    calls = assistant.blocks[2:]
    assert [c.provider_id for c in calls] == ["toolu_01A", "toolu_01B", "toolu_01C"]
    assert len({c.id for c in calls}) == 3 and calls[0].arguments == {"city": "Oslo"}

    assert results.role == "user"
    assert [type(b) for b in results.blocks] == [ToolResult, ToolResult, ToolResult, Text]
    ok, failed, image = results.blocks[:3]
    assert [r.call_id for r in (ok, failed, image)] == [c.id for c in calls]
    assert ok.content == (Text("4C, overcast"),) and not ok.is_error and ok.name == "get_weather"
    assert failed.is_error and failed.content == (Text("station offline"),)
    assert [type(b) for b in image.content] == [Text, Media]
    assert image.content[1].media_type == "image/png" and image.content[1].kind == "image"
    assert final.blocks[0].redacted.startswith("EmwK")
    assert "citations" in final.blocks[1].extras["anthropic"]


def test_fixture_media_parse():
    conv = anthropic.parse(_fixture("request_media.json"))
    blocks = conv.messages[0].blocks
    jpeg, url, file_, pdf, text_doc, url_doc, file_doc, chunks, question = blocks
    assert (jpeg.kind, jpeg.media_type, jpeg.data[:4]) == ("image", "image/jpeg", "/9j/")
    assert url.url == "https://example.com/cat.png" and file_.file_id.startswith("file_")
    assert pdf.kind == "document" and pdf.media_type == "application/pdf"
    assert pdf.extras["anthropic"] == {"title": "Report", "context": "Quarterly numbers", "citations": {"enabled": True}}
    assert text_doc.text == "The grass is green." and text_doc.data is None
    assert url_doc.url.endswith(".pdf") and file_doc.file_id == "file_011CPdf"
    # A content-block source has no canonical fields: kept whole for Anthropic.
    assert chunks.extras["anthropic"]["source"]["type"] == "content"
    assert question == Text("Summarize all of these.")


def test_fixture_server_tools_parse():
    conv = anthropic.parse(_fixture("request_server_tools.json"))
    assistant = conv.messages[1]
    opaque = [(b.item_type, b.role_hint, b.name) for b in assistant.blocks if isinstance(b, Opaque)]
    assert opaque[:2] == [("server_tool_use", "call", "web_search"), ("web_search_tool_result", "result", None)]
    assert {t for t, _, _ in opaque} >= {"web_fetch_tool_result", "code_execution_tool_result",
                                          "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
                                          "tool_search_tool_result", "mcp_tool_use", "mcp_tool_result"}
    assert isinstance(assistant.blocks[-1], ToolCall)
    result = conv.messages[2].blocks[0]
    assert result.content == (Text("ion: a charged particle"),) and result.call_id == assistant.blocks[-1].id
    assert result.extras["anthropic"]["unmapped_content"] == [[0, {"type": "tool_reference", "tool_name": "lookup"}]]
    assert [m.role for m in conv.messages] == ["user", "assistant", "user", "system", "assistant", "system", "user"]
    assert conv.messages[4].blocks[0].item_type == "compaction"
    assert conv.tools[-1].kind == "hosted" and conv.tools[-1].name == "mcp_toolset"


def test_fixture_response_parse():
    conv = anthropic.parse(_fixture("response_tool_use.json"))
    assert conv.meta.shape == "response" and conv.meta.response_id == "msg_01Aq9w938a90dw8q"
    assert conv.meta.stop_reason == "tool_use" and conv.meta.usage["input_tokens"] == 412
    (message,) = conv.messages
    assert message.role == "assistant" and [type(b) for b in message.blocks] == [Text, ToolCall]
    conv = anthropic.parse(_fixture("response_thinking.json"))
    assert conv.messages[0].extras["anthropic"] == {"$container": {"id": "container_011",
                                                                   "expires_at": "2025-11-01T00:00:00Z"},
                                                     "$stop_sequence": None}


def test_orphan_result_kept():
    body = {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "x"}]}]}
    result = anthropic.parse(body).messages[0].blocks[0]
    assert result.call_id is None and result.provider_id == "toolu_gone" and result.matched_by is None
    _, out, ledger = _round_trip(body, "request")
    assert out == body and not ledger.entries


# --- 3. bad input --------------------------------------------------------------------------------------

def _request(*content, role="user"):
    return {"model": "m", "max_tokens": 10, "messages": [{"role": role, "content": list(content)}]}


@pytest.mark.parametrize("body, path", [
    ({"model": "m", "max_tokens": 1}, "$"),
    ({"messages": "hi"}, "$.messages"),
    ({"messages": [{"content": "hi"}]}, "$.messages[0]"),
    ({"messages": [{"role": "tool", "content": "hi"}]}, "$.messages[0].role"),
    ({"messages": [{"role": "user", "content": 3}]}, "$.messages[0].content"),
    ({"messages": [{"role": "user", "content": ["hi"]}]}, "$.messages[0].content[0]"),
    (_request({"text": "no type"}), "$.messages[0].content[0]"),
    (_request({"type": "text", "text": 5}), "$.messages[0].content[0].text"),
    (_request({"type": "tool_use", "id": "t", "name": "f"}, role="assistant"), "$.messages[0].content[0]"),
    (_request({"type": "tool_use", "id": "t", "name": "f", "input": "{}"}, role="assistant"),
     "$.messages[0].content[0].input"),
    (_request({"type": "tool_result", "content": "x"}), "$.messages[0].content[0]"),
    (_request({"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}), "$.messages[0].content[0].is_error"),
    (_request({"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text"}]}),
     "$.messages[0].content[0].content[0]"),
    (_request({"type": "image", "source": {"type": "base64", "data": "AAAA"}}), "$.messages[0].content[0].source"),
    (_request({"type": "thinking", "signature": "s"}, role="assistant"), "$.messages[0].content[0]"),
    ({"messages": [], "system": [{"type": "image"}]}, "$.system[0].type"),
    ({"messages": [], "tools": [{"name": "f"}]}, "$.tools[0]"),
    ({"messages": [], "tools": [{"name": "f", "input_schema": {}, "description": 1}]}, "$.tools[0].description"),
])
def test_bad_request_names_path(body, path):
    with pytest.raises(ParseError) as info:
        anthropic.parse(body, shape="request")
    assert info.value.path == path


def test_bad_response_names_path():
    with pytest.raises(ParseError) as info:
        anthropic.parse({"type": "message", "role": "assistant", "content": [{"type": "tool_use", "id": 1}]},
                        shape="response")
    assert info.value.path == "$.content[0].id"
    with pytest.raises(ParseError) as info:
        anthropic.parse({"type": "message", "role": "user", "content": []}, shape="response")
    assert info.value.path == "$.role"


def test_unknown_block_kept_or_refused():
    block = {"type": "hologram", "frames": [1, 2]}
    body = _request(block)
    opaque = anthropic.parse(body).messages[0].blocks[0]
    assert opaque == Opaque(provider="anthropic", item_type="hologram", payload=block)
    _, out, ledger = _round_trip(body, "request")
    assert out == body and not ledger.entries
    with pytest.raises(ParseError) as info:
        anthropic.parse(body, strict=True)
    assert info.value.code == "unknown_block" and info.value.path == "$.messages[0].content[0].type"
    inner = _request({"type": "tool_result", "tool_use_id": "t", "content": [block]})
    with pytest.raises(ParseError) as info:
        anthropic.parse(inner, strict=True)
    assert info.value.path == "$.messages[0].content[0].content[0].type"
    # Known hosted-tool blocks are not "unknown" in strict mode.
    anthropic.parse(_fixture("request_server_tools.json"), strict=True)


def test_not_anthropic_is_a_shape_error():
    with pytest.raises(ShapeError):
        anthropic.parse({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})


def test_detect_shapes_and_certainty():
    assert anthropic.detect([{"role": "user", "content": "hi"}]) == ("anthropic", "messages", False)
    assert anthropic.detect({"model": "m", "max_tokens": 5, "system": "s", "messages": []}).certain
    assert anthropic.detect({"messages": [{"role": "assistant", "content": None,
                                           "tool_calls": [{"id": "c", "type": "function"}]}]}) is None
    assert anthropic.detect([{"role": "tool", "tool_call_id": "c", "content": "x"}]) is None
    assert anthropic.detect({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                             "tools": [{"type": "function", "function": {"name": "f"}}]}) is None
    assert anthropic.detect({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}) is None
    assert anthropic.detect({"object": "chat.completion", "choices": []}) is None
    responses_item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": "hi", "annotations": []}]}
    assert anthropic.detect(responses_item) is None
    assert anthropic.detect(_fixture("response_tool_use.json")) == ("anthropic", "response", True)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "role", "content", "messages", "text", "id", "name", "input", "tool_use_id",
                         "source", "system", "tools", "max_tokens", "signature", "thinking", "data", "x"]),
        inner, max_size=5),
    max_leaves=30)
# Values shaped like Anthropic records, so parsing goes deeper than the first check.
block_types = st.sampled_from(["text", "image", "document", "tool_use", "tool_result", "thinking",
                               "redacted_thinking", "server_tool_use", "compaction", "weird"])
blocks = st.fixed_dictionaries({"type": block_types}, optional={
    "text": json_values, "id": json_values, "name": json_values, "input": json_values, "content": json_values,
    "tool_use_id": json_values, "source": json_values, "signature": json_values, "thinking": json_values,
    "is_error": json_values, "data": json_values})
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"])}, optional={
    "content": st.one_of(st.text(max_size=5), st.lists(blocks | json_values, max_size=4), json_values)}), max_size=4)
records = st.one_of(json_values, messages, st.fixed_dictionaries({"messages": messages}, optional={
    "system": json_values, "tools": json_values, "max_tokens": json_values}))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_detect_never_raises_and_parse_raises_only_project_errors(value):
    found = anthropic.detect(value)
    for shape in (None, "request", "messages", "response"):
        try:
            conv = anthropic.parse(value, shape=shape)
        except SftprepError:
            continue
        if found is not None and shape is None:
            anthropic.serialize(conv, shape=found.shape, ledger=Ledger("anthropic"))


foreign_params = st.fixed_dictionaries({}, optional={
    "openai-chat": st.dictionaries(st.sampled_from(["model", "max_tokens", "temperature", "top_p", "stop",
                                                    "tool_choice", "parallel_tool_calls", "seed"]), json_values),
    "openai-responses": st.dictionaries(st.sampled_from(["max_output_tokens", "tool_choice", "temperature"]),
                                        json_values),
    "gemini": st.dictionaries(st.sampled_from(["generationConfig", "toolConfig", "generation_config"]),
                              json_values | st.dictionaries(st.sampled_from(
                                  ["functionCallingConfig", "maxOutputTokens", "topK", "stopSequences"]),
                                  json_values | st.dictionaries(st.sampled_from(
                                      ["mode", "allowedFunctionNames"]), json_values))),
})


@settings(max_examples=300, deadline=None)
@given(foreign_params, st.sampled_from(["request", "response", "messages"]))
def test_serialize_other_providers_params_never_crashes(extras, shape):
    conv = Conversation(extras=extras, meta=Meta(stop_reason="length", usage={"prompt_tokens": 1, "x": []}),
                        messages=(Message("user", (Text("hi"),)), Message("assistant", (Text("yo"),))))
    body = anthropic.serialize(conv, shape=shape, ledger=Ledger("anthropic"))
    assert body


# --- 4. the strict request checker ----------------------------------------------------------------

def _accepted_requests():
    if not corpus_available():
        return []
    return [(key, (it["request"]["body"], "count_tokens" in it["request"]["uri"]))
            for key, it in iter_interactions(("pydantic_ai_anthropic",))
            if isinstance(it["request"]["body"], dict) and it["response"]["status"] == 200]


@pytest.mark.parametrize("record", params(_accepted_requests()))
def test_checker_accepts_corpus_requests(record):
    body, count_tokens = record
    assert check_request(body, count_tokens=count_tokens) == []


def _broken(mutate):
    body = _fixture("request_tools.json")
    mutate(body)
    return body


@pytest.mark.parametrize("mutate, expected", [
    (lambda b: b.pop("max_tokens"), "$: missing required key 'max_tokens'"),
    (lambda b: b.update(temperature="hot"), "$.temperature: must be a number"),
    (lambda b: b.update(n=2), "$.n: unknown key"),
    (lambda b: b["messages"][1]["content"][2].update(arguments="{}"), "$.messages[1].content[2].arguments: unknown key"),
    (lambda b: b["messages"][1]["content"][2].update(input='{"city": "Oslo"}'), "$.messages[1].content[2].input: must be an object"),
    (lambda b: b["messages"][1]["content"][0].pop("signature"), "$.messages[1].content[0]: missing required key 'signature'"),
    (lambda b: b["messages"][2]["content"][1].update(type="function_result"), "$.messages[2].content[1]: unknown type 'function_result'"),
    (lambda b: b["messages"][2]["content"][2]["content"][1]["source"].update(media_type="image/bmp"),
     "$.messages[2].content[2].content[1].source.media_type: must be one of"),
    (lambda b: b["messages"][0].update(role="tool"), "$.messages[0]"),
    (lambda b: b["tools"][0].update(parameters={}), "$.tools[0].parameters: unknown key"),
    (lambda b: b["messages"][1]["content"][2].update(id="toolu.01A"), "$.messages[1].content[2].id: must match"),
    (lambda b: b["messages"][1]["content"][3].update(id="toolu_01A"), "$.messages[1].content[3].id: duplicate id"),
    (lambda b: b["messages"][2]["content"].pop(0), "$.messages[1].content[2]: tool_use 'toolu_01A' has no tool_result"),
    (lambda b: b["messages"][2]["content"].insert(0, {"type": "text", "text": "first"}),
     "tool results must come before any other content"),
    (lambda b: b["messages"][2]["content"][0].update(tool_use_id="toolu_zz"), "answers no tool_use of the previous turn"),
    (lambda b: b["messages"].pop(2), "has no tool_result in the next user turn"),
    (lambda b: b["messages"].insert(2, {"role": "user", "content": "wait"}), "tool results must come before"),
    (lambda b: b["messages"][1]["content"].append(
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "x"}), "tool_result is only allowed in user messages"),
    (lambda b: b["tools"][1].update(name="get.map"), "$.tools[1].name: must match"),
    (lambda b: b["tools"][1].update(name="get_weather"), "$.tools[1].name: duplicate tool name"),
    (lambda b: b.update(tool_choice={"type": "tool", "name": "nope"}), "$.tool_choice.name: 'nope' is not a defined tool"),
    (lambda b: b["thinking"].update(budget_tokens=512), "$.thinking.budget_tokens: must be at least 1024"),
    (lambda b: b["messages"][4]["content"][0].update(text="  "), "$.messages[4].content[0].text: text blocks must hold"),
    (lambda b: b.update(betas=["x"]), "$.betas"),
])
def test_checker_rejects_broken_bodies(mutate, expected):
    errors = check_request(_broken(mutate))
    assert any(expected in e for e in errors), errors


def test_checker_rejects_non_objects():
    assert check_request([]) == ["$: a request body must be an object"]
    assert check_request({"model": "m", "max_tokens": 1, "messages": []}) == ["$.messages: at least one message is required"]


# --- 5. writing other origins as Anthropic -----------------------------------------------------------

def _call(name, arguments, cid, provider_id=None, **kw):
    return ToolCall(id=cid, name=name, arguments=arguments, provider_id=provider_id, **kw)


def _result(call_id, *content, provider_id=None, **kw):
    return ToolResult(call_id=call_id, provider_id=provider_id, content=tuple(content), matched_by="id", **kw)


WEATHER = Tool(name="get_weather", description="Weather", parameters={"type": "object", "properties": {
    "city": {"type": "string"}}})


def test_write_openai_style_parallel_calls():
    conv = Conversation(
        system=(Text("Be brief."),), developer=(Text("Use tools."),), tools=(WEATHER,),
        meta=Meta(provider="openai-chat", model="gpt-4o"),
        extras={"openai-chat": {"model": "gpt-4o", "max_completion_tokens": 300, "temperature": 1.5,
                                "tool_choice": "required", "parallel_tool_calls": False, "seed": 7}},
        messages=(
            Message("user", (Text("Oslo and Bergen?"),)),
            Message("assistant", (Text("Checking."), _call("get_weather", {"city": "Oslo"}, "call_a", "call_abc"),
                                  _call("get_weather", {"city": "Bergen"}, "call_b", "call_def"))),
            Message("tool", (_result("call_a", Text("4C"), provider_id="call_abc"),)),
            Message("tool", (_result("call_b", Text("no data"), provider_id="call_def", is_error=True),)),
            Message("user", (Text("And tomorrow?"),)),
            Message("assistant", (Text("Rain."),)),
        ))
    body, entries = _write(conv)
    assert check_request(body) == []
    # An OpenAI model is no Anthropic one: dropped with a ledger entry, the default written in its place.
    assert body["model"] == "claude-sonnet-4-5" and body["max_tokens"] == 300 and body["temperature"] == 1
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert body["system"] == [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant"]
    merged = body["messages"][2]["content"]
    assert [b["type"] for b in merged] == ["tool_result", "tool_result", "text"]
    assert merged[0]["tool_use_id"] == "call_abc" and merged[1]["is_error"] is True
    assert body["messages"][1]["content"][1]["input"] == {"city": "Oslo"}
    assert sorted(entries) == sorted([("folded", "$.developer[0]"), ("folded", "$"), ("dropped", "$"),
                                      ("dropped", "$"), ("synthesized", "$")])


def test_write_calls_without_provider_ids_and_bad_ids():
    conv = Conversation(tools=(WEATHER,), meta=Meta(model="gemini-2.5-flash"), messages=(
        Message("user", (Text("Hi"),)),
        Message("assistant", (Text("Looking both up."), _call("get_weather", {"city": "Oslo"}, "call_1"),
                              Text("Rome next."), _call("get_weather", {"city": "Rome"}, "call_2", "fc/1:x"))),
        Message("user", (_result("call_1", provider_id=None, output={"temp": 4}),
                         _result("call_2", Text("sunny"), provider_id="fc/1:x"))),
    ))
    body, entries = _write(conv)
    assert check_request(body) == []
    uses = body["messages"][1]["content"]
    assert [u["type"] for u in uses] == ["text", "tool_use", "text", "tool_use"]  # order is data
    assert [u["id"] for u in uses if u["type"] == "tool_use"] == ["call_1", "call_2"]
    results = body["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["call_1", "call_2"]
    assert results[0]["content"] == [{"type": "text", "text": '{"temp":4}'}]
    assert ("synthesized", "$.messages[1].blocks[1]") in entries
    assert ("synthesized", "$.messages[1].blocks[3]") in entries
    assert ("folded", "$.messages[2].blocks[0].output") in entries
    assert ("synthesized", "$") in entries  # max_tokens
    assert body["max_tokens"] == anthropic.DEFAULT_MAX_TOKENS


def test_write_text_before_results_is_reordered():
    conv = Conversation(meta=Meta(model="m"), messages=(
        Message("user", (Text("q"),)),
        Message("assistant", (_call("f", {}, "call_f", "toolu_f"),)),
        Message("user", (Text("here you go"), _result("call_f", Text("done"), provider_id="toolu_f"))),
    ))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "text"]
    assert entries == [("synthesized", "$"), ("reordered", "$.messages[2].blocks[0]")]


def test_write_image_results_and_foreign_media():
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    conv = Conversation(meta=Meta(model="m"), messages=(
        Message("user", (Text("Screenshot please"), Media(kind="audio", data="UklGRg==", media_type="audio/wav"))),
        Message("assistant", (_call("shot", {}, "call_s", "call_s1"),)),
        Message("tool", (_result("call_s", Text("ok"), Media(kind="image", data=png), provider_id="call_s1"),)),
    ))
    body, entries = _write(conv)
    assert check_request(body) == []
    image = body["messages"][2]["content"][0]["content"][1]
    assert image == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    assert ("synthesized", "$.messages[2].blocks[0].content[1]") in entries
    assert ("dropped", "$.messages[0].blocks[1]") in entries


def test_write_foreign_reasoning_and_opaque():
    conv = Conversation(meta=Meta(model="m"), messages=(
        Message("user", (Text("Search"),)),
        Message("assistant", (Reasoning(text="plan", encrypted="gAAAA", item_id="rs_1", origin="openai-responses"),
                              Opaque(provider="openai-responses", item_type="web_search_call", payload={"id": "ws"},
                                     role_hint="call"),
                              Text("Found it.", signature="CiQB"))),
        Message("assistant", (Reasoning(text="only thought", origin="gemini", signature="sig"),)),
        Message("user", (Text("thanks"),)),
    ))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert body["messages"][1]["content"] == [{"type": "text", "text": "Found it."}]
    assert len(body["messages"]) == 3  # the reasoning-only turn had nothing Anthropic can carry
    assert ("dropped", "$.messages[1].blocks[0]") in entries
    assert ("dropped", "$.messages[1].blocks[1]") in entries
    assert ("dropped", "$.messages[1].blocks[2]") in entries  # Gemini signature on the text
    assert ("dropped", "$.messages[2]") in entries and ("dropped", "$.messages[2].blocks[0]") in entries


def test_write_invalid_arguments_and_custom_tools():
    conv = Conversation(
        meta=Meta(model="m"),
        tools=(Tool(name="patch", kind="custom", description="free text"), Tool(name="noschema"),
               Tool(name="web_search_preview", kind="hosted", extras={"openai-responses": {"type": "web_search"}})),
        messages=(
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall(id="call_x", name="noschema", raw_arguments='{"a": ', arguments_valid=False,
                                           provider_id="call_x"),
                                  ToolCall(id="call_y", name="patch", arguments="*** Begin Patch", provider_id="call_y",
                                           kind="custom"))),
            Message("tool", (_result("call_x", Text("bad args"), provider_id="call_x", is_error=True),
                             _result("call_y", Text("patched"), provider_id="call_y"))),
        ))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert [t["name"] for t in body["tools"]] == ["patch", "noschema"]
    uses = body["messages"][1]["content"]
    assert uses[0]["input"] == {} and uses[1]["input"] == {"input": "*** Begin Patch"}
    assert ("dropped", "$.messages[1].blocks[0].arguments") in entries
    assert ("folded", "$.messages[1].blocks[1].arguments") in entries
    assert ("folded", "$.tools[0]") in entries and ("synthesized", "$.tools[1]") in entries
    assert ("dropped", "$.tools[2]") in entries


def test_write_gemini_params_and_mid_conversation_instructions():
    conv = Conversation(
        tools=(WEATHER,), meta=Meta(model="gemini-2.5-pro"),
        extras={"gemini": {"generationConfig": {"maxOutputTokens": 99, "topK": 5, "candidateCount": 2},
                           "toolConfig": {"functionCallingConfig": {"mode": "ANY",
                                                                    "allowedFunctionNames": ["get_weather"]},
                                          "includeServerSideToolInvocations": True}}},
        messages=(
            Message("assistant", (Text(" "), _call("get_weather", {"city": "Paris"}, "call_p"))),
            Message("user", (_result("call_p", Text("")),)),
            Message("developer", (Text("switch to French"),)),
            Message("system", (Text("be terse"), Media(kind="image", url="https://x/y.png"))),
            Message("user", (Text("bonjour"),), name="pierre"),
        ))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert body["max_tokens"] == 99 and body["top_k"] == 5
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert [m["role"] for m in body["messages"]] == ["assistant", "user", "system", "system", "user"]
    assert body["messages"][0]["content"] == [{"type": "tool_use", "id": "call_p", "name": "get_weather",
                                               "input": {"city": "Paris"}}]
    assert body["messages"][1]["content"] == [{"type": "tool_result", "tool_use_id": "call_p"}]
    assert body["messages"][3]["content"] == [{"type": "text", "text": "be terse"}]
    assert sorted(entries) == sorted([
        ("dropped", "$"),  # candidateCount
        ("dropped", "$"),  # includeServerSideToolInvocations
        ("dropped", "$.messages[0].blocks[0]"),  # whitespace-only text
        ("synthesized", "$.messages[0].blocks[1]"),  # a call without a provider id
        ("dropped", "$.messages[1].blocks[0].content[0]"),  # empty result text
        ("folded", "$.messages[2]"),
        ("dropped", "$.messages[3].blocks[1]"),
        ("dropped", "$.messages[4]"),  # participant name
    ])


def test_write_reused_call_ids_get_unique_ids():
    # tau-bench style: the same provider id on calls of two different turns.
    conv = Conversation(meta=Meta(provider="openai-chat", model="gpt-4o"), messages=(
        Message("user", (Text("two lookups"),)),
        Message("assistant", (_call("f", {"n": 1}, "call_one", "call_dup"),)),
        Message("tool", (_result("call_one", Text("1"), provider_id="call_dup"),)),
        Message("assistant", (_call("f", {"n": 2}, "call_two", "call_dup"),)),
        Message("tool", (_result("call_two", Text("2"), provider_id="call_dup"),)),
    ))
    body, entries = _write(conv)
    assert check_request(body) == []
    assert [m["content"][0].get("id") or m["content"][0].get("tool_use_id") for m in body["messages"][1:]] == [
        "call_dup", "call_dup", "call_two", "call_two"]
    # gpt-4o is not an Anthropic model: dropped, and the default model synthesized beside max_tokens.
    assert entries == [("dropped", "$.meta.model"), ("synthesized", "$"), ("synthesized", "$"),
                       ("synthesized", "$.messages[3].blocks[0]")]


def test_write_response_from_other_origin():
    conv = Conversation(meta=Meta(provider="openai-chat", shape="response", model="gpt-4o", response_id="chatcmpl-1",
                                  stop_reason="tool_calls", usage={"prompt_tokens": 5, "completion_tokens": 7,
                                                                   "total_tokens": 12}),
                        messages=(Message("user", (Text("q"),)),
                                  Message("assistant", (_call("f", {"a": 1}, "call_1", "call_1"),))))
    body, entries = _write(conv, "response")
    assert body == {"id": "chatcmpl-1", "type": "message", "role": "assistant", "model": "gpt-4o",
                    "content": [{"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}}],
                    "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 7}}
    assert entries == [("dropped", "$.messages[0]"), ("dropped", "$.meta.usage")]


def test_same_format_serialize_keeps_unset_arguments_visible():
    # Anthropic input is always an object, so an UNSET argument can only come from elsewhere.
    conv = anthropic.parse(_fixture("request_tools.json"))
    assert all(b.arguments is not UNSET for m in conv.messages for b in m.blocks if isinstance(b, ToolCall))
