"""Divergences the generated differential tests (test_differential.py) found, each pinned by a small
conversation: the built-in render against its reference, or parse-back against what was rendered."""

from __future__ import annotations

import pytest
from render_support import assert_same, transformers_render
from test_harmony import encoding, gptoss, gptoss_hf, official_render  # noqa: F401 (fixtures)
from test_qwen3 import qwen3, qwen3_hf  # noqa: F401 (fixtures)

from pipeline.conversation import Conversation, Message, Reasoning, Text, Tool, ToolCall, ToolResult
from pipeline.render import RenderOptions, check_roundtrip, load_template, load_tokenizer, render


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


# --- Qwen3 --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reasoning", ["\n", "\n\n"])
def test_qwen3_reasoning_of_newlines_alone_writes_an_empty_think_block(reasoning, qwen3, qwen3_hf, official):
    """The official template tests the reasoning before stripping its newlines: reasoning of newlines
    alone gives an empty <think> block, in a turn with a call and in a turn with nothing else."""
    call = ToolCall(id="c1", name="f", arguments={})
    conv = Conversation(messages=(
        _user("hi"), Message(role="assistant", blocks=(Reasoning(text=reasoning), call)),
        Message(role="tool", blocks=(ToolResult(call_id="c1", content=(Text("ok"),)),)),
        Message(role="assistant", blocks=(Reasoning(text=reasoning),)), _answer("\ndone")))
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "reasoning_content": reasoning,
                 "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]},
                {"role": "tool", "content": "ok"},
                {"role": "assistant", "content": "", "reasoning_content": reasoning},
                {"role": "assistant", "content": "\ndone"}]
    text, ids = transformers_render(qwen3_hf, official("qwen3.jinja"), messages, None)
    ours = render(conv, "qwen3", qwen3)
    assert_same(text, ids, ours.text, ours.input_ids)
    assert text.count("<think>\n\n</think>\n\n") == 3
    assert ("dropped", "$.messages[1].blocks[0]") in {(e.kind, e.path) for e in ours.ledger}
    check_roundtrip(conv, ours, "qwen3", qwen3)


def test_qwen3_generation_prompt_without_thinking_parses_back():
    """With enable_thinking=False the generation prompt holds an empty <think> block; parse-back read
    only a bare header as a generation prompt and refused the stream."""
    tok = load_tokenizer("qwen3")
    conv = Conversation(messages=(_user("hi"),))
    options = RenderOptions(add_generation_prompt=True, template_kwargs={"enable_thinking": False})
    rendered = render(conv, "qwen3", tok, options=options)
    assert rendered.text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert check_roundtrip(conv, rendered, "qwen3", tok).messages == conv.messages


def test_qwen3_expand_trains_a_turn_whose_reasoning_is_newlines_alone():
    """past_reasoning='expand' counted such a turn as one whose reasoning the template drops (its block is
    ledgered: nothing of it is kept) and refused it, though the row shows it as the model sees it: an
    empty <think> block."""
    from pipeline.render.expand import expand

    tok = load_tokenizer("qwen3")
    conv = Conversation(messages=(_user("hi"), Message(role="assistant", blocks=(Reasoning(text="\n"), Text("a"))),
                                  _user("again"), Message(role="assistant", blocks=(Reasoning(text="r"), Text("b")))))
    rows = expand(conv, load_template("qwen3"), tok)
    assert [(row.case, row.trained) for row in rows] == [("prefix", (1,)), ("final", (3,))]
    assert rows[0].rendered.text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\na<|im_end|>\n")


# --- Harmony ------------------------------------------------------------------------------------------

def test_harmony_empty_answer_after_reasoning_is_an_empty_final_message(gptoss, gptoss_hf, encoding, official):
    """Reasoning, then an empty answer: the official template writes the analysis and an empty final
    message (as openai-harmony renders that final message); the empty text was left out silently."""
    import openai_harmony as oh

    conv = Conversation(messages=(_user("hi"), Message(role="assistant", blocks=(Reasoning(text="think"), Text("")))))
    text, ids, now = official_render(gptoss_hf, official("gptoss.jinja"), conv)
    jinja = render(conv, "harmony-jinja", gptoss, options=RenderOptions(now=now))
    assert_same(text, ids, jinja.text, jinja.input_ids)
    assert text.endswith("<|start|>assistant<|channel|>final<|message|><|return|>")
    messages = [oh.Message.from_role_and_content(oh.Role.SYSTEM, oh.SystemContent.new().with_conversation_start_date(
                    "2024-07-26")),
                oh.Message.from_role_and_content(oh.Role.USER, "hi"),
                oh.Message.from_role_and_content(oh.Role.ASSISTANT, "think").with_channel("analysis"),
                oh.Message.from_role_and_content(oh.Role.ASSISTANT, "").with_channel("final")]
    expected = encoding.render_conversation_for_training(oh.Conversation.from_messages(messages),
                                                         oh.RenderConversationConfig(auto_drop_analysis=False))
    ours = render(conv, "harmony", gptoss)
    assert_same(encoding.decode(expected), expected, ours.text, ours.input_ids)
    for rendered, family in ((ours, "harmony"), (jinja, "harmony-jinja")):
        check_roundtrip(conv, rendered, family, gptoss)


