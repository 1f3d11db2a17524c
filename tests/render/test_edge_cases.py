"""Divergences the generated differential tests (test_differential.py) found, each pinned by a small
conversation: the built-in render against its reference, or parse-back against what was rendered."""

from __future__ import annotations

import pytest

from pipeline.conversation import Conversation, Message, Text, Tool, ToolCall, ToolResult
from pipeline.render import check_roundtrip, load_tokenizer, render


def _user(text: str) -> Message:
    return Message(role="user", blocks=(Text(text),))


def _answer(text: str) -> Message:
    return Message(role="assistant", blocks=(Text(text),))


# --- parse-back -----------------------------------------------------------------------------------

@pytest.mark.parametrize("family, tokenizer", [("chatml", "qwen2.5"), ("qwen3", "qwen3")])
def test_tool_names_and_descriptions_parse_back_through_the_normalizer(family, tokenizer):
    """Qwen's tokenizer normalizes text to NFC, tool definitions and call names included: parse-back
    compares them normalized, as it does message text (a decomposed é read back composed is the same)."""
    name = "cafe\u0301"
    conv = Conversation(
        tools=(Tool(name=name, description="Caf\u0065\u0301 menu", parameters={"type": "object", "properties": {
            "q": {"type": "string", "description": "e\u0301"}}}),),
        messages=(_user("menu?"), Message(role="assistant", blocks=(ToolCall(id="c1", name=name, arguments={}),)),
                  Message(role="tool", blocks=(ToolResult(call_id="c1", content=(Text("soup"),)),)),
                  _answer("Soup.")))
    tok = load_tokenizer(tokenizer)
    rendered = render(conv, family, tok)
    assert "Café menu" in tok.decode(rendered.input_ids)  # normalized by the tokenizer
    check_roundtrip(conv, rendered, family, tok)
