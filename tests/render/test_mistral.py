"""Mistral (tokenizer v3 on Tekken): ids identical to mistral-common's encoder on the fixtures, the
tau-bench trajectories and the corpus conversations with reasoning (within what mistral-common accepts);
the tokenizer, call ids, goldens, masks, parse-back."""

from __future__ import annotations

import functools
import json
import re

import pytest
from msgspec import UNSET, structs

from corpus import corpus_available, params, tau_bench_trajectories
from render_support import (GOLDENS, assert_same, assert_segmented_ids_equal_whole_text_ids,
                            assert_spans_partition, call_arguments, check_golden, fixture_names, load_fixture,
                            trained_pieces)
from test_qwen3 import reasoning_exchanges

from pipeline.conversation import Conversation, Media, Message, Text, ToolCall, ToolResult
from pipeline.errors import RenderError
from pipeline.formats import parse
from pipeline.render import RenderOptions, check_roundtrip, load_template, load_tokenizer, render
from pipeline.render.mistral import call_ids

mc = pytest.importorskip("mistral_common", reason="mistral-common (dev extra) is the reference encoder")
from mistral_common.exceptions import MistralCommonException  # noqa: E402
from mistral_common.protocol.instruct import messages as mc_messages  # noqa: E402
from mistral_common.protocol.instruct import tool_calls as mc_calls  # noqa: E402
from mistral_common.protocol.instruct.request import ChatCompletionRequest  # noqa: E402
from mistral_common.protocol.instruct.validator import ValidationMode  # noqa: E402
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("mistral")


@pytest.fixture(scope="module")
def template():
    return load_template("mistral")


def reference_request(conv: Conversation) -> ChatCompletionRequest:
    """What a mistral-common user builds for `conv`, written independently of the renderer: text beside
    calls left out (the format has no place for it), results as their text, ids as the family writes them."""
    ids = call_ids(conv)
    out: list = []
    system = "\n\n".join(b.text for b in conv.system + conv.developer if isinstance(b, Text) and b.text)
    if system:
        out.append(mc_messages.SystemMessage(content=system))
    for m in conv.messages:
        texts = "\n\n".join(b.text for b in m.blocks if isinstance(b, Text) and b.text)
        if m.role in ("system", "developer"):
            out.append(mc_messages.SystemMessage(content=texts))
        elif m.role == "assistant":
            calls = [mc_calls.ToolCall(id=ids[b.id], function=mc_calls.FunctionCall(name=b.name,
                                                                                     arguments=call_arguments(b)))
                     for b in m.blocks if isinstance(b, ToolCall) and b.kind != "hosted"]
            out.append(mc_messages.AssistantMessage(content=None if calls else texts, tool_calls=calls or None))
        else:
            for b in m.blocks:
                if isinstance(b, ToolResult) and b.kind != "hosted":
                    parts = [p.text for p in b.content if isinstance(p, Text)]
                    text = ("\n\n".join(parts) if parts or b.output is UNSET
                            else json.dumps(b.output, ensure_ascii=False))
                    out.append(mc_messages.ToolMessage(content=text, tool_call_id=ids[b.call_id]))
            if texts or (m.role == "user" and any(isinstance(b, Text) for b in m.blocks)):  # an empty one too
                out.append(mc_messages.UserMessage(content=texts))
    tools = [mc_calls.Tool(function=mc_calls.Function(name=t.name, description=t.description or "",
                                                      parameters={} if t.parameters is UNSET else t.parameters))
             for t in conv.tools if t.kind == "function"]
    return ChatCompletionRequest(messages=out, tools=tools or None)


@functools.cache
def _encoder(ends_with_answer: bool) -> MistralTokenizer:
    mode = ValidationMode.finetuning if ends_with_answer else ValidationMode.test
    return MistralTokenizer.from_file(str(mc.__path__[0] + "/data/tekken_240718.json"), mode=mode)


def mistral_common_render(conv: Conversation) -> tuple[str, list[int]] | str:
    """mistral-common's text and ids (Tekken v3, Mistral Nemo's file), or why it refuses `conv`."""
    encoder = _encoder(conv.messages[-1].role == "assistant" if conv.messages else False)
    try:
        out = encoder.encode_chat_completion(reference_request(conv))
    except (MistralCommonException, ValueError, AssertionError) as exc:
        return f"mistral-common does not accept it: {type(exc).__name__}: {str(exc)[:120]}"
    return out.text, out.tokens


