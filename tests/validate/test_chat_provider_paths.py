"""Issue locations in an OpenAI Chat record: each canonical block points at the field that holds it."""

from __future__ import annotations

from pipeline import formats
from pipeline.validate import validate
from pipeline.validate.rules import provider_path


def test_legacy_calls_reasoning_keys_and_refusals_are_located():
    chat = {"model": "m", "messages": [
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_time", "arguments": "[]"}},
        {"role": "function", "name": "get_time", "content": "noon"},
        {"role": "assistant", "content": "Noon.", "reasoning": "Read the clock.", "refusal": "No more."}]}
    conv = formats.parse(chat, "openai-chat")
    issues = {i.code: i.provider_path for i in validate(conv)}
    assert issues["arguments_not_object"] == "$.messages[1].function_call"
    last = conv.messages[3]
    assert [provider_path(conv, (3, bi)) for bi in range(len(last.blocks))] == [
        "$.messages[3].reasoning", "$.messages[3].content", "$.messages[3].refusal"]
