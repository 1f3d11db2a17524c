"""Requests as providers accept them, from logs outside the corpus: tool declarations with
`description: null`, Gemini `tools` as one object, and Chat messages the API would refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import formats
from pipeline.errors import ParseError
from pipeline.ingest import iter_parsed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "unseen_logs"


def _records(name: str) -> list:
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize("index, provider", [(0, "openai-chat"), (1, "openai-responses"), (2, "anthropic"),
                                             (3, "gemini")])
def test_null_description_is_no_description_and_round_trips(index, provider):
    record = _records("tools_null_description.json")[index]
    conv = formats.parse(record, provider)
    assert [(t.name, t.description) for t in conv.tools] == [("get_weather", None)]
    assert conv.tools[0].parameters["required"] == ["city"]
    body, ledger = formats.serialize(conv, provider)
    assert body == record and ledger == []
    for target in formats.FORMATS:  # null and absent mean the same: nothing to ledger elsewhere
        _, ledger = formats.serialize(conv, target)
        assert not [e for e in ledger if "description" in e.reason], (target, ledger)


def test_gemini_tools_as_one_object():
    record = json.loads((FIXTURES / "gemini_tools_object.json").read_text())
    conv = formats.parse(record, "gemini")
    assert [t.name for t in conv.tools] == ["get_weather", "get_time"]
    assert conv.tools[0].parameters == {"type": "object", "properties": {"city": {"type": "string"}},
                                        "required": ["city"]}
    body, ledger = formats.serialize(conv, "gemini")
    assert body == record and ledger == []  # written back as the one object it was
    chat, _ = formats.serialize(conv, "openai-chat")
    assert [t["function"]["name"] for t in chat["tools"]] == ["get_weather", "get_time"]
    assert formats.detect(record).format == "gemini"


def test_gemini_tools_object_errors_are_located_under_it():
    with pytest.raises(ParseError) as err:
        formats.parse({"contents": [], "tools": {"functionDeclarations": [{"description": "no name"}]}}, "gemini")
    assert err.value.path == "$.tools.functionDeclarations[0]"
    with pytest.raises(ParseError) as err:
        formats.parse({"contents": [], "tools": [{"functionDeclarations": [{"name": "f", "description": 3}]}]},
                      "gemini")
    assert err.value.path == "$.tools[0].functionDeclarations[0].description"


def test_chat_user_or_system_message_without_content_is_rejected_where_it_is():
    parsed = list(iter_parsed([FIXTURES / "chat_contentless_messages.json"]))
    errors = [(p.error.code, p.error.path) if p.error else None for p in parsed]
    assert errors == [("missing_content", "$.messages[0].content"), ("missing_content", "$.messages[3].content"),
                      None]  # an assistant turn holding only calls needs no content
    assert "system message needs 'content'" in parsed[0].error.message
    assert parsed[1].error.source.endswith("chat_contentless_messages.json:15")