def reference_ids(conv: Conversation) -> tuple[str, list[int]]:
    """mistral-common's text and ids, or skip when it refuses."""
    out = mistral_common_render(conv)
    if isinstance(out, str):
        pytest.skip(out)
    return out


def assert_matches_mistral_common(conv: Conversation, ours) -> None:
    text, ids = reference_ids(conv)
    assert_same(text, ids, ours.text, ours.input_ids, what="ours vs mistral-common")


# --- the tokenizer -------------------------------------------------------------------------------

def test_tokenizer_equals_tekken(tok):
    reference = MistralTokenizer.v3(is_tekken=True).instruct_tokenizer.tokenizer
    for text in ["Hello, world! Grüße aus 東京 😀 12345", "def f(x):\n    return x ** 2\n\n\n", " ÅNGSTRÖM naïve"]:
        assert tok.encode(text) == reference.encode(text, bos=False, eos=False)
    assert [tok.token_id(t) for t in ("<s>", "</s>", "[INST]", "[TOOL_CALLS]", "[/TOOL_RESULTS]")] == [1, 2, 3, 9, 8]
    assert tok.backend.get_vocab_size() == 131072 and tok.token_id("<SPECIAL_999>") == 999


# --- conformance --------------------------------------------------------------------------------

CONFORMING = ["calls_only", "plain_chat", "system_midway", "weather_parallel", "weighted", "qwen3/thinking_agent"]


@pytest.mark.parametrize("name", CONFORMING)
def test_matches_mistral_common(name, tok, template):
    conv = load_fixture(name)
    assert_matches_mistral_common(conv, render(conv, template, tok))


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()))
def test_corpus_tau_bench_matches_mistral_common_and_parses_back(traj, tok, template):
    conv = parse(traj, "openai-chat")
    ours = render(conv, template, tok)
    check_roundtrip(conv, ours, template, tok)
    assert_matches_mistral_common(conv, ours)


@pytest.mark.parametrize("conv", params(reasoning_exchanges() if corpus_available() else []))
def test_corpus_conversations_with_reasoning_match_mistral_common(conv, tok, template):
    ours = render(conv, template, tok)
    check_roundtrip(conv, ours, template, tok)
    assert_matches_mistral_common(conv, ours)


# --- call ids, masks, ledger ----------------------------------------------------------------------

def test_call_ids_are_nine_alphanumerics_recorded_and_kept_when_valid(tok, template):
    conv = load_fixture("weather_parallel")
    rendered = render(conv, template, tok)
    written = re.findall(r'"id": "([^"]*)"', rendered.text)
    assert len(written) == 2 and all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in written)
    assert re.findall(r'"call_id": "([^"]*)"', rendered.text) == written
    recorded = [e for e in rendered.ledger if e.kind == "synthesized" and e.path.endswith(".id")]
    assert [e.path for e in recorded] == ["$.messages[1].blocks[1].id", "$.messages[1].blocks[2].id"]
    assert all(i in e.reason for i, e in zip(written, recorded))
    assert render(conv, template, tok).text == rendered.text  # deterministic
    valid = structs.replace(conv, messages=tuple(
        structs.replace(m, blocks=tuple(structs.replace(b, provider_id="Abc123xyz" if b.id == "call_w1" else "x")
                                        if isinstance(b, (ToolCall)) else b for b in m.blocks))
        for m in conv.messages))
    kept = render(valid, template, tok)
    assert '"id": "Abc123xyz"' in kept.text and '"call_id": "Abc123xyz"' in kept.text
    assert sum(e.path.endswith(".id") for e in kept.ledger) == 1


def test_mask_trains_answers_and_call_lists(tok, template):
    rendered = render(load_fixture("weather_parallel"), template, tok)
    pieces = trained_pieces(rendered, tok)
    assert pieces[0].startswith('[TOOL_CALLS][{"name": "get_weather"') and pieces[0].endswith("]</s>")
    assert pieces[1] == "Paris has light rain at 18°C, and it is 22:14 in Tokyo.</s>" and len(pieces) == 2


