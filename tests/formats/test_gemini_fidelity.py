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
    # Written as the next request, the content keeps its own field and drops the candidate's.
    out, entries = _write(conv, "request")
    assert out["contents"] == [{"role": "model", "parts": [{"text": "Hi"}], "futureContentField": 1}]
    assert sorted(reason.split("'")[1] for _, _, reason in entries if "candidate field" in reason) == [
        "futureCandidateField", "index"]
