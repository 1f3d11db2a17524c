"""Streamed-response reassembly, on the corpus's real streams and on hand-written samples.

The corpus holds two kinds of streams: vercel's `NAME.chunks.txt` (one chunk per line, many with a
non-streamed twin `NAME.json`) and pydantic-ai cassettes whose response bodies are raw SSE text.
The twins were recorded by separate calls, so they share structure (block types, tool names, parsed
arguments) but not generated text or ids; `TWIN_EXCEPTIONS` lists the pairs where the model behaved
differently in the two calls, checked by hand.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import CORPUS, corpus_available, iter_interactions, params
from pipeline import formats
from pipeline.conversation import tool_calls
from pipeline.errors import ConfigError, InputError, ShapeError
from pipeline.ingest.streams import detect_stream, reassemble, reassemble_all, reassemble_one

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "streams"
FOLDER_FORMAT = {"vercel_ai_anthropic": "anthropic", "vercel_ai_openai_chat": "openai-chat",
                 "vercel_ai_openai_responses": "openai-responses", "vercel_ai_google": "gemini",
                 "pydantic_ai_anthropic": "anthropic", "pydantic_ai_openai_chat": "openai-chat",
                 "pydantic_ai_openai_responses": "openai-responses", "pydantic_ai_google": "gemini"}
# Real streams that must fail, and how: an error event, and a fixture line that is not valid JSON.
BROKEN = {"vercel_ai_openai_responses/openai-error.1.chunks.txt": ("stream_error", "$.events[2]"),
          "vercel_ai_openai_responses/parallel-tool-call-wrapper.1.chunks.txt": ("invalid_stream", "$.events[0]")}
# Twins where the two recordings differ in what the model did, so only some structure is shared.
# "types": same block/item types, different generated arguments; "none": different turns altogether.
TWIN_EXCEPTIONS = {
    "anthropic-code-execution-20250825.1": "types",  # the model wrote different script text
    "anthropic-code-execution-20250825.2": "types",
    "anthropic-json-tool.1": "types",  # invented different weather data
    "anthropic-web-fetch-tool-20260209.1": "types",  # different code around the same call
    "anthropic-tool-search-bm25.1": "types",  # the stream holds two turns; the first differs in query
    "anthropic-tool-search-regex.1": "types",
    "anthropic-code-execution-20250825.pptx-skill": "none",  # 43 vs 146 blocks: different runs
    "anthropic-code-execution-file-upload.1": "none",
    "anthropic-web-search-tool.1": "none",
    "anthropic-programmatic-tool-calling.1": "none",  # the stream is 15 turns, the twin one
    "openai-image-generation-tool.1": "none",
    "openai-mcp-tool.1": "none",
    "openai-web-search-tool.1": "none",
    "openai-reasoning-encrypted-content.1": "none",  # the stream is 4 turns of another run
}


def _corpus_streams() -> list[tuple[str, tuple[str, str, str]]]:
    """(id, (id, folder, text)) for every stream in the corpus."""
    if not corpus_available():
        return []
    out = []
    for folder in ("vercel_ai_anthropic", "vercel_ai_openai_chat", "vercel_ai_openai_responses", "vercel_ai_google"):
        for path in sorted((CORPUS / folder).glob("*.chunks.txt")):
            key = f"{folder}/{path.name}"
            out.append((key, (key, folder, path.read_text())))
    for key, interaction in iter_interactions():
        response = interaction["response"]
        if "event-stream" in (response.get("content_type") or "") and response.get("body"):
            out.append((key, (key, key.split("/")[0], response["body"])))
    return out


def _twins() -> list[tuple[str, tuple[str, str, str, dict]]]:
    if not corpus_available():
        return []
    out = []
    for folder in ("vercel_ai_anthropic", "vercel_ai_openai_chat", "vercel_ai_openai_responses", "vercel_ai_google"):
        for path in sorted((CORPUS / folder).glob("*.chunks.txt")):
            name = path.name.removesuffix(".chunks.txt")
            twin = path.with_name(name + ".json")
            if twin.exists() and f"{folder}/{path.name}" not in BROKEN:
                out.append((name, (name, folder, path.read_text(), json.loads(twin.read_text()))))
    return out


STREAMS = _corpus_streams()
TWINS = _twins()


def _raw_payloads(text: str) -> list:
    """The JSON payloads of a stream, split here independently of pipeline.streams.framing."""
    if text.lstrip().startswith("data:") or text.lstrip().startswith("event:") or text.lstrip().startswith(":"):
        blocks = re.split(r"\r?\n\r?\n", text)
        payloads = ["\n".join(line[5:].strip() for line in b.splitlines() if line.startswith("data:")) for b in blocks]
        return [p if p == "[DONE]" else json.loads(p) for p in payloads if p]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --- every real stream --------------------------------------------------------------------------

@pytest.mark.parametrize("item", params(STREAMS))
def test_corpus_stream_reassembles(item):
    key, folder, text = item
    fmt = FOLDER_FORMAT[folder]
    assert detect_stream(text) == fmt
    if key in BROKEN:
        code, path = BROKEN[key]
        with pytest.raises(InputError) as err:
            reassemble_all(text)
        assert (err.value.code, err.value.path) == (code, path)
        return
    found = reassemble_all(text)
    payloads = [p for p in _raw_payloads(text) if p != "[DONE]"]
    assert found and all(r.format == fmt for r in found)
    match fmt:
        case "anthropic":
            # One exchange per message_stop; as many blocks as content_block_start events, plus the
            # blocks some turns already carry inside message_start (programmatic tool calling).
            assert len(found) == sum(p["type"] == "message_stop" for p in payloads)
            if not any(r.notes for r in found):  # repeated / spliced starts are tested on their own
                starts = sum(p["type"] == "content_block_start" for p in payloads)
                preset = sum(len(p["message"]["content"]) for p in payloads if p["type"] == "message_start")
                assert sum(len(r.body["content"]) for r in found) == starts + preset
            for r in found:
                assert r.body["type"] == "message" and r.body["stop_reason"]
                for block in r.body["content"]:
                    if block["type"] in ("tool_use", "server_tool_use", "mcp_tool_use"):
                        assert isinstance(block["input"], dict)
        case "openai-responses":
            assert len(found) == sum(p["type"] in ("response.completed", "response.incomplete") for p in payloads)
            for r in found:
                assert r.body["object"] == "response" and r.body["status"] in ("completed", "incomplete")
                assert r.body["output"]
        case "openai-chat":
            assert len(found) == 1
            for r in found:
                assert r.body["object"] == "chat.completion"
                assert all(c["finish_reason"] for c in r.body["choices"])
                texts = "".join(c["choices"][0]["delta"].get("content") or "" for c in payloads if c.get("choices"))
                message = r.body["choices"][0]["message"]
                # A turn of only tool calls has content null, as the non-streamed API answers it.
                assert message["content"] == (None if not texts and message.get("tool_calls") else texts)
        case "gemini":
            for r in found:
                assert all(c.get("finishReason") for c in r.body["candidates"])
                # No two adjacent text parts of the same kind: the API would have sent them as one.
                for c in r.body["candidates"]:
                    parts = c.get("content", {}).get("parts", [])
                    for a, b in zip(parts, parts[1:]):
                        if set(a) <= {"text", "thought"} and set(b) <= {"text", "thought"}:
                            assert bool(a.get("thought")) != bool(b.get("thought"))
                # Every functionCall the chunks carried whole is in the result, with its arguments.
                whole = [part["functionCall"] for p in payloads for c in p.get("candidates") or []
                         for part in (c.get("content") or {}).get("parts") or []
                         if "functionCall" in part and "args" in part["functionCall"]
                         and "willContinue" not in part["functionCall"]]
                got = [part["functionCall"] for c in r.body["candidates"] for part in c["content"]["parts"]
                       if "functionCall" in part]
                assert [w for w in whole] == [g for g in got if g in whole]


def _client_calls(fmt: str, body: dict) -> int:
    match fmt:
        case "anthropic":
            return sum(b["type"] == "tool_use" for b in body["content"])
        case "openai-chat":
            return sum(len(c["message"].get("tool_calls") or []) for c in body["choices"])
        case "openai-responses":
            return sum(i["type"] in ("function_call", "custom_tool_call") for i in body["output"])
        case "gemini":
            return sum("functionCall" in p for c in body["candidates"] for p in c.get("content", {}).get("parts", []))
    raise AssertionError(fmt)


@pytest.mark.parametrize("item", params(STREAMS))
def test_corpus_stream_parses_with_its_codec(item):
    key, folder, text = item
    if key in BROKEN:
        pytest.skip("a broken stream: no object to parse")
    fmt = FOLDER_FORMAT[folder]
    module = formats.get(fmt)
    for r in reassemble_all(text):
        try:
            conv = module.parse(r.body, shape="response")
        except NotImplementedError:
            pytest.skip(f"the {fmt} codec has not landed yet")
        # Every client-side call survives reassembly and parsing as a structured call.
        assert len(tool_calls(conv)) == _client_calls(fmt, r.body)


# --- twins: the same exchange recorded streamed and not -------------------------------------------

def _structure(fmt: str, body: dict) -> list:
    """Block types, tool names and parsed arguments: what two recordings of one exchange share."""
    match fmt:
        case "anthropic":
            return [(b["type"], b.get("name"), b.get("input")) for b in body["content"]]
        case "openai-responses":
            out = []
            for item in body["output"]:
                kind = item["type"]
                args = {"function_call": lambda: json.loads(item["arguments"]),
                        "custom_tool_call": lambda: item["input"]}.get(kind, lambda: None)()
                parts = [c.get("type") for c in item.get("content") or [] if isinstance(c, dict)]
                out.append((kind, item.get("name"), args, parts))
            return out
        case "openai-chat":
            return [(c["message"]["role"], c["finish_reason"],
                     [(t["function"]["name"], json.loads(t["function"]["arguments"]))
                      for t in c["message"].get("tool_calls") or []]) for c in body["choices"]]
        case "gemini":
            out = []
            for c in body["candidates"]:
                for p in c["content"]["parts"]:
                    call = p.get("functionCall")
                    out.append((sorted(set(p) - {"thoughtSignature"}), "thoughtSignature" in p,
                                call and call.get("name"), call and call.get("args")))
            return out
    raise AssertionError(fmt)


@pytest.mark.parametrize("item", params(TWINS))
def test_stream_matches_its_non_streamed_twin(item):
    name, folder, text, twin = item
    fmt = FOLDER_FORMAT[folder]
    # Multi-turn logs: the twin is a recording of the first turn.
    body = reassemble_all(text)[0].body
    level = TWIN_EXCEPTIONS.get(name, "structure")
    mine, theirs = _structure(fmt, body), _structure(fmt, twin)
    if level == "structure":
        assert mine == theirs
    elif level == "types":
        assert [m[0] for m in mine] == [t[0] for t in theirs]
        assert mine != theirs, "this pair now matches fully: drop it from TWIN_EXCEPTIONS"
    else:
        assert mine != theirs, "this pair now matches: drop it from TWIN_EXCEPTIONS"
    if body.get("id") is not None and body.get("id") == twin.get("id"):
        # Hand-made fixture pairs share their id, and then their content exactly.
        key = {"anthropic": "content", "openai-responses": "output"}[fmt]
        assert body[key] == twin[key]


def _events_complete(text: str) -> bool:
    """No sequence_number gaps, and every *.done text equals its deltas: the log kept every event."""
    payloads = [p for p in _raw_payloads(text) if p != "[DONE]"]
    numbers = [p["sequence_number"] for p in payloads if isinstance(p.get("sequence_number"), int)]
    for a, b in zip(numbers, numbers[1:]):
        if b not in (a + 1, 0):
            return False
    acc: dict = {}
    for p in payloads:
        key = (p.get("output_index"), p.get("content_index"), p.get("summary_index"))
        if p["type"] == "response.output_text.delta":
            acc[key] = acc.get(key, "") + p["delta"]
        elif p["type"] == "response.output_text.done" and acc.get(key, "") != p["text"]:
            return False
    return True


RESPONSES_STREAMS = [(k, v) for k, v in STREAMS if FOLDER_FORMAT[v[1]] == "openai-responses" and k not in BROKEN]


@pytest.mark.parametrize("item", params(RESPONSES_STREAMS))
def test_responses_delta_build_agrees_with_completed(item):
    _, _, text = item
    if not _events_complete(text):
        pytest.skip("the log left out events (trimmed fixture): only response.completed is complete")

    def view(entry: dict) -> tuple:
        kind = entry["type"]
        if kind == "message":
            return kind, [c.get("text", c.get("refusal")) for c in entry["content"]]
        if kind in ("function_call", "mcp_call"):
            return kind, entry["name"], json.loads(entry["arguments"] or "{}")
        if kind == "custom_tool_call":
            return kind, entry["name"], entry["input"]
        if kind == "reasoning":
            return (kind, [s["text"] for s in entry.get("summary") or []],
                    [c["text"] for c in entry.get("content") or []])
        if kind == "code_interpreter_call":
            return kind, entry.get("code")
        return (kind,)

    for r in reassemble_all(text):
        assert [view(i) for i in r.from_deltas["output"]] == [view(i) for i in r.body["output"]]


# --- cut streams: an error naming the event, never a wrong object ------------------------------------

# Single-exchange streams (a cut in a multi-exchange log can leave fewer, complete, exchanges).
TRUNCATION_SAMPLES = [(k, v) for k, v in STREAMS if k not in BROKEN and len(reassemble_all(v[2])) == 1]


def _check_cut(text: str, full: dict, at: int) -> None:
    cut = text[:at]
    try:
        got = reassemble(cut)
    except InputError as err:
        assert err.code in ("truncated_stream", "invalid_stream"), err
        assert re.fullmatch(r"\$\.events(\[\d+\])?", err.path), err.path
        return
    except ShapeError:
        assert not cut.strip() or detect_stream(cut) is None  # too little left to tell the format
        return
    # Only cuts after the end marker may succeed, and then with the full object. A Chat log kept
    # without [DONE] ends at finish_reason; its trailing usage chunk can be what the cut removed.
    if got != full and got.get("object") == "chat.completion":
        assert {**got, "usage": full["usage"]} == full
        return
    assert got == full


@pytest.mark.parametrize("item", params(TRUNCATION_SAMPLES))
def test_cut_at_event_boundaries(item):
    _, _, text = item
    full = reassemble(text)
    ends = [m.end() for m in re.finditer(r"\n", text)][:-1]
    # About 60 line boundaries spread over the stream, and every one of the last few lines, where
    # the end markers are.
    for at in sorted({0, *ends[:: max(1, len(ends) // 60)], *ends[-6:]}):
        _check_cut(text, full, at)


@pytest.mark.parametrize("item", params(TRUNCATION_SAMPLES[::4]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cut_anywhere(item, data):
    _, _, text = item
    at = data.draw(st.integers(min_value=0, max_value=max(len(text) - 1, 0)))
    _check_cut(text, reassemble(text), at)


# --- hand-written samples that follow the providers' documented streams --------------------------

@pytest.mark.parametrize("stream, expected, fmt", [
    ("anthropic_thinking_tool.sse", "anthropic_thinking_tool.json", "anthropic"),
    ("openai_chat_parallel_tools.sse", "openai_chat_parallel_tools.json", "openai-chat"),
    ("gemini_array.json", "gemini_array.expected.json", "gemini"),
])
def test_samples(stream, expected, fmt):
    text = (FIXTURES / stream).read_text()
    assert detect_stream(text) == fmt
    assert reassemble(text) == json.loads((FIXTURES / expected).read_text())
    assert reassemble(text, fmt=fmt) == reassemble(text)


def test_responses_sample_prefers_completed_and_agrees_with_deltas():
    text = (FIXTURES / "openai_responses_function_call.sse").read_text()
    found = reassemble_one(text)
    assert found.body["output"][1]["arguments"] == '{"city":"Oslo"}'
    assert found.from_deltas["output"][0]["summary"] == [{"type": "summary_text", "text": "Need the weather tool."}]
    assert found.from_deltas["output"][1]["arguments"] == found.body["output"][1]["arguments"]
    # A proxy that sends response.completed with an empty output: the events supply the items.
    chunks = [p for p in _raw_payloads(text)]
    chunks[-1]["response"]["output"] = []
    rebuilt = reassemble(chunks)
    assert [i["type"] for i in rebuilt["output"]] == ["reasoning", "function_call"]
    assert rebuilt["output"][1]["arguments"] == '{"city":"Oslo"}'


def test_provider_error_event_is_an_error_not_a_partial_message():
    with pytest.raises(InputError) as err:
        reassemble((FIXTURES / "anthropic_overloaded.sse").read_text())
    assert err.value.code == "stream_error" and err.value.path == "$.events[3]"
    assert "overloaded_error" in err.value.message


def test_broken_json_in_the_middle_is_invalid_and_at_the_end_truncated():
    lines = (FIXTURES / "anthropic_thinking_tool.sse").read_text().split("\n\n")
    broken = "\n\n".join(lines[:3] + [lines[3][:-5]] + lines[4:])
    with pytest.raises(InputError) as err:
        reassemble(broken)
    assert (err.value.code, err.value.path) == ("invalid_stream", "$.events[3]")
    assert "line 11" in err.value.message
    with pytest.raises(InputError) as err:
        reassemble("\n\n".join(lines[:3]) + "\n\n" + lines[3][:-5])
    assert (err.value.code, err.value.path) == ("truncated_stream", "$.events[3]")


def test_cut_gemini_array_names_the_chunk():
    text = (FIXTURES / "gemini_array.json").read_text()
    cut = text[: text.index("Checking") + 3]
    with pytest.raises(InputError) as err:
        reassemble(cut)
    assert (err.value.code, err.value.path) == ("truncated_stream", "$.events[2]")
    # Whole chunks but no closing bracket and no finishReason: cut after the fourth chunk.
    with pytest.raises(InputError) as err:
        reassemble(text[: text.index('"finishReason"') - 80].rsplit(",", 1)[0])
    assert err.value.code == "truncated_stream"


def test_chunk_list_input_is_not_mutated():
    chunks = _raw_payloads((FIXTURES / "openai_chat_parallel_tools.sse").read_text())
    before = copy.deepcopy(chunks)
    body = reassemble(chunks)
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "changed"
    assert chunks == before
    assert reassemble(chunks)["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"city": "Oslo"}'


def test_chat_chunks_without_done_end_at_finish_reason_but_sse_needs_done():
    text = (FIXTURES / "openai_chat_parallel_tools.sse").read_text()
    chunks = [c for c in _raw_payloads(text) if c != "[DONE]"]
    assert reassemble(chunks)["choices"][0]["finish_reason"] == "tool_calls"
    with pytest.raises(InputError) as err:
        reassemble(text.replace("data: [DONE]\n\n", ""))
    assert err.value.code == "truncated_stream" and "[DONE]" in err.value.message


def test_chat_reused_index_with_a_new_id_is_a_new_call():
    base = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta, finish=None):
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    calls = reassemble([
        chunk({"role": "assistant",
               "tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "g", "arguments": "{\"x\":"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        chunk({}, "tool_calls"),
    ])["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("a", "f", "{}"), ("b", "g", '{"x":1}')]


@pytest.mark.usefixtures("corpus")
def test_repeated_and_spliced_message_start():
    folder = CORPUS / "vercel_ai_anthropic"
    dup = reassemble_one((folder / "duplicate-message-start.chunks.txt").read_text())
    assert dup.body["content"] == [{"type": "text", "text": "Hello, World!"}]
    assert any("repeated message_start" in n for n in dup.notes)
    spliced = reassemble_one((folder / "spliced-message-start.chunks.txt").read_text())
    assert spliced.body["id"] == "msg_second"
    assert spliced.body["content"][0]["signature"] == "sig-second"
    assert spliced.body["content"][1]["input"] == {"value": "Sparkle Day"}
    assert any("msg_first was abandoned" in n for n in spliced.notes)


@pytest.mark.usefixtures("corpus")
def test_several_exchanges_need_reassemble_all():
    text = (CORPUS / "vercel_ai_openai_responses" / "openai-shell-tool.1.chunks.txt").read_text()
    with pytest.raises(InputError) as err:
        reassemble(text)
    assert err.value.code == "several_responses" and err.value.path == "$.events[12]"
    assert [r.first_event for r in reassemble_all(text)] == [0, 12]


@pytest.mark.usefixtures("corpus")
def test_vertex_streamed_function_arguments():
    folder = CORPUS / "vercel_ai_google"
    name = "google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt"
    body = reassemble((folder / name).read_text())
    (part,) = body["candidates"][0]["content"]["parts"]
    assert part["functionCall"] == {"name": "writeItems", "args": {"operations": [
        {"action": "add", "description": "Fresh red apple", "itemid": "apple_001", "price": 0.5},
        {"action": "add", "description": "Ripe yellow banana", "itemid": "banana_001", "price": 0.3}]}}
    assert part["thoughtSignature"].startswith("AY89a19Z")
    nested = reassemble((folder / "google-vertex-stream-tool-call-arguments-nested.1.chunks.txt").read_text())
    (part,) = nested["candidates"][0]["content"]["parts"]
    recipe = part["functionCall"]["args"]["recipe"]
    assert len(recipe["ingredients"]) == 10 and all(set(i) == {"amount", "name"} for i in recipe["ingredients"])
    assert recipe["steps"][-1] == "Let stand for 15 minutes before serving."


def test_unknown_format_name_lists_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        reassemble("data: {}\n\n", fmt="cohere")
    assert "anthropic" in err.value.message and "gemini" in err.value.message


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.lists(st.dictionaries(st.text(max_size=5), st.integers()), max_size=3)))
def test_detect_stream_never_raises(value):
    assert detect_stream(value) in (None, "anthropic", "openai-chat", "openai-responses", "gemini")


def test_sse_log_without_blank_lines_between_events():
    # Some loggers drop the blank lines; each `data:` line is then still one event.
    text = (FIXTURES / "anthropic_thinking_tool.sse").read_text()
    dense = "\n".join(line for line in text.splitlines() if line.strip()) + "\n"
    assert reassemble(dense) == json.loads((FIXTURES / "anthropic_thinking_tool.json").read_text())
    with pytest.raises(InputError) as err:
        reassemble(dense[:-10])
    assert (err.value.code, err.value.path) == ("truncated_stream", "$.events[18]")


# --- protocol errors, one per branch: chunk lists built from the documented event shapes ---------

_MSG = {"type": "message_start", "message": {"id": "msg_x", "type": "message", "role": "assistant", "model": "m",
                                             "content": [], "stop_reason": None, "usage": {"input_tokens": 1}}}
_TOOL = {"type": "content_block_start", "index": 0,
         "content_block": {"type": "tool_use", "id": "toolu_x", "name": "f", "input": {}}}
_RESP = {"type": "response.created", "response": {"id": "resp_x", "object": "response", "output": []}}


@pytest.mark.parametrize("chunks, code, path", [
    pytest.param([_MSG, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}],
                 "invalid_stream", "$.events[1]", id="anthropic-delta-before-start"),
    pytest.param([_MSG, _TOOL, {"type": "content_block_delta", "index": 0,
                                "delta": {"type": "input_json_delta", "partial_json": "{\"a\": 1,"}},
                  {"type": "content_block_stop", "index": 0}],
                 "invalid_stream", "$.events[3]", id="anthropic-input-not-json"),
    pytest.param([_MSG, _TOOL, {"type": "message_stop"}], "invalid_stream", "$.events[2]",
                 id="anthropic-stop-with-open-block"),
    pytest.param([_MSG, {"type": "message_stop"}, {"type": "content_block_start", "index": 0,
                                                   "content_block": {"type": "text", "text": ""}}],
                 "invalid_stream", "$.events[2]", id="anthropic-block-after-stop"),
    pytest.param([_MSG, _TOOL], "truncated_stream", "$.events[1]", id="anthropic-no-stop"),
    pytest.param([_RESP, {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
                          "delta": "x"}], "invalid_stream", "$.events[1]", id="responses-delta-unknown-item"),
    pytest.param([_RESP, {"type": "response.failed", "response": {"error": {"code": "server_error",
                                                                           "message": "boom"}}}],
                 "stream_error", "$.events[1]", id="responses-failed"),
    pytest.param([_RESP], "truncated_stream", "$.events[0]", id="responses-no-completed"),
    pytest.param([{"candidates": [{"content": {"parts": [{"functionCall": {"partialArgs": [
        {"jsonPath": "$.a", "stringValue": "x"}]}}], "role": "model"}}]}],
                 "invalid_stream", "$.events[0]", id="gemini-partial-args-without-call"),
    pytest.param([{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}],
                 "stream_error", "$.events[0]", id="gemini-error-object"),
    pytest.param([{"candidates": [{"content": {"parts": [{"text": "hal"}], "role": "model"}}]}],
                 "truncated_stream", "$.events[0]", id="gemini-no-finish-reason"),
    pytest.param([{"object": "chat.completion.chunk", "id": "c", "choices": [
        {"index": 0, "delta": {"content": "x"}, "finish_reason": None}]},
                  {"error": {"message": "upstream died", "type": "server_error"}}],
                 "stream_error", "$.events[1]", id="chat-error-chunk"),
])
def test_protocol_errors(chunks, code, path):
    with pytest.raises(InputError) as err:
        reassemble(chunks)
    assert (err.value.code, err.value.path) == (code, path)


def test_responses_incomplete_is_a_response():
    body = reassemble([_RESP, {"type": "response.incomplete", "response": {
        "id": "resp_x", "object": "response", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"}, "output": []}}])
    assert body["status"] == "incomplete" and body["incomplete_details"]["reason"] == "max_output_tokens"


def test_gemini_blocked_prompt_is_complete_without_candidates():
    body = reassemble([{"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}}])
    assert body == {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}}


def test_chat_several_choices_and_legacy_function_call():
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body = reassemble([
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "A"}, "finish_reason": None},
                             {"index": 1, "finish_reason": None,
                              "delta": {"role": "assistant", "function_call": {"name": "f", "arguments": ""}}}]},
        {**base, "choices": [{"index": 1, "finish_reason": None,
                              "delta": {"function_call": {"arguments": "{\"q\": 1}"}}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "B"}, "finish_reason": "stop"},
                             {"index": 1, "delta": {}, "finish_reason": "function_call"}]},
    ])
    first, second = body["choices"]
    assert first["message"]["content"] == "AB" and first["finish_reason"] == "stop"
    assert second["message"]["function_call"] == {"name": "f", "arguments": "{\"q\": 1}"}
