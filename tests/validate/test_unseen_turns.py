"""Validation on logs outside the corpus: consecutive assistant messages are separate turns for pairing,
calls flattened after prose in one text block, and rules that hold for some models only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec.structs import replace

from pipeline import formats
from pipeline.conversation import Conversation, Message, Meta, Text, ToolCall
from pipeline.ingest import iter_parsed
from pipeline.validate import RULES, validate
from pipeline.validate.flattened import find_flattened

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "unseen_logs"
TOOLS = {"get_weather"}
CALL = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'


def _codes(conv: Conversation) -> list[tuple[str, str]]:
    return [(i.code, i.path) for i in validate(conv)]


# --- item: consecutive assistant messages ------------------------------------------------------------

def test_a_call_then_another_assistant_message_before_its_result_is_an_error():
    conv = formats.parse(json.loads((FIXTURES / "chat_call_then_assistant.json").read_text()), "openai-chat")
    issues = validate(conv)
    first = issues[0]
    assert (first.code, first.severity, first.path) == ("unanswered_call", "error", "$.messages[1].blocks[0]")
    assert "another assistant message at $.messages[2]" in first.message
    assert first.provider_path == "$.messages[1].tool_calls[0]"


def test_consecutive_assistant_messages_at_the_end_are_no_unanswered_call_at_end():
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Oslo"})
    user = Message(role="user", blocks=(Text("Oslo?"),))
    ends_on_call = Conversation(messages=(user, Message(role="assistant", blocks=(call,))))
    assert _codes(ends_on_call) == [("no_tool_list", "$.tools"), ("unanswered_call_at_end", "$.messages[1].blocks[0]")]
    then_text = replace(ends_on_call, messages=ends_on_call.messages + (Message(role="assistant", blocks=(Text("."),)),))
    assert ("unanswered_call", "$.messages[1].blocks[0]") in _codes(then_text)
    assert not any(code == "unanswered_call_at_end" for code, _ in _codes(then_text))


# --- item: calls flattened after prose ------------------------------------------------------------------

AFTER_PROSE = [
    ("json", "Let me check. " + CALL, CALL),
    ("json", "Sure thing!\nLet me check that for you. " + CALL + ".", CALL),
    ("llama_json", 'One moment: {"name": "get_weather", "parameters": {"city": "Oslo"}}',
     '{"name": "get_weather", "parameters": {"city": "Oslo"}}'),
    ("json", "Checking. [" + CALL + "]", "[" + CALL + "]"),
    ("react", 'Let me check. Action: get_weather\nAction Input: {"city": "Oslo"}',
     'Action: get_weather\nAction Input: {"city": "Oslo"}'),
    ("react", "Let me check. Action: get_weather[Oslo]", "Action: get_weather[Oslo]"),
    ("tool_code", 'Let me check. print(default_api.get_weather(city="Oslo"))',
     'print(default_api.get_weather(city="Oslo"))'),
    ("chatml", "Let me check. <tool_call>" + CALL + "</tool_call>", "<tool_call>" + CALL + "</tool_call>"),
    ("function_tag", 'Let me check. <function=get_weather>{"city": "Oslo"}</function>',
     '<function=get_weather>{"city": "Oslo"}</function>'),
    ("special_token", "Let me check. [TOOL_CALLS][" + CALL + "]", "[TOOL_CALLS][" + CALL + "]"),
    ("xml_invoke", 'Let me check. <invoke name="get_weather"><parameter name="city">Oslo</parameter></invoke>',
     '<invoke name="get_weather"><parameter name="city">Oslo</parameter></invoke>'),
]

NOT_AFTER_PROSE = [
    "Let me check. " + CALL.replace("get_weather", "lookup"),  # not a defined tool
    "Let me check. " + CALL + " and then I will tell you.",  # prose goes on: an example in a sentence
    '{"log": ' + CALL + "}",  # inside a larger JSON value
    'Log: {"data": ' + CALL + "}",
    "x = " + CALL,  # code assigning a value
    '"call": ' + CALL,
    "Write it as `" + CALL + "` please.",  # inline code
    "Let me check. Action: lookup\nAction Input: Oslo",  # loose syntax after prose: a defined tool only
    "Next Action: get_weather\nAction Input: Oslo",  # no sentence before it
]


@pytest.mark.parametrize("family, text, span", AFTER_PROSE)
def test_a_call_after_prose_in_the_same_block_is_found(family, text, span):
    found = find_flattened(text, TOOLS)
    assert [(f.family, text[f.start:f.end], f.name, f.known_tool) for f in found] == [
        (family, span, "get_weather", True)]


@pytest.mark.parametrize("text", NOT_AFTER_PROSE)
def test_prose_json_and_code_that_are_no_call_stay_unflagged(text):
    assert find_flattened(text, TOOLS) == []


def test_no_tool_list_no_flag_for_json_after_prose():
    assert find_flattened("Let me check. " + CALL, set()) == []


def test_the_rule_flags_assistant_text_only_through_the_codec():
    conv = formats.parse(json.loads((FIXTURES / "chat_flattened_after_prose.json").read_text()), "openai-chat")
    flagged = [(i.path, i.family, i.span) for i in validate(conv) if i.code == "flattened_tool_call"]
    assert flagged == [("$.messages[1].blocks[0]", "json", (14, 14 + len(CALL))),
                       ("$.messages[3].blocks[0]", "react", (6, 6 + len('Action: get_weather\nAction Input: '
                                                                         '{"city": "Bergen"}')))]


# --- item: model-scoped rules ---------------------------------------------------------------------------

def test_the_gemini_signature_rule_names_its_models():
    rule = RULES["gemini_call_signature"]
    assert rule.provider == "gemini" and "Gemini 3" in rule.description
    for model, applies in (("gemini-3-pro-preview", True), ("gemini-3.1-flash-lite", True),
                           ("models/gemini-3-flash-preview", True), ("gemini-2.5-flash", False),
                           ("gemini-2.0-flash", False), ("gemini-30-x", False), (None, False)):
        assert rule.applies_to(Conversation(meta=Meta(model=model))) == applies, model


def test_an_unsigned_first_call_is_an_error_for_gemini_3_only():
    parsed = list(iter_parsed([FIXTURES / "gemini_signature_by_model.json"]))
    models = [p.conversation.meta.model for p in parsed]
    assert models == ["gemini-2.5-flash", "gemini-3-pro-preview"]
    by_model = {p.conversation.meta.model: [i.code for i in validate(p.conversation)] for p in parsed}
    assert by_model == {"gemini-2.5-flash": [], "gemini-3-pro-preview": ["gemini_call_signature"]}


def test_the_model_comes_from_the_uri_when_no_body_names_it():
    record = json.loads((FIXTURES / "gemini_signature_by_model.json").read_text())["interactions"][1]
    del record["response"]["body"]["modelVersion"]
    from pipeline.ingest import parse_record
    conv = parse_record(record, "x:1")
    assert conv.meta.model == "gemini-3-pro-preview"
    assert [i.code for i in validate(conv)] == ["gemini_call_signature"]


def test_a_non_blocking_call_answered_as_a_generator_is_no_duplicate_result():
    # Each response but the last says willContinue; one after the last is a duplicate again.
    def answer(output, **more):
        return {"role": "user", "parts": [{"functionResponse": {"id": "t1", "name": "track", "response": {
            "output": output}, **more}}]}

    def codes(*answers):
        contents = [{"role": "user", "parts": [{"text": "Track P-7."}]},
                    {"role": "model", "parts": [{"functionCall": {"id": "t1", "name": "track", "args": {}}}]}]
        for item in answers:
            contents += [item, {"role": "model", "parts": [{"text": "Noted."}]}]
        tools = [{"functionDeclarations": [{"name": "track", "behavior": "NON_BLOCKING"}]}]
        return [i.code for i in validate(formats.parse({"contents": contents, "tools": tools}, "gemini"))]

    assert codes(answer("moving", willContinue=True), answer("delivered", scheduling="INTERRUPT")) == []
    assert codes(answer("moving", will_continue=True), answer("delivered")) == []
    assert codes(answer("moving"), answer("delivered")) == ["duplicate_result"]