# --- Mistral ------------------------------------------------------------------------------------------

def assert_matches_mistral_common(conv, ours) -> None:
    from test_mistral import assert_matches_mistral_common as check  # skips without mistral-common (a dev extra)

    check(conv, ours)


@pytest.mark.parametrize("messages, text", [
    # mistral-common joins the texts of consecutive user messages, and of answers, leaving out empty ones
    ([_user("a"), _user(""), _user("b"), _answer("y")], "<s>[INST]a\n\nb[/INST]y</s>"),
    ([_user(""), _user("a"), _answer("y")], "<s>[INST]a[/INST]y</s>"),
    ([_user("a"), _answer("x"), _user(""), _answer("y")], "<s>[INST]a[/INST]x</s>[INST][/INST]y</s>"),
    # ...and strips the trailing spaces of the joined answer, not of each answer
    ([_user("a"), _answer("c "), _answer("d")], "<s>[INST]a[/INST]c \n\nd</s>"),
    ([_user("a"), _answer("c"), _answer("  ")], "<s>[INST]a[/INST]c\n\n</s>"),
    ([_user("a"), _answer("c  "), _answer("d ")], "<s>[INST]a[/INST]c  \n\nd</s>"),
])
def test_mistral_joins_runs_as_mistral_common_does(messages, text):
    tok = load_tokenizer("mistral")
    conv = Conversation(messages=tuple(messages))
    ours = render(conv, "mistral", tok)
    assert ours.text == text
    assert_matches_mistral_common(conv, ours)
    check_roundtrip(conv, ours, "mistral", tok)


def test_mistral_empty_answers_beside_answers_are_left_out():
    """mistral-common refuses an empty answer alone, and leaves it out of a run of answers."""
    tok = load_tokenizer("mistral")
    for messages in ([_user("a"), _answer(""), _answer("b")], [_user("a"), _answer("b"), _answer("")]):
        conv = Conversation(messages=tuple(messages))
        ours = render(conv, "mistral", tok)
        assert ours.text == "<s>[INST]a[/INST]b</s>"
        check_roundtrip(conv, ours, "mistral", tok)
    alone = Conversation(messages=(_user("a"), _answer(""), _answer("")))
    assert render(alone, "mistral", tok).text == "<s>[INST]a[/INST]</s>"


_TOOL = Tool(name="f", description="d", parameters={"type": "object", "properties": {}})
_LISTED = '[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "f", "description": "d", "parameters": ' \
          '{"type": "object", "properties": {}}}}][/AVAILABLE_TOOLS]'


@pytest.mark.parametrize("messages, start", [
    ([_answer("hi"), _user("q"), _answer("x")], "<s>[INST][/INST]hi</s>" + _LISTED + "[INST]Be brief.\n\nq[/INST]"),
    ([_answer("hi")], "<s>" + _LISTED + "[INST]Be brief.\n\n[/INST]hi</s>"),
    ([Message(role="assistant", blocks=(ToolCall(id="c1", name="f", arguments={}),)),
      Message(role="tool", blocks=(ToolResult(call_id="c1", content=(Text("r"),)),)), _answer("ok")],
     "<s>" + _LISTED + "[INST]Be brief.\n\n[/INST][TOOL_CALLS]"),
])
def test_mistral_conversation_not_opening_with_a_user_turn_gets_an_empty_one(messages, start):
    """mistral-common writes an empty [INST][/INST] first (the instructions and tools go there when no other
    user turn follows); the answer right after <s> could not be parsed back, and instructions were dropped."""
    tok = load_tokenizer("mistral")
    conv = Conversation(system=(Text("Be brief."),), messages=tuple(messages), tools=(_TOOL,))
    ours = render(conv, "mistral", tok)
    assert ours.text.startswith(start)
    assert ("synthesized", "$.messages") in {(e.kind, e.path) for e in ours.ledger}
    assert_matches_mistral_common(conv, ours)
    check_roundtrip(conv, ours, "mistral", tok)
