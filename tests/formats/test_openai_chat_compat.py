"""What OpenAI-compatible servers add to Chat Completions messages (Ollama, OpenRouter, vLLM: `reasoning`,
`reasoning_details`) marks a record as Chat, not as a look-alike another format could read differently."""

from __future__ import annotations

import pytest

from pipeline import formats

REASONING = {"role": "assistant", "content": "Hello.", "reasoning": "Greet back."}
DETAILS = {"role": "assistant", "content": "Hello.", "reasoning_details": [
    {"type": "reasoning.encrypted", "data": "ZW5j", "id": "rs_1", "format": "openai-responses-v1", "index": 0}]}


@pytest.mark.parametrize("assistant", [REASONING, DETAILS], ids=["reasoning", "reasoning_details"])
def test_compat_server_messages_are_chat(assistant):
    body = {"model": "openai/gpt-5", "messages": [{"role": "user", "content": "Hi"}, assistant,
                                                  {"role": "user", "content": "Bye"}]}
    for record, shape in ((body, "request"), (body["messages"], "messages")):
        found = formats.detect(record)
        assert (found.format, found.shape, found.certain) == ("openai-chat", shape, True)
    conv = formats.parse(body)
    out, ledger = formats.serialize(conv, "openai-chat")
    assert out == body and not ledger
