"""Qwen3: conformance with the official template (trl 1.16.0 qwen3.jinja through transformers), the
tokenizer, masks against the training variant, goldens, spans, parse-back, past_reasoning, the corpus."""

from __future__ import annotations

import pytest
from msgspec import UNSET, structs

from corpus import corpus_available, iter_interactions, params, tau_bench_trajectories
from render_support import (FIXTURES, GOLDENS, assert_concatenates_to_whole, assert_mask_matches_transformers,
                            assert_same, assert_same_list, assert_segmented_ids_equal_whole_text_ids,
                            assert_spans_partition, call_arguments, check_golden, fixture_names, load_fixture,
                            result_content, trained_pieces, transformers_render, turn_starts)

from pipeline.conversation import Conversation, Media, Message, Reasoning, Text, ToolCall, ToolResult
from pipeline.errors import RenderError, SftprepError
from pipeline.formats import parse
from pipeline.ingest.exchange import parse_exchange
from pipeline.render import MaskPolicy, RenderOptions, check_roundtrip, load_template, load_tokenizer, render

NAMES = fixture_names() + [f"qwen3/{p.stem}" for p in sorted((FIXTURES / "qwen3").glob("*.json"))]
# Inside what the official template supports (no images, error flags, developer messages...).
CONFORMING = ["calls_only", "plain_chat", "system_midway", "weather_parallel", "weighted", "qwen3/thinking_agent",
              "qwen3/no_user_turn", "qwen3/newlines"]


@pytest.fixture(scope="module")
def qwen3():
    return load_tokenizer("qwen3")


@pytest.fixture(scope="module")
def qwen3_hf(qwen3):
    return qwen3.to_transformers()


@pytest.fixture(scope="module")
def template():
    return load_template("qwen3")


def reference_inputs(conv: Conversation) -> tuple[list[dict], list[dict] | None]:
    """What a transformers user hands the official template for `conv`, written independently of the
    renderer's conversion: texts joined by newlines, developer text as system text (Qwen has no developer
    role), reasoning as `reasoning_content`, results as text,
    calls and results with their ids (the provider's where known), provider-hosted tools left out (they
    are not functions the model calls)."""
    messages: list[dict] = []
    if conv.system or conv.developer:  # developer text in the system message
        instructions = "\n".join(b.text for b in conv.system + conv.developer if b.text)
        messages.append({"role": "system", "content": instructions})
    for m in conv.messages:
        texts = "\n".join(b.text for b in m.blocks if isinstance(b, Text) and b.text)
        results = [b for b in m.blocks if isinstance(b, ToolResult) and b.kind != "hosted"]
        if results:
            messages += [{"role": "tool", "content": result_content(r),
                          **({"name": r.name} if r.name else {}),
                          **({"tool_call_id": r.provider_id or r.call_id} if r.call_id else {})} for r in results]
            if texts:
                messages.append({"role": "user", "content": texts})
        elif m.role == "assistant":
            message = {"role": "assistant", "content": texts}
            reasoning = [b.text for b in m.blocks if isinstance(b, Reasoning) and b.text]
            if reasoning:
                message["reasoning_content"] = "\n".join(reasoning)
            calls = [{"id": b.provider_id or b.id, "type": "function",
                      "function": {"name": b.name, "arguments": call_arguments(b)}}
                     for b in m.blocks if isinstance(b, ToolCall) and b.kind != "hosted"]
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
        else:
            messages.append({"role": "system" if m.role == "developer" else m.role, "content": texts})
    tools = [{"type": "function", "function": {"name": t.name,
                                                **({"description": t.description} if t.description is not None else {}),
                                                **({"parameters": t.parameters} if t.parameters is not UNSET else {})}}
             for t in conv.tools if t.kind == "function"]
    return messages, tools or None


# --- the tokenizer ------------------------------------------------------------------------------------

