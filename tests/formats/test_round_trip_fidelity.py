"""A -> B -> A on requests as real clients send them: what B can carry comes back, every difference has a
ledger entry naming it, and the request parameters the formats share travel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import formats
from pipeline.formats.registry import _content_key

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "unseen_logs"
RECORDS: dict[str, dict] = json.loads((FIXTURES / "round_trip_requests.json").read_text())
NAMES = tuple(formats.FORMATS)
PAIRS = [(a, b) for a in NAMES for b in NAMES if a != b]

# Where each format keeps the parameters they share (Gemini names its model in the URL and streams by
# endpoint; Responses has no stop sequences; Anthropic no response format).
SHARED: dict[str, dict[str, tuple[str, ...]]] = {
    "openai-chat": {"model": ("model",), "stream": ("stream",), "temperature": ("temperature",), "top_p": ("top_p",),
                    "stop": ("stop",), "tool_choice": ("tool_choice",), "max_tokens": ("max_completion_tokens",),
                    "response_format": ("response_format",)},
    "openai-responses": {"model": ("model",), "stream": ("stream",), "temperature": ("temperature",),
                         "top_p": ("top_p",), "tool_choice": ("tool_choice",), "max_tokens": ("max_output_tokens",),
                         "response_format": ("text", "format")},
    "anthropic": {"model": ("model",), "stream": ("stream",), "temperature": ("temperature",), "top_p": ("top_p",),
                  "stop": ("stop_sequences",), "tool_choice": ("tool_choice",), "max_tokens": ("max_tokens",)},
    "gemini": {"temperature": ("generationConfig", "temperature"), "top_p": ("generationConfig", "topP"),
               "stop": ("generationConfig", "stopSequences"), "max_tokens": ("generationConfig", "maxOutputTokens"),
               "tool_choice": ("toolConfig", "functionCallingConfig"),
               "response_format": ("generationConfig", "responseMimeType")},
}
SAME_VENDOR = {frozenset(("openai-chat", "openai-responses"))}
CONVERSATION_KEYS = {"messages", "input", "contents", "system", "systemInstruction", "instructions", "tools"}


def _get(body: dict, path: tuple[str, ...]) -> Any:
    for key in path:
        body = body.get(key) if isinstance(body, dict) else None
    return body


def _there_and_back(a: str, b: str, record: dict | None = None):
    record = record if record is not None else RECORDS[a]
    conv = formats.parse(record, a)
    body, ledger_ab = formats.serialize(conv, b)
    back_conv = formats.parse(body, b)
    back, ledger_ba = formats.serialize(back_conv, a)
    return conv, body, ledger_ab, back_conv, back, ledger_ba


@pytest.mark.parametrize("a, b", PAIRS)
def test_shared_parameters_travel_and_the_rest_are_ledgered(a, b):
    _, body, ledger, *_ = _there_and_back(a, b)
    reasons = " | ".join(e.reason for e in ledger)
    for param, path in SHARED[a].items():
        carried = param in SHARED[b] and (param != "model" or frozenset((a, b)) in SAME_VENDOR)
        if carried:
            assert _get(body, SHARED[b][param]) is not None, (param, body)
        elif param == "model":  # dropped, naming whose it is or where Gemini wants it
            assert RECORDS[a]["model"] in reasons or "'model': Gemini names the model" in reasons, reasons
        else:
            assert any(f"'{key}" in reasons or f".{key}'" in reasons for key in path), (param, reasons)


@pytest.mark.parametrize("a, b", PAIRS)
def test_a_to_b_to_a_differs_only_where_a_ledger_says(a, b):
    conv, _, ledger_ab, back_conv, back, ledger_ba = _there_and_back(a, b)
    record = RECORDS[a]
    said = " | ".join(f"{e.path} {e.reason}" for e in ledger_ab + ledger_ba)
    for key in set(record) | set(back):
        if key in CONVERSATION_KEYS or record.get(key) == back.get(key):
            continue
        if isinstance(record.get(key), dict) and isinstance(back.get(key), dict) and key != "response_format":
            for sub in set(record[key]) | set(back[key]):
                if record[key].get(sub) != back[key].get(sub):
                    assert sub in said or key in said, (key, sub, said)
        else:  # a response format's lost parts are named by what they were: json_schema 'name', ...
            assert key in said or (key in ("response_format", "text") and "json_schema '" in said), (
                key, record.get(key), back.get(key), said)
    # The conversation itself (turns, blocks, tools) reads the same, up to layout.
    assert _content_key(back_conv) == _content_key(conv) or ledger_ab, (a, b)


@pytest.mark.parametrize("b", ["openai-responses", "anthropic"])
def test_a_chat_tool_messages_name_is_ledgered_where_it_cannot_go(b):
    _, _, ledger, _, back, _ = _there_and_back("openai-chat", b)
    assert [(e.kind, e.path) for e in ledger if "tool name" in e.reason] == [("dropped", "$.messages[2].blocks[0]")]
    assert "name" not in back["messages"][3]  # what the ledger said


def test_a_chat_tool_messages_name_travels_in_gemini_and_is_ledgered_coming_back():
    _, body, ledger, _, back, ledger_back = _there_and_back("openai-chat", "gemini")
    assert body["contents"][2]["parts"][0]["functionResponse"]["name"] == "get_weather"
    assert not [e for e in ledger if "tool name" in e.reason]
    # Chat's tool messages have no name field: coming back from Gemini, the ledger says it is left out.
    assert "name" not in back["messages"][3]
    assert [(e.kind, e.path) for e in ledger_back if "tool name" in e.reason] == [("dropped", "$.messages[2].blocks[0]")]
    assert back["messages"][3]["content"] == "7 C, rain"  # Gemini's {"output": text} is the text again


@pytest.mark.parametrize("b", ["openai-chat", "anthropic", "gemini"])
def test_a_user_input_item_with_empty_content_is_kept_or_ledgered(b):
    conv, body, ledger, back_conv, back, _ = _there_and_back("openai-responses", b)
    assert conv.messages[0].role == "user"
    if b == "openai-chat":  # Chat carries an empty user message: it comes back
        assert body["messages"][1] == {"role": "user", "content": ""}
        assert back["input"][0] == {"role": "user", "content": ""}
    else:  # the others refuse empty content: said so
        assert any(e.path.startswith("$.messages[0]") and e.kind == "dropped" for e in ledger), ledger


@pytest.mark.parametrize("b", ["openai-chat", "openai-responses", "anthropic"])
def test_gemini_layout_other_formats_cannot_keep_is_ledgered(b):
    _, _, ledger, _, back, _ = _there_and_back("gemini", b)
    by_path = {(e.kind, e.path): e.reason for e in ledger}
    assert "systemInstruction role 'user'" in by_path[("dropped", "$.system")]
    assert "parametersJsonSchema" in by_path[("folded", "$.tools[0]")]
    assert "role" not in back["systemInstruction"]
    declared = back["tools"][0]["functionDeclarations"][0]
    assert declared["parametersJsonSchema"] == {"type": "object", "properties": {"city": {"type": "string"}},
                                                "required": ["city"]}
    _, _, ledger, _, back, _ = _there_and_back("gemini", b, RECORDS["gemini-empty-config"])
    assert [(e.kind, e.path) for e in ledger if "generationConfig" in e.reason] == [("dropped", "$")]
    assert [e.reason for e in ledger if "generationConfig" in e.reason][0].endswith("is empty: nothing "
                                                                                    f"{b} could carry")
    # Anthropic requires max_tokens: the one it had to make up (ledgered) comes back, nothing else.
    assert back.get("generationConfig") == ({"maxOutputTokens": 4096} if b == "anthropic" else None)


def test_same_format_keeps_everything():
    for name, record in RECORDS.items():
        fmt = "gemini" if name.startswith("gemini") else name
        body, ledger = formats.serialize(formats.parse(record, fmt), fmt)
        assert body == record and ledger == [], name
