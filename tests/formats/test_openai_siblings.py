"""Chat Completions <-> Responses: what both OpenAI APIs carry travels between them (tool strictness, a
custom tool's grammar, image detail, refusals into Chat, the request settings both take), and the rest
is still ledgered."""

from __future__ import annotations

import copy

from formats.accept_openai_chat import check_request as chat_accepts
from formats.accept_openai_responses import check_request as responses_accepts
from pipeline import formats

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
LARK = "start: /[a-z ]+/"

CHAT = {
    "model": "gpt-5", "store": True, "metadata": {"team": "shop"}, "user": "u-1", "service_tier": "flex",
    "safety_identifier": "h-1", "prompt_cache_key": "shop", "reasoning_effort": "low", "verbosity": "high",
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is on the shelf?"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}",
                                                                         "detail": "high"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"sku": "A-1"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "3.50"},
        {"role": "assistant", "content": "It costs 3.50."}],
    "tools": [
        {"type": "function", "function": {"name": "lookup", "parameters": {
            "type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"],
            "additionalProperties": False}, "strict": True}},
        {"type": "custom", "custom": {"name": "sql", "format": {"type": "grammar",
                                                                 "grammar": {"definition": LARK, "syntax": "lark"}}}}],
}
RESPONSES = {
    "model": "gpt-5", "store": False, "reasoning": {"effort": "high", "summary": "auto"},
    "text": {"format": {"type": "text"}, "verbosity": "low"},
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "What is on the shelf?"},
                                     {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}",
                                      "detail": "low"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "refusal", "refusal": "I cannot tell prices."}]}],
    "tools": [
        {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}, "strict": True},
        {"type": "function", "name": "loose", "parameters": {"type": "object", "properties": {}}, "strict": False},
        {"type": "custom", "name": "sql", "format": {"type": "grammar", "syntax": "lark", "definition": LARK}}],
}


def _convert(body: dict, source: str, target: str):
    conv = formats.parse(copy.deepcopy(body), source)
    out, ledger = formats.serialize(conv, target)
    return out, " | ".join(f"{e.path} {e.reason}" for e in ledger)


def test_chat_to_responses_carries_what_both_take():
    body, said = _convert(CHAT, "openai-chat", "openai-responses")
    assert responses_accepts(body) == []
    lookup, sql = body["tools"]
    assert lookup["strict"] is True
    assert sql["format"] == {"type": "grammar", "syntax": "lark", "definition": LARK}
    assert body["input"][0]["content"][1]["detail"] == "high"
    assert {k: body[k] for k in ("store", "metadata", "user", "service_tier", "safety_identifier",
                                 "prompt_cache_key")} == {k: CHAT[k] for k in ("store", "metadata", "user",
                                                                              "service_tier", "safety_identifier",
                                                                              "prompt_cache_key")}
    assert body["reasoning"] == {"effort": "low"} and body["text"] == {"verbosity": "high"}
    assert "strict" not in said and "format" not in said and "detail" not in said and "field '" not in said


def test_responses_to_chat_carries_what_both_take():
    body, said = _convert(RESPONSES, "openai-responses", "openai-chat")
    assert chat_accepts(body) == []
    lookup, loose, sql = body["tools"]
    assert lookup["function"]["strict"] is True and "strict" not in loose["function"]  # false is Chat's default
    assert sql["custom"]["format"] == {"type": "grammar", "grammar": {"definition": LARK, "syntax": "lark"}}
    user, assistant = body["messages"]
    assert user["content"][1]["image_url"]["detail"] == "low"
    assert assistant["content"] == [{"type": "refusal", "refusal": "I cannot tell prices."}]
    assert (body["store"], body["reasoning_effort"], body["verbosity"], body["response_format"]) == (
        False, "high", "low", {"type": "text"})
    # What Chat has no place for is still said: the summary setting, the message item's id and status.
    assert "field 'reasoning.summary'" in said and "strict" not in said and "'refusal'" not in said


def test_both_ways_and_back_again():
    for body, a, b in ((CHAT, "openai-chat", "openai-responses"), (RESPONSES, "openai-responses", "openai-chat")):
        there, _ = _convert(body, a, b)
        back, _ = _convert(there, b, a)
        assert back["tools"] == body["tools"]
        content = back["messages" if a == "openai-chat" else "input"][0]["content"]
        assert content[1] == body["messages" if a == "openai-chat" else "input"][0]["content"][1]


def test_a_refusal_goes_into_responses_as_text_with_a_ledger_entry():
    """Responses takes a refusal part in input only inside an output message item, whose id the API issues."""
    chat = {"model": "gpt-5", "messages": [{"role": "user", "content": "Price?"},
                                          {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}]}
    body, said = _convert(chat, "openai-chat", "openai-responses")
    assert body["input"][1] == {"role": "assistant", "content": "No."}
    assert "openai-chat field 'refusal' has no equivalent in openai-responses" in said


def test_values_only_a_compatible_server_takes_stay_ledgered():
    groq = {"model": "qwen/qwen3-32b", "messages": [{"role": "user", "content": "Hi"}],
            "service_tier": "on_demand", "reasoning_effort": "default"}
    body, said = _convert(groq, "openai-chat", "openai-responses")
    assert "service_tier" not in body and "reasoning" not in body
    assert "field 'service_tier'" in said and "field 'reasoning_effort'" in said


def test_tool_choices_of_every_kind_travel_both_ways():
    lookup = {"name": "lookup", "parameters": {"type": "object", "properties": {}}}
    chat_tools = [{"type": "function", "function": lookup}, {"type": "custom", "custom": {"name": "sql"}}]
    messages = [{"role": "user", "content": "Go"}]
    for choice, expected in (
            ({"type": "custom", "custom": {"name": "sql"}}, {"type": "custom", "name": "sql"}),
            ({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
                {"type": "function", "function": {"name": "lookup"}}, {"type": "custom", "custom": {"name": "sql"}}]}},
             {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "lookup"},
                                                                      {"type": "custom", "name": "sql"}]})):
        chat = {"model": "gpt-5", "messages": messages, "tools": chat_tools, "tool_choice": choice}
        body, said = _convert(chat, "openai-chat", "openai-responses")
        assert body["tool_choice"] == expected and "tool_choice" not in said
        assert responses_accepts(body) == []
        back, said = _convert(body, "openai-responses", "openai-chat")
        assert back["tool_choice"] == choice and "tool_choice" not in said
        assert chat_accepts(back) == []


def test_a_choice_of_a_hosted_tool_stays_ledgered():
    body = {"model": "gpt-5", "input": "Search", "tools": [{"type": "web_search"}],
            "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search"}]}}
    chat, said = _convert(body, "openai-responses", "openai-chat")
    assert "tool_choice" not in chat and "field 'tool_choice'" in said


def test_a_response_objects_null_echoes_are_not_request_parameters():
    """A Responses object echoes every parameter, null when not set; `user: null` is no valid request."""
    response = {"id": "resp_1", "object": "response", "created_at": 1767225600, "status": "completed",
                "model": "gpt-5", "user": None, "safety_identifier": None, "previous_response_id": None,
                "store": True, "output": [{"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                                           "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]}]}
    conv = formats.parse(copy.deepcopy(response), "openai-responses")
    for target, accepts in (("openai-responses", responses_accepts), ("openai-chat", chat_accepts)):
        body, _ = formats.serialize(conv, target, shape="request")
        assert "user" not in body and "safety_identifier" not in body and body["store"] is True
        assert accepts(body) == []