def test_text_beside_calls_is_dropped_and_ledgered_or_refused(tok, template):
    conv = load_fixture("weather_parallel")
    rendered = render(conv, template, tok)
    assert "Let me look both up." not in rendered.text
    assert ("dropped", "$.messages[1].blocks[0]") in {(e.kind, e.path) for e in rendered.ledger}
    with pytest.raises(RenderError, match="text or calls") as info:
        render(conv, template, tok, options=RenderOptions(calls="refuse"))
    assert info.value.path == "$.messages[1].blocks[0]"


def test_results_written_as_json_values_and_ledgered(tok, template):
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("go"),)),
        Message(role="assistant", blocks=(ToolCall(id="c1", name="f", arguments={}),
                                          ToolCall(id="c2", name="f", arguments={}),
                                          ToolCall(id="c3", name="f", arguments={}))),
        Message(role="tool", blocks=(ToolResult(call_id="c1", content=(Text('{"a":1}'),)),)),
        Message(role="tool", blocks=(ToolResult(call_id="c2", content=(Text("plain"),)),)),
        Message(role="tool", blocks=(ToolResult(call_id="c3", content=(Text("  "),), is_error=True),)),
        Message(role="assistant", blocks=(Text("ok  "),))))
    rendered = render(conv, template, tok)
    assert '{"content": {"a": 1}, "call_id"' in rendered.text and '{"content": "plain", "call_id"' in rendered.text
    kinds = {(e.kind, e.path) for e in rendered.ledger}
    assert {("folded", "$.messages[2].blocks[0]"), ("dropped", "$.messages[4].blocks[0].is_error"),
            ("dropped", "$.messages[5].blocks[0].trailing_spaces")} <= kinds
    assert rendered.text.endswith("ok</s>")
    check_roundtrip(conv, rendered, template, tok)
    assert_matches_mistral_common(conv, rendered)


def test_consecutive_turns_are_joined_as_mistral_common_joins_them(tok, template):
    conv = Conversation(system=(Text("Be brief."),), messages=(
        Message(role="user", blocks=(Text("a"),)), Message(role="user", blocks=(Text("b"),)),
        Message(role="assistant", blocks=(Text("c"),)), Message(role="assistant", blocks=(Text("d"),))))
    rendered = render(conv, template, tok)
    assert rendered.text == "<s>[INST]Be brief.\n\na\n\nb[/INST]c\n\nd</s>"
    check_roundtrip(conv, rendered, template, tok)
    assert_matches_mistral_common(conv, rendered)
    assert trained_pieces(rendered, tok) == ["c\n\nd</s>"]


def test_media_is_ledgered_and_special_tokens_refused(tok, template):
    image = Conversation(messages=(Message(role="user", blocks=(Text("see"), Media(kind="image", url="https://x/y.png"))),
                                   Message(role="assistant", blocks=(Text("a cat"),))))
    rendered = render(image, template, tok)
    assert ("dropped", "$.messages[0].blocks[1]") in {(e.kind, e.path) for e in rendered.ledger}
    check_roundtrip(image, rendered, template, tok)
    spelled = structs.replace(image, messages=(image.messages[0], Message(role="assistant", blocks=(Text("[INST]no"),))))
    with pytest.raises(RenderError, match="special token") as info:
        render(spelled, template, tok)
    assert info.value.path == "$.messages[1].blocks[0]"


# --- goldens, spans, parse-back -----------------------------------------------------------------

@pytest.mark.parametrize("name", fixture_names())
def test_golden_spans_and_parse_back(name, tok, template, regen_goldens):
    conv = load_fixture(name)
    rendered = render(conv, template, tok)
    check_golden(GOLDENS / "mistral" / f"{name}.txt", name, rendered, tok, regen_goldens)
    assert_spans_partition(rendered)
    assert_segmented_ids_equal_whole_text_ids(rendered, tok)
    check_roundtrip(conv, rendered, template, tok)


def test_parse_back_catches_a_changed_stream(tok, template):
    conv = load_fixture("weather_parallel")
    rendered = render(conv, template, tok)
    changed = rendered.text.replace('"Tokyo"', '"Kyoto"', 1)
    with pytest.raises(RenderError, match="parse-back differs"):
        check_roundtrip(conv, structs.replace(rendered, input_ids=tok.encode(changed)), template, tok)
    broken = rendered.text.replace("[/TOOL_RESULTS]", "", 1)
    with pytest.raises(RenderError, match="unexpected"):
        check_roundtrip(conv, structs.replace(rendered, input_ids=tok.encode(broken)), template, tok)
