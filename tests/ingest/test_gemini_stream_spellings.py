"""Gemini stream chunks as Python callers log them: each chunk's `model_dump()`, in snake_case, with null
for every field left out. They reassemble into the same response as the API's own JSON."""

from __future__ import annotations

import json

from google.genai import types

from pipeline import formats
from pipeline.ingest import iter_parsed
from pipeline.ingest.streams import reassemble

META = {"modelVersion": "gemini-2.5-pro", "responseId": "r1"}


def _dumped(chunks: list[dict], **options) -> list[dict]:
    return [types.GenerateContentResponse.model_validate(c).model_dump(mode="json", **options) for c in chunks]


def _parts(body: dict) -> list[dict]:
    return formats.parse(body, "gemini", "response").messages[0].blocks


def test_dumped_text_chunks_join_as_the_api_sends_them():
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}], **META},
              {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo", "thoughtSignature": "c2ln"}]},
                               "finishReason": "STOP", "index": 0}], **META}]
    for logged in (chunks, _dumped(chunks)):
        (text,) = _parts(reassemble(logged, "gemini"))
        assert (text.text, text.signature) == ("Hello", "c2ln")


def test_dumped_streamed_call_arguments_are_assembled():
    # Vertex streams a call's arguments (streamFunctionCallArguments) as partialArgs across chunks.
    def chunk(call: dict, **candidate) -> dict:
        return {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": call}]}, "index": 0,
                                **candidate}], **META}

    chunks = [chunk({"name": "book", "willContinue": True}),
              chunk({"partialArgs": [{"jsonPath": "$.city", "stringValue": "Par", "willContinue": True}],
                     "willContinue": True}),
              chunk({"partialArgs": [{"jsonPath": "$.city", "stringValue": "is"},
                                     {"jsonPath": "$.nights", "numberValue": 2},
                                     {"jsonPath": "$.pets", "boolValue": False},
                                     {"jsonPath": "$.note", "nullValue": "NULL_VALUE"}], "willContinue": True}),
              chunk({}, finishReason="STOP")]
    for logged in (chunks, _dumped(chunks), _dumped(chunks, exclude_none=True)):
        (call,) = _parts(reassemble(logged, "gemini"))
        assert (call.name, call.arguments) == ("book", {"city": "Paris", "nights": 2, "pets": False, "note": None})


def test_a_file_of_dumped_chunks_is_one_response(tmp_path):
    # A dumped chunk says `finish_reason: null` until the last: the array is a stream, not two records.
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}], **META},
              {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}, "finishReason": "STOP",
                               "index": 0}], **META}]
    path = tmp_path / "chunks.json"
    path.write_text(json.dumps(_dumped(chunks)))
    [parsed] = iter_parsed([path])
    assert [b.text for b in parsed.conversation.messages[0].blocks] == ["Hello"]
