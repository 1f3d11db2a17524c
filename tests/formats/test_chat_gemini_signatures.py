"""Gemini's OpenAI-compatible endpoint returns a call's thought signature in the Chat tool call as
`extra_content.google.thought_signature`, and needs it back on later requests. It is the call's
signature: Chat writes it back where it came from, and Gemini writes it as the part's thoughtSignature."""

from __future__ import annotations

import copy

from pipeline import formats

SIGNATURE = "CiQB0e2Kb3x+c2lnbmVkIHRob3VnaHQ="


def _call(call_id: str, city: str, extra: dict | None = None) -> dict:
    call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'}}
    return call | ({"extra_content": extra} if extra is not None else {})


def _body(*calls: dict) -> dict:
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                               "required": ["city"]}}}]
    messages = [{"role": "user", "content": "Weather in Paris and London?"},
                {"role": "assistant", "content": None, "tool_calls": list(calls)}]
    messages += [{"role": "tool", "tool_call_id": c["id"], "content": "sunny"} for c in calls]
    return {"model": "gemini-3-pro-preview", "messages": messages, "tools": tools}


# Parallel calls: only the first carries the step's signature.
BODY = _body(_call("call_a", "Paris", {"google": {"thought_signature": SIGNATURE}}), _call("call_b", "London"))


def _calls(conv):
    return [b for m in conv.messages for b in m.blocks if type(b).__name__ == "ToolCall"]


def test_the_signature_is_the_calls_and_chat_writes_it_back_where_it_was():
    conv = formats.parse(copy.deepcopy(BODY))
    assert [c.signature for c in _calls(conv)] == [SIGNATURE, None]
    assert all("openai-chat" not in c.extras for c in _calls(conv))  # nothing else was in extra_content
    out, ledger = formats.serialize(conv, "openai-chat")
    assert out == BODY and not ledger


def test_gemini_writes_it_as_the_function_call_parts_thought_signature():
    conv = formats.parse(copy.deepcopy(BODY))
    out, ledger = formats.serialize(conv, "gemini")
    parts = [p for c in out["contents"] for p in c["parts"] if "functionCall" in p]
    assert [(p["functionCall"]["name"], p.get("thoughtSignature")) for p in parts] == [
        ("get_weather", SIGNATURE), ("get_weather", None)]
    assert not [e for e in ledger if "signature" in e.reason or "extra_content" in e.reason]
    # ...and back from Gemini to Chat the signature is still the call's: the Chat writer has no marker
    # for it there, so it is ledgered, not invented into a field OpenAI itself does not take.
    again, ledger = formats.serialize(formats.parse(out), "openai-chat")
    assert "extra_content" not in again["messages"][1]["tool_calls"][0]
    assert [e.kind for e in ledger if "thought signature" in e.reason] == ["dropped"]


def test_other_extra_content_stays_beside_it():
    extra = {"google": {"thought_signature": SIGNATURE, "cached": True}, "vendor": {"trace": "t-1"}}
    body = _body(_call("call_a", "Paris", extra))
    conv = formats.parse(copy.deepcopy(body))
    (call,) = _calls(conv)
    assert call.signature == SIGNATURE
    assert call.extras["openai-chat"]["extra_content"] == {"google": {"cached": True}, "vendor": {"trace": "t-1"}}
    out, ledger = formats.serialize(conv, "openai-chat")
    assert out == body and not ledger


def test_a_signature_that_is_not_text_is_left_as_logged():
    body = _body(_call("call_a", "Paris", {"google": {"thought_signature": 7}}))
    conv = formats.parse(copy.deepcopy(body))
    (call,) = _calls(conv)
    assert call.signature is None and call.extras["openai-chat"]["extra_content"] == {"google": {"thought_signature": 7}}
    out, _ = formats.serialize(conv, "openai-chat")
    assert out == body