def test_tokenizer_is_qwen25_plus_four_added_tokens(qwen3, qwen):
    assert {t: qwen3.token_id(t) for t in ("<tool_response>", "</tool_response>", "<think>", "</think>")} == {
        "<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667, "</think>": 151668}
    assert qwen.token_id("<think>") is None
    assert set(qwen3.added_tokens) - set(qwen.added_tokens) == {"<tool_response>", "</tool_response>", "<think>",
                                                                "</think>"}
    assert not qwen3.special_tokens - qwen.special_tokens  # the four are not special (skip_special keeps them)
    text = "Grüße, 東京! x=3.14159 <|im_start|>user\n<think>\nhm\n</think>\n\n"
    assert qwen3.decode(qwen3.encode(text)) == text
    plain = "Grüße aus 東京, naïve café: 12345 tokens."
    assert qwen3.encode(plain) == qwen.encode(plain)
    assert qwen3.encode("<think>") == [151667] and len(qwen.encode("<think>")) > 1


# --- conformance ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CONFORMING)
def test_matches_official_template(name, qwen3, qwen3_hf, template, official):
    conv = load_fixture(name)
    messages, tools = reference_inputs(conv)
    text, ids = transformers_render(qwen3_hf, official("qwen3.jinja"), messages, tools)
    ours = render(conv, template, qwen3)
    assert_same(text, ids, ours.text, ours.input_ids)


@pytest.mark.parametrize("name", [n for n in CONFORMING if not n.startswith("qwen3/")])
def test_transformers_assistant_mask_with_our_template(name, qwen3, qwen3_hf, template):
    """templates/qwen3.jinja through transformers: its generation marks are our mask. (Without reasoning:
    the template alone renders reasoning it is handed, and leaves the stripping of newlines to the renderer.)"""
    conv = load_fixture(name)
    messages, tools = reference_inputs(conv)
    out = qwen3_hf.apply_chat_template(messages, tools=tools, chat_template=template.source, tokenize=True,
                                       return_dict=True, return_assistant_tokens_mask=True)
    ours = render(conv, template, qwen3)
    assert list(out["input_ids"]) == ours.input_ids
    assert_mask_matches_transformers(conv, out["assistant_masks"], ours)


def test_keep_equals_the_training_variant_when_every_turn_reasons(qwen3, qwen3_hf, template, official):
    """trl's qwen3_training.jinja writes a <think> block in every assistant turn: with reasoning in every
    turn and past_reasoning="keep", its text is ours; its generation marks are our mask, except the newline
    after each trained <|im_end|>, which it trains and we do not (it is the next turn's scaffolding)."""
    conv = load_fixture("harmony/reasoning_agent")
    conv = structs.replace(conv, developer=())  # the official template has no developer role
    messages, tools = reference_inputs(conv)
    out = qwen3_hf.apply_chat_template(messages, tools=tools, chat_template=official("qwen3_training.jinja"),
                                       tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ours = render(conv, template, qwen3, options=RenderOptions(past_reasoning="keep"))
    assert list(out["input_ids"]) == ours.input_ids
    end, newline = qwen3.token_id("<|im_end|>"), qwen3.encode("\n")
    theirs = list(out["assistant_masks"])
    trailing = [i for i in range(1, len(theirs)) if ours.input_ids[i - 1] == end and theirs[i - 1]
                and [ours.input_ids[i]] == newline]
    assert len(trailing) == 4 and all(theirs[i] == 1 and ours.loss_mask[i] == 0 for i in trailing)
    assert_same_list([0 if i in trailing else m for i, m in enumerate(theirs)], ours.loss_mask,
                     "training variant's generation marks (less the trailing newlines) vs our mask")


# --- past_reasoning ----------------------------------------------------------------------------------

def test_as_template_drops_reasoning_before_the_current_query_and_ledgers_it(qwen3, template):
    conv = load_fixture("qwen3/thinking_agent")
    rendered = render(conv, template, qwen3)
    dropped = {e.path for e in rendered.ledger if e.kind == "dropped"}
    assert {"$.messages[1].blocks[0]", "$.messages[4].blocks[0]"} <= dropped
    assert "Two ISBNs" not in rendered.text and "Order 5 of the second ISBN." in rendered.text
    pieces = trained_pieces(rendered, qwen3)
    assert pieces[-1] == "<think>\n\n</think>\n\nOrdered: D-2291, arriving in about 4 days.<|im_end|>"
    assert ("dropped", "$.messages[8].blocks[0].newlines") in {(e.kind, e.path) for e in rendered.ledger}


def test_keep_and_drop(qwen3, template):
    conv = load_fixture("qwen3/thinking_agent")
    kept = render(conv, template, qwen3, options=RenderOptions(past_reasoning="keep"))
    assert "<think>\nTwo ISBNs: look both up at once.\n</think>\n\n<tool_call>" in kept.text
    assert ("dropped", "$.messages[1].blocks[0].newlines") in {(e.kind, e.path) for e in kept.ledger}
    check_roundtrip(conv, kept, template, qwen3)
    dropped = render(conv, template, qwen3, options=RenderOptions(past_reasoning="drop"))
    assert dropped.text.count("<think>") == 1 and "<think>\n\n</think>" in dropped.text
    assert sum(e.path.endswith("blocks[0]") and e.kind == "dropped" for e in dropped.ledger) == 3
    check_roundtrip(conv, dropped, template, qwen3)
    no_reasoning = render(conv, template, qwen3, mask=MaskPolicy(reasoning=False),
                          options=RenderOptions(past_reasoning="keep"))
    assert all("ISBN" not in piece.split("</think>")[0] for piece in trained_pieces(no_reasoning, qwen3))


# --- goldens, spans, segments, message by message ------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_golden(name, qwen3, template, regen_goldens):
    rendered = render(load_fixture(name), template, qwen3)
    assert qwen3.decode(rendered.input_ids) == rendered.text
    check_golden(GOLDENS / "qwen3" / f"{name.replace('/', '__')}.txt", name, rendered, qwen3, regen_goldens)


@pytest.mark.parametrize("name", NAMES)
def test_spans_partition_and_segmented_ids(name, qwen3, template):
    rendered = render(load_fixture(name), template, qwen3)
    assert_spans_partition(rendered)
    assert_segmented_ids_equal_whole_text_ids(rendered, qwen3)
    reasoning = [s for s in rendered.spans if s.kind == "reasoning"]
    for span in reasoning:
        block = load_fixture(name).messages[span.message].blocks[span.block]
        piece = rendered.text[span.char_start:span.char_end]  # newlines stripped around the joined reasoning only
        assert piece in block.text and piece.strip("\n") == block.text.strip("\n")


@pytest.mark.parametrize("name", ["calls_only", "plain_chat", "weather_parallel", "weighted"])
def test_message_by_message_concatenates_to_whole(name, qwen3, template):
    """Without reasoning, and with the final turn's empty <think> block not yet written (each prefix ends
    on a tool result or a user turn), rendering turn by turn and concatenating gives the whole render."""
    conv = load_fixture(name)
    cuts = [k for k in turn_starts(conv) if k == len(conv.messages) or conv.messages[k - 1].role != "assistant"]
    assert_concatenates_to_whole(conv, lambda c: render(c, template, qwen3), cuts)


# --- parse-back ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("past_reasoning", ["as_template", "keep", "drop"])
@pytest.mark.parametrize("name", NAMES)
def test_parse_back_equals_rendered_conversation(name, past_reasoning, qwen3, template):
    conv = load_fixture(name)
    rendered = render(conv, template, qwen3, options=RenderOptions(past_reasoning=past_reasoning))
    parsed = check_roundtrip(conv, rendered, template, qwen3)
    assert sum(isinstance(b, ToolCall) for m in parsed.messages for b in m.blocks) == sum(
        isinstance(b, ToolCall) and b.kind != "hosted" for m in conv.messages for b in m.blocks)


def test_parse_back_catches_a_changed_stream(qwen3, template):
    conv = load_fixture("qwen3/thinking_agent")
    rendered = render(conv, template, qwen3)
    tampered = structs.replace(rendered, input_ids=qwen3.encode(rendered.text.replace("Order 5 of", "Order 6 of")))
    with pytest.raises(RenderError, match="parse-back differs"):
        check_roundtrip(conv, tampered, template, qwen3)
    broken = structs.replace(rendered, input_ids=qwen3.encode(rendered.text.replace("\n</think>\n\n", "", 1)))
    with pytest.raises(RenderError, match="without its end"):
        check_roundtrip(conv, broken, template, qwen3)


def test_content_spelling_think_tokens_is_refused(qwen3, template):
    conv = Conversation(messages=(Message(role="user", blocks=(Text("hi"),)),
                                  Message(role="assistant", blocks=(Text("<think>\nsecret\n</think>\n\nhello"),))))
    with pytest.raises(RenderError, match="special token <think>") as info:
        render(conv, template, qwen3)
    assert info.value.path == "$.messages[1].blocks[0]"


def test_media_and_error_flags_are_ledgered(qwen3, template):
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("look"), Media(kind="image", url="https://example.com/a.png"))),
        Message(role="assistant", blocks=(ToolCall(id="c1", name="f", arguments={}),)),
        Message(role="tool", blocks=(ToolResult(call_id="c1", content=(Text("boom"),), is_error=True),)),
        Message(role="assistant", blocks=(Text("it failed"),))))
    rendered = render(conv, template, qwen3)
    kinds = {(e.kind, e.path) for e in rendered.ledger}
    assert ("dropped", "$.messages[0].blocks[1]") in kinds and ("dropped", "$.messages[2].blocks[0].is_error") in kinds
    check_roundtrip(conv, rendered, template, qwen3)


