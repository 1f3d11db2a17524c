"""A JSON array of stream chunks in a `.json` file (Gemini `streamGenerateContent` without SSE, chunks a
logger collected), or the chunks one per line in a `.jsonl` file, is one logged stream: read as the
responses it reassembles into, exactly as the same chunks in a stream log are, never as one record per
chunk."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from corpus import CORPUS, corpus_available, params
from pipeline.errors import InputError
from pipeline.ingest import iter_parsed
from pipeline.ingest.streams import is_chunk
from pipeline.ingest.streams.framing import split


def _stream_logs() -> list[tuple[str, Path]]:
    if not corpus_available():
        return []
    return [(str(p.relative_to(CORPUS)), p) for p in sorted(CORPUS.rglob("*.chunks.txt"))]


STREAMS = _stream_logs()


def _outcomes(path: Path) -> list[tuple[str, object]]:
    """Each record's conversation (its source aside) or its error's code and path."""
    out = []
    for parsed in iter_parsed([path]):
        suffix = parsed.source.split(":", 1)[1].lstrip("0123456789")  # "#responses[i]" or ""
        if parsed.error is not None:
            out.append((suffix, (parsed.error.code, parsed.error.path.replace("$.events", "$"))))
        else:
            conv = msgspec.structs.replace(parsed.conversation, meta=msgspec.structs.replace(
                parsed.conversation.meta, source=None))
            out.append((suffix, msgspec.json.encode(conv)))
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("path", params(STREAMS))
def test_chunk_array_reads_as_its_stream_log(path, tmp_path):
    try:
        events = [event.data for event in split(path.read_text(encoding="utf-8")).events]
    except InputError:  # a corrupt log: no chunks to put in an array, and its reading rejects it
        assert [error for _, (error, _) in _outcomes(path)] == ["invalid_stream"]
        return
    array = tmp_path / "chunks.json"
    array.write_text(json.dumps(events, indent=1), encoding="utf-8")
    assert is_chunk(events[0])
    assert _outcomes(array) == _outcomes(path)
    lines = tmp_path / "chunks.jsonl"
    lines.write_text("".join(json.dumps(e) + "\n" for e in events if isinstance(e, dict)), encoding="utf-8")
    expected = _outcomes(path)
    if all(isinstance(e, dict) for e in events):  # an OpenAI [DONE] has no line of its own in JSON lines
        assert _outcomes(lines) == expected


def test_chunks_one_per_line_in_a_jsonl_file_are_one_stream(tmp_path):
    """What `for chunk in stream: log.write(chunk.model_dump_json() + "\\n")` leaves: a Chat stream whose tool
    call arrives in pieces, then the usage chunk with no choices."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1767225600, "model": "gpt-4o-mini"}
    deltas = [{"role": "assistant", "content": None},
              {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}]
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}})
    path = tmp_path / "stream.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in chunks))
    (parsed,) = iter_parsed([path])
    call = parsed.conversation.messages[0].blocks[0]
    assert (call.name, call.arguments, parsed.conversation.meta.usage["total_tokens"]) == (
        "get_weather", {"city": "Oslo"}, 14)


def test_corpus_has_every_provider_streams():
    if not corpus_available():
        pytest.skip("no corpus")
    folders = {p.parent.name for _, p in STREAMS}
    assert {"vercel_ai_anthropic", "vercel_ai_google", "vercel_ai_openai_chat", "vercel_ai_openai_responses"} <= folders


def _gemini(text: str, finish: str | None = None) -> dict:
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def test_whole_gemini_responses_stay_records(tmp_path):
    """Finished Gemini responses are records, one each: only a chunk with no finishReason yet starts a stream."""
    path = tmp_path / "responses.json"
    path.write_text(json.dumps([_gemini("one", "STOP"), _gemini("two", "STOP")]))
    parsed = list(iter_parsed([path]))
    assert [p.conversation.messages[0].blocks[0].text for p in parsed] == ["one", "two"]
    stream = tmp_path / "stream.json"
    stream.write_text(json.dumps([_gemini("Hel"), _gemini("lo", "STOP")]))
    (parsed,) = iter_parsed([stream])
    assert parsed.error is None
    assert [b.text for b in parsed.conversation.messages[0].blocks] == ["Hello"]


def test_a_cut_stream_is_one_rejection_at_its_chunk(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(json.dumps([_gemini("Hel"), _gemini("lo")]))
    (parsed,) = iter_parsed([path])
    assert parsed.conversation is None and parsed.error.code == "truncated_stream"
    assert parsed.error.path == "$[1]" and parsed.source == f"{path}:1"


def test_an_anthropic_error_event_first_is_still_a_record(tmp_path):
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert not is_chunk(error)
    assert is_chunk({"type": "message_start", "message": {"id": "m", "content": []}})
    assert is_chunk({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "x"}}]})
    assert is_chunk({"type": "response.created", "response": {"id": "r"}})
    assert not is_chunk(_gemini("done", "STOP")) and not is_chunk({"messages": []}) and not is_chunk([1])
    # Whole responses of the other formats are records too.
    assert not is_chunk({"type": "message", "role": "assistant", "content": [{"type": "text", "text": "x"}]})
    assert not is_chunk({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant"}}]})
    assert not is_chunk({"object": "response", "output": [], "status": "completed"})