# --- the corpus -------------------------------------------------------------------------------------

def openai_reference(messages: list[dict]) -> list[dict]:
    out = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            import json

            message["tool_calls"] = [{**call, "function": {**call["function"],
                                                            "arguments": json.loads(call["function"]["arguments"] or "{}")}}
                                     for call in message["tool_calls"]]
        out.append(message)
    return out


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()))
def test_corpus_tau_bench_matches_official_and_parses_back(traj, qwen3, qwen3_hf, template, official):
    conv = parse(traj, "openai-chat")
    ours = render(conv, template, qwen3)
    text, ids = transformers_render(qwen3_hf, official("qwen3.jinja"), openai_reference(traj), None)
    assert_same(text, ids, ours.text, ours.input_ids)
    check_roundtrip(conv, ours, template, qwen3)


def _has_reasoning(conv: Conversation) -> bool:
    return any(isinstance(b, Reasoning) and b.text for m in conv.messages if m.role == "assistant" for b in m.blocks)


def reasoning_exchanges() -> list[tuple[str, Conversation]]:
    """Recorded exchanges (request history plus the response's turn) with visible reasoning in an
    assistant turn: Anthropic thinking, Gemini thoughts, reasoning in Chat and Responses recordings."""
    out = []
    for key, interaction in iter_interactions():
        try:
            conv = parse_exchange({"request": interaction["request"], "response": interaction["response"]})
        except SftprepError:  # not a chat exchange (embeddings, uploads, an error response...)
            continue
        if _has_reasoning(conv):
            out.append((key, conv))
    return out


@pytest.mark.parametrize("conv", params(reasoning_exchanges() if corpus_available() else []))
def test_corpus_conversations_with_reasoning_match_official(conv, qwen3, qwen3_hf, template, official):
    for past_reasoning in ("as_template", "keep", "drop"):
        ours = render(conv, template, qwen3, options=RenderOptions(past_reasoning=past_reasoning))
        check_roundtrip(conv, ours, template, qwen3)
    ours = render(conv, template, qwen3)
    assert any(s.kind == "reasoning" for s in ours.spans) or ours.text.count("<think>\n\n</think>") == 1
    messages, tools = reference_inputs(conv)
    text, ids = transformers_render(qwen3_hf, official("qwen3.jinja"), messages, tools)
    assert_same(text, ids, ours.text, ours.input_ids)
