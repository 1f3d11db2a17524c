"""Harmony (gpt-oss): token ids equal to openai-harmony's training render, text equal to the official
Jinja template in its style, the mask, spans, goldens, parse-back, and the refusals and ledger entries
where the official template would silently lose data (parallel calls, earlier reasoning)."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime

import pytest
from msgspec import UNSET, structs

from corpus import corpus_available, params, request_bodies, tau_bench_trajectories
from render_support import (FIXTURES, GOLDENS, assert_concatenates_to_whole, assert_mask_matches_transformers,
                            assert_same, assert_segmented_ids_equal_whole_text_ids, assert_spans_partition,
                            call_arguments, check_golden, fixture_names, load_fixture, parse_chat, trained_pieces,
                            transformers_render, turn_starts)
from render_support import block_text as _text_of, result_content as _result_text
from pipeline.conversation import Conversation, Media, Message, Opaque, Reasoning, Text, Tool, ToolCall, ToolResult
from pipeline.errors import ConfigError, RenderError, ShapeError
from pipeline.formats import parse
from pipeline.render import (MaskPolicy, RenderOptions, check_roundtrip, load_template, load_tokenizer, parse_back,
                             render)
from pipeline.render import _harmony_typescript as typescript
from pipeline.render import harmony

NAMES = fixture_names() + [f"harmony/{p.stem}" for p in sorted((FIXTURES / "harmony").glob("*.json"))]
END, RETURN, CONSTRAIN = "<|end|>", "<|return|>", "<|constrain|>"


@pytest.fixture(scope="session")
def gptoss():
    return load_tokenizer("gpt-oss")


@pytest.fixture(scope="session")
def gptoss_hf(gptoss):
    return gptoss.to_transformers()


@pytest.fixture(scope="session")
def encoding():
    """openai-harmony's encoding, its o200k_base vocabulary given offline from the built-in tokenizer."""
    from pipeline.render.builtin_tokenizers import tiktoken_file

    folder = str(tiktoken_file("gpt-oss").parent)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_ENCODINGS_BASE", folder)
        import openai_harmony

        return openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)


# --- openai-harmony, the reference for the tokens ------------------------------------------------------

def harmony_reference(conv: Conversation, encoding, prompt: bool = False) -> list[int]:
    """openai-harmony's training render of the same conversation (with `prompt`, its render for the
    assistant's completion), built from the Harmony docs' semantics: instructions and tools in the
    developer message, each reasoning block an analysis message, each call a commentary message to
    functions.NAME, text final when it ends its message (commentary otherwise), results from
    functions.NAME in the order of the calls they answer. No analysis is auto-dropped."""
    import openai_harmony as oh

    out = [oh.Message.from_role_and_content(
        oh.Role.SYSTEM, oh.SystemContent.new().with_conversation_start_date("2024-07-26"))]
    messages = list(conv.messages)
    instructions = [t for t in map(_text_of, conv.system + conv.developer) if t]
    if not instructions and messages and messages[0].role in ("system", "developer"):
        instructions = [t for t in map(_text_of, messages[0].blocks) if t]
        messages = messages[1:]
    tools = [oh.ToolDescription.new(t.name, t.description or "",
                                    parameters=None if t.parameters is UNSET else t.parameters)
             for t in conv.tools if t.kind == "function"]
    if instructions or tools:
        developer = oh.DeveloperContent.new()
        if instructions:
            developer = developer.with_instructions("\n".join(instructions))
        if tools:
            developer = developer.with_function_tools(tools)
        out.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer))
    names = {b.id: b.name for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)}
    order: dict[str, int] = {}
    run: list[tuple[tuple[int, int], object]] = []

    def flush() -> None:
        out.extend(message for _, message in sorted(run, key=lambda r: r[0]))
        run.clear()

    for m in messages:
        if m.role == "assistant":
            flush()
            parts: list[tuple[str, str, str | None]] = []
            for b in m.blocks:
                text = _text_of(b)
                if text and parts and parts[-1][0] == "text":
                    parts[-1] = ("text", parts[-1][1] + "\n" + text, None)
                elif text:
                    parts.append(("text", text, None))
                elif isinstance(b, Reasoning) and b.text:
                    parts.append(("analysis", b.text, None))
                elif isinstance(b, ToolCall) and b.kind != "hosted":
                    parts.append(("call", json.dumps(call_arguments(b), ensure_ascii=False), b.name))
            order = {b.id: k for k, b in enumerate(b for b in m.blocks if isinstance(b, ToolCall))}
            if all(kind == "analysis" for kind, _, _ in parts) and (
                    not m.blocks or any(_text_of(b) is not None for b in m.blocks)):  # an empty answer
                parts.append(("text", "", None))
            for i, (kind, content, name) in enumerate(parts):
                message = oh.Message.from_role_and_content(oh.Role.ASSISTANT, content)
                if kind == "call":
                    message = message.with_channel("commentary").with_recipient(f"functions.{name}")
                    out.append(message.with_content_type("<|constrain|>json"))
                else:
                    channel = "analysis" if kind == "analysis" else "final" if i == len(parts) - 1 else "commentary"
                    out.append(message.with_channel(channel))
            continue
        role = oh.Role.USER if m.role in ("user", "tool") else oh.Role(m.role)
        texts: list[str] = []
        for b in m.blocks:
            if isinstance(b, ToolResult):
                if texts:
                    flush()
                    out.append(oh.Message.from_role_and_content(role, "\n".join(t for t in texts if t)))
                    texts = []
                author = oh.Author.new(oh.Role.TOOL, f"functions.{names.get(b.call_id) or b.name}")
                result = oh.Message.from_author_and_content(author, _result_text(b))
                run.append(((order.get(b.call_id, len(order)), len(run)),
                            result.with_channel("commentary").with_recipient("assistant")))
            elif _text_of(b) is not None:
                texts.append(_text_of(b))
        if texts:
            flush()
            out.append(oh.Message.from_role_and_content(role, "\n".join(t for t in texts if t)))
    flush()
    config = oh.RenderConversationConfig(auto_drop_analysis=False)
    if prompt:
        return encoding.render_conversation_for_completion(oh.Conversation.from_messages(out), oh.Role.ASSISTANT,
                                                           config)
    return encoding.render_conversation_for_training(oh.Conversation.from_messages(out), config)


@pytest.mark.parametrize("name", NAMES)
def test_ids_equal_openai_harmony_training_render(name, gptoss, encoding):
    conv = load_fixture(name)
    ids = harmony_reference(conv, encoding)
    ours = render(conv, "harmony", gptoss)
    assert_same(encoding.decode(ids), ids, ours.text, ours.input_ids)
    assert gptoss.encode(ours.text) == ours.input_ids


def _corpus_conversations() -> list[tuple[str, tuple[object, str | None]]]:
    return ([(key, (traj, "openai-chat")) for key, traj in tau_bench_trajectories()]
            + [(key, (body, None)) for key, body in request_bodies()])


@pytest.mark.parametrize("item", params(_corpus_conversations()))
def test_corpus_matches_openai_harmony_and_parses_back(item, gptoss, encoding):
    conv = parse_chat(*item)
    for name in ("harmony", "harmony-jinja"):
        ours = render(conv, name, gptoss)
        check_roundtrip(conv, ours, name, gptoss)
    ours = render(conv, "harmony", gptoss)
    ids = harmony_reference(conv, encoding)
    assert_same(encoding.decode(ids), ids, ours.text, ours.input_ids)


# --- the official Jinja template, in the jinja style ----------------------------------------------------

def official_messages(conv: Conversation) -> tuple[list[dict], list[dict] | None]:
    """What a transformers user hands the official template for the same conversation: instructions as a
    system message, reasoning as `thinking`, calls with object arguments, results as tool messages."""
    messages: list[dict] = []
    instructions = "\n".join(t for t in map(_text_of, conv.system + conv.developer) if t)
    if instructions:
        messages.append({"role": "system", "content": instructions})
    for m in conv.messages:
        texts = "\n".join(t for t in map(_text_of, m.blocks) if t)
        results = [b for b in m.blocks if isinstance(b, ToolResult)]
        if results:
            messages += [{"role": "tool", "content": _result_text(r)} for r in results]
        elif m.role == "assistant":
            out: dict = {"role": "assistant", "content": texts}
            reasoning = [b.text for b in m.blocks if isinstance(b, Reasoning) and b.text]
            if reasoning:
                out["thinking"] = "\n".join(reasoning)
            calls = [{"type": "function", "function": {"name": b.name, "arguments": call_arguments(b)}}
                     for b in m.blocks if isinstance(b, ToolCall)]
            if calls:
                out["tool_calls"] = calls
            messages.append(out)
        else:
            messages.append({"role": m.role, "content": texts})
    tools = [{"type": "function", "function": {"name": t.name,
                                                **({"description": t.description} if t.description is not None else {}),
                                                **({"parameters": t.parameters} if t.parameters is not UNSET else {})}}
             for t in conv.tools]
    return messages, tools or None


def signatures_agree(tools: list[dict] | None, encoding, official_source: str) -> bool:
    """Whether the official template writes these tools' signatures as openai-harmony does (it does not
    for empty parameter objects, defaults, titles, nested objects...): then they are inside what it supports."""
    if not tools:
        return True
    import openai_harmony as oh
    from pipeline.render.templates import make_environment

    if any(not isinstance(t["function"].get("description"), str) for t in tools):
        return False
    developer = oh.DeveloperContent.new().with_function_tools(
        [oh.ToolDescription.new(t["function"]["name"], t["function"]["description"],
                                parameters=t["function"].get("parameters")) for t in tools])
    expected = encoding.decode(encoding.render(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer)))
    text = make_environment().from_string(official_source).render(
        messages=[{"role": "user", "content": "x"}], tools=tools, strftime_now=lambda fmt: "2024-07-26")
    return expected in text


@pytest.fixture(scope="session")
def gptoss_official(official):
    return official("gptoss.jinja")


def official_supports(conv: Conversation, encoding, official_source: str) -> str | None:
    """Why the official template cannot render `conv` faithfully, or None when it can."""
    if not conv.messages:
        return "no messages (transformers refuses an empty conversation)"
    for i, m in enumerate(conv.messages):
        if m.role in ("system", "developer") and (i > 0 or conv.system or conv.developer):
            return "a system or developer message after the first (dropped by the official template)"
        if any(isinstance(b, Media) and b.text is None for b in m.blocks):
            return "media"
        if any(isinstance(b, Opaque) for b in m.blocks):
            return "provider-native items"
        calls = [b for b in m.blocks if isinstance(b, ToolCall)]
        if len(calls) > 1:
            return "parallel calls (the official template renders the first only)"
        if calls and any(_text_of(b) for b in m.blocks):
            return "text beside a call (the official template turns it into reasoning or drops it)"
        if len([b for b in m.blocks if isinstance(b, Reasoning)]) > 1:
            return "several reasoning blocks in one message"
        if any(isinstance(b, ToolResult) and (b.is_error or b.output is not UNSET) for b in m.blocks):
            return "structured or error results"
    if any(t.kind != "function" for t in conv.tools):
        return "provider-hosted tools"
    if not signatures_agree(official_messages(conv)[1], encoding, official_source):
        return "tool signatures the official template writes differently from openai-harmony"
    return None


def official_render(gptoss_hf, source: str, conv: Conversation, **kwargs) -> tuple[str, list[int], datetime]:
    """Text and ids as transformers renders the official template; the date it used (today: transformers
    gives the template the real clock) so our render can pin the same one."""
    messages, tools = official_messages(conv)
    text, ids = transformers_render(gptoss_hf, source, messages, tools, **kwargs)
    date = re.search(r"Current date: (\d{4}-\d{2}-\d{2})", text).group(1)
    return text, ids, datetime.strptime(date, "%Y-%m-%d")


# Fixtures inside what the official template supports (checked by official_supports below).
OFFICIAL_CONFORMING = ["plain_chat", "weighted", "harmony/official_single_calls"]


@pytest.mark.parametrize("name", OFFICIAL_CONFORMING)
def test_jinja_style_matches_official_template(name, gptoss, gptoss_hf, gptoss_official, encoding):
    conv = load_fixture(name)
    assert official_supports(conv, encoding, gptoss_official) is None
    text, ids, now = official_render(gptoss_hf, gptoss_official, conv)
    ours = render(conv, "harmony-jinja", gptoss, options=RenderOptions(now=now))
    assert_same(text, ids, ours.text, ours.input_ids)


@pytest.mark.parametrize("name", ["plain_chat", "weighted"])
def test_our_template_alone_in_jinja_style_matches_official(name, gptoss_hf, gptoss_official):
    """templates/harmony.jinja used directly with transformers (harmony_style="jinja") writes what the
    official template writes, for conversations without reasoning (which it never drops)."""
    conv = load_fixture(name)
    expected, _, _ = official_render(gptoss_hf, gptoss_official, conv)
    ours, _, _ = official_render(gptoss_hf, load_template("harmony").source, conv, harmony_style="jinja")
    assert ours == expected


@pytest.mark.parametrize("name", sorted(set(NAMES) - set(OFFICIAL_CONFORMING)))
def test_other_fixtures_are_outside_official_support(name, gptoss_official, encoding):
    """The conformance list above is complete: every other fixture has a stated reason."""
    assert official_supports(load_fixture(name), encoding, gptoss_official) is not None


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()))
def test_corpus_tau_bench_jinja_style_matches_official(traj, gptoss, gptoss_hf, gptoss_official, encoding):
    conv = parse(traj, "openai-chat")
    reason = official_supports(conv, encoding, gptoss_official)
    if reason is not None:
        pytest.skip(f"outside the official template's support: {reason}")
    text, ids, now = official_render(gptoss_hf, gptoss_official, conv)
    ours = render(conv, "harmony-jinja", gptoss, options=RenderOptions(now=now))
    assert_same(text, ids, ours.text, ours.input_ids)


@pytest.mark.parametrize("body", params(request_bodies()))
def test_corpus_request_bodies_jinja_style_matches_official(body, gptoss, gptoss_hf, gptoss_official, encoding):
    conv = parse_chat(body)
    reason = official_supports(conv, encoding, gptoss_official)  # any provider: the input is canonical
    if reason is not None:
        pytest.skip(f"outside the official template's support: {reason}")
    text, ids, now = official_render(gptoss_hf, gptoss_official, conv)
    ours = render(conv, "harmony-jinja", gptoss, options=RenderOptions(now=now))
    assert_same(text, ids, ours.text, ours.input_ids)


def test_official_template_renders_only_the_first_parallel_call_and_ours_all(gptoss, gptoss_hf, gptoss_official):
    """The trap the family exists for: the official template writes one call and three results."""
    conv = load_fixture("harmony/parallel_same_tool")
    text, _, _ = official_render(gptoss_hf, gptoss_official, conv)
    assert text.count("<|call|>") == 1 and text.count("to=assistant") == 3
    assert '"Lima"}<|call|>' not in text
    for name in ("harmony", "harmony-jinja"):
        ours = render(conv, name, gptoss)
        assert ours.text.count("<|call|>") == 3
        assert ours.text.count("<|start|>functions.get_weather to=assistant") == 2
        calls = [b for m in check_roundtrip(conv, ours, name, gptoss).messages for b in m.blocks
                 if isinstance(b, ToolCall)]
        assert [(c.name, c.arguments) for c in calls] == [
            ("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Lima"}), ("get_time", {"city": "Lima"})]


def test_constrain_token_differs_between_the_references(gptoss, encoding):
    """openai-harmony writes the <|constrain|> special token before `json` in a call's header; the
    official Jinja template writes the plain word. sftprep follows openai-harmony by default ("harmony");
    "harmony-jinja" switches to the Jinja template's form."""
    conv = load_fixture("harmony/official_single_calls")
    ours, jinja = render(conv, "harmony", gptoss), render(conv, "harmony-jinja", gptoss)
    constrain = gptoss.token_id(CONSTRAIN)
    assert constrain == 200003
    assert ours.input_ids.count(constrain) == 2 and constrain not in jinja.input_ids
    assert "<|channel|>commentary <|constrain|>json<|message|>" in ours.text
    assert "<|channel|>commentary json<|message|>" in jinja.text
    with pytest.raises(RenderError, match="parse it with family 'harmony-jinja'"):
        parse_back(jinja.text, "harmony")
    with pytest.raises(RenderError, match="parse it with family 'harmony'"):
        parse_back(ours.text, "harmony-jinja")


def test_jinja_style_encodes_results_and_keeps_them_exact(gptoss):
    conv = load_fixture("weather_parallel")
    jinja = render(conv, "harmony-jinja", gptoss)
    assert '<|message|>"{\\"temp\\": 18, \\"condition\\": \\"light rain\\"}"<|end|>' in jinja.text
    parsed = check_roundtrip(conv, jinja, "harmony-jinja", gptoss)
    assert parsed.messages[2].blocks[0].content == (Text('{"temp": 18, "condition": "light rain"}'),)


# --- transformers' assistant mask with our template -----------------------------------------------------

def _hf_exact(conv: Conversation) -> bool:
    """Whether Hugging Face style messages (thinking, then content, then calls) hold each assistant message
    in its own block order, so the template renders them as sftprep does."""
    for m in conv.messages:
        if m.role != "assistant":
            continue
        kinds = "".join("r" if isinstance(b, Reasoning) else "t" if _text_of(b) else "c" if isinstance(b, ToolCall)
                        else "" for b in m.blocks)
        if not re.fullmatch(r"r?t*c*", kinds):
            return False
    return not any(isinstance(b, Media) and b.text is None for m in conv.messages for b in m.blocks)


@pytest.mark.parametrize("name", [n for n in NAMES if _hf_exact(load_fixture(n))])
def test_transformers_assistant_mask_with_our_template(name, gptoss, gptoss_hf):
    """apply_chat_template(..., return_assistant_tokens_mask=True) works with templates/harmony.jinja given
    plain Hugging Face messages (tool signatures written by the template's own macro), with our ids, and
    its mask equals ours under the default policy."""
    conv = load_fixture(name)
    messages, tools = official_messages(conv)
    template = load_template("harmony").source
    out = gptoss_hf.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    date = re.search(r"Current date: (\d{4}-\d{2}-\d{2})", gptoss.decode(out["input_ids"])).group(1)
    ours = render(conv, "harmony", gptoss, options=RenderOptions(now=datetime.strptime(date, "%Y-%m-%d")))
    assert_same(gptoss.decode(out["input_ids"]), list(out["input_ids"]), ours.text, ours.input_ids)
    assert_mask_matches_transformers(conv, out["assistant_masks"], ours)


@pytest.mark.parametrize("name", OFFICIAL_CONFORMING)
def test_trl_training_template_mask_equals_ours(name, gptoss, gptoss_hf, official):
    """trl's gptoss_training.jinja (the official template with generation markers) trains the same tokens
    as the jinja style under the default policy."""
    conv = load_fixture(name)
    messages, tools = official_messages(conv)
    out = gptoss_hf.apply_chat_template(messages, tools=tools, chat_template=official("gptoss_training.jinja"),
                                        tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    date = re.search(r"Current date: (\d{4}-\d{2}-\d{2})", gptoss.decode(out["input_ids"])).group(1)
    ours = render(conv, "harmony-jinja", gptoss, options=RenderOptions(now=datetime.strptime(date, "%Y-%m-%d")))
    assert list(out["input_ids"]) == ours.input_ids
    assert_mask_matches_transformers(conv, out["assistant_masks"], ours)


# --- goldens ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["harmony", "harmony-jinja"])
@pytest.mark.parametrize("name", NAMES)
def test_golden(name, family, gptoss, regen_goldens):
    rendered = render(load_fixture(name), family, gptoss)
    assert gptoss.decode(rendered.input_ids) == rendered.text
    folder = GOLDENS / "harmony" / ("jinja" if family == "harmony-jinja" else "")
    check_golden(folder / f"{name.replace('/', '__')}.txt", name, rendered, gptoss, regen_goldens)


# --- spans, segments, message by message -------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_spans_partition_text_and_tokens(name, gptoss):
    conv = load_fixture(name)
    rendered = render(conv, "harmony", gptoss)
    assert_spans_partition(rendered)
    for span in rendered.spans:
        piece = rendered.text[span.char_start:span.char_end]
        if span.kind == "tool_call":
            call = conv.messages[span.message].blocks[span.block]
            assert piece == json.dumps(call_arguments(call), ensure_ascii=False)
            assert rendered.text[:span.char_start].endswith(f"to=functions.{call.name}<|channel|>commentary "
                                                            "<|constrain|>json<|message|>")
        if span.kind == "tools":
            tool = conv.tools[span.block]
            assert f"type {tool.name} = " in piece and piece.endswith(") => any;")
        if span.kind == "reasoning":
            assert rendered.text[:span.char_start].endswith("<|start|>assistant<|channel|>analysis<|message|>")


@pytest.mark.parametrize("name", NAMES)
def test_segmented_ids_equal_whole_text_ids(name, gptoss):
    rendered = render(load_fixture(name), "harmony", gptoss)
    assert_segmented_ids_equal_whole_text_ids(rendered, gptoss)


@pytest.mark.parametrize("name", NAMES)
def test_message_by_message_concatenates_to_whole(name, gptoss):
    """Rendering turn by turn and concatenating the new parts gives the whole render: text, ids, mask.
    One token differs by design: a prefix ending with a final answer ends with <|return|> (the training
    render's last token), where the longer render has <|end|>; the concatenation takes the longer one's."""
    conv = load_fixture(name)
    end_id = gptoss.token_id(END)

    def seam(text: str, ids: list[int]) -> tuple[str, list[int]]:
        if text.endswith(RETURN):
            return text[:-len(RETURN)] + END, ids[:-1] + [end_id]
        return text, ids

    assert_concatenates_to_whole(conv, lambda c: render(c, "harmony", gptoss), turn_starts(conv), seam=seam,
                                 mask_prefix=True)


# --- masks -------------------------------------------------------------------------------------------

def test_mask_trains_each_call_message_and_masks_results(gptoss):
    rendered = render(load_fixture("weather_parallel"), "harmony", gptoss)
    pieces = trained_pieces(rendered, gptoss)
    assert pieces == [
        "<|start|>assistant<|channel|>commentary<|message|>Let me look both up.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
        '{"city": "Paris", "unit": "celsius"}<|call|>'
        "<|start|>assistant to=functions.get_time<|channel|>commentary <|constrain|>json<|message|>"
        '{"city": "Tokyo"}<|call|>',
        "<|start|>assistant<|channel|>final<|message|>Paris has light rain at 18°C, and it is 22:14 in Tokyo."
        "<|return|>"]


def test_mask_policies(gptoss):
    conv = load_fixture("harmony/official_single_calls")

    def trained(policy):
        return trained_pieces(render(conv, "harmony", gptoss, mask=policy), gptoss)

    everything = trained(MaskPolicy())
    assert len(everything) == 4
    assert everything[0].startswith("<|start|>assistant<|channel|>analysis<|message|>Use the tool.")
    no_reasoning = trained(MaskPolicy(reasoning=False))
    assert not any("<|channel|>analysis" in piece for piece in no_reasoning)  # whole analysis messages, headers too
    assert no_reasoning[0] == ("<|start|>assistant to=functions.calculate<|channel|>commentary <|constrain|>json"
                               '<|message|>{"expression": "17 * 23"}<|call|>')
    no_eot = trained(MaskPolicy(eot=False))
    assert not any(token in piece for piece in no_eot for token in (END, RETURN, "<|call|>"))
    last = trained(MaskPolicy(turns="last"))
    assert last == ["<|start|>assistant<|channel|>analysis<|message|>Report 55.86.<|end|>"
                    "<|start|>assistant<|channel|>final<|message|>391 ÷ 7 ≈ 55.86.<|return|>"]
    weighted = trained_pieces(render(load_fixture("weighted"), "harmony", gptoss), gptoss)
    assert [p.split("<|message|>")[1] for p in weighted] == ["4<|end|>", "6<|return|>"]


# --- faithfulness and the ledger -------------------------------------------------------------------------

def test_lossy_conversation_is_ledgered_not_silent(gptoss):
    conv = load_fixture("lossy")
    rendered = render(conv, "harmony", gptoss)
    entries = {(e.kind, e.path) for e in rendered.ledger}
    assert ("dropped", "$.messages[0].blocks[1]") in entries  # the image
    assert ("dropped", "$.messages[1].blocks[0].signature") in entries  # reasoning is rendered, its signature not
    assert ("dropped", "$.messages[2].blocks[1].is_error") in entries
    assert ("folded", "$.system[0]") in entries and ("folded", "$.developer") in entries
    assert ("dropped", "$.tools[1]") in entries  # hosted tool
    assert "# Instructions\n\nYou help with receipts.\nAlways total in EUR.\n\n# Tools" in rendered.text
    assert "<|channel|>analysis<|message|>The receipt says 42.50 USD. Convert it.<|end|>" in rendered.text
    # text between two calls is a commentary preamble, in block order
    assert ('"to": "EUR"}<|call|><|start|>assistant<|channel|>commentary<|message|>Converting now.<|end|>'
            '<|start|>assistant to=functions.convert') in rendered.text
    assert rendered.text.index("rate service timeout") < rendered.text.index("<|message|>0.92<|end|>")
    check_roundtrip(conv, rendered, "harmony", gptoss)
    with pytest.raises(Exception, match="cannot carry"):
        render(conv, "harmony", gptoss, options=RenderOptions(strict=True))


def test_schema_keywords_a_signature_loses_are_ledgered(gptoss):
    rendered = render(load_fixture("harmony/reasoning_agent"), "harmony", gptoss)
    reasons = {e.path: e.reason for e in rendered.ledger}
    assert reasons["$.tools[0].parameters"] == (
        "a TypeScript signature does not carry: additionalProperties at $, minimum at $.properties.nights, "
        "integer (written as number) at $.properties.nights")
    assert reasons["$.tools[1].parameters"] == ("a TypeScript signature does not carry: "
                                                "format at $.properties.guest.properties.email")
    assert ("// Examples:\n// - \"wifi\"\n// - \"pool\"\namenities?: string[],\n") in rendered.text
    assert "// City\n//\n// City name, in English\ncity: string,\n" in rendered.text
    assert 'stars?: "3" | "4" | "5", // default: 4\n' in rendered.text
    assert "budget?: number | null,\n" in rendered.text


def test_past_reasoning_drop_is_ledgered(gptoss):
    conv = load_fixture("harmony/reasoning_agent")
    keep, drop = render(conv, "harmony", gptoss), render(conv, "harmony-jinja", gptoss)
    assert keep.text.count("<|channel|>analysis") == 4 and drop.text.count("<|channel|>analysis") == 1
    dropped = [e.path for e in drop.ledger if "past_reasoning" in e.reason]
    assert dropped == ["$.messages[1].blocks[0]", "$.messages[3].blocks[0]", "$.messages[5].blocks[0]"]
    variant = harmony.family("harmony", past_reasoning="drop")
    assert variant.name == "harmony(past_reasoning=drop)"
    from pipeline.render.templates import Template

    other = render(conv, Template.from_family(variant), gptoss)  # the same drops, in openai-harmony's tokens
    assert other.text.count("<|channel|>analysis") == 1 and other.text.count(CONSTRAIN) == 2
    assert [e.path for e in other.ledger if "past_reasoning" in e.reason] == dropped
    check_roundtrip(conv, other, variant, gptoss)


def test_refusals_name_the_block(gptoss):
    def conv_with(*blocks, tools=()):
        return Conversation(tools=tools, messages=(Message(role="user", blocks=(Text("go"),)),
                                                   Message(role="assistant", blocks=blocks)))

    with pytest.raises(RenderError, match="cannot be written") as info:
        render(conv_with(ToolCall(id="c", name="look up", arguments={})), "harmony", gptoss)
    assert info.value.path == "$.messages[1].blocks[0]"
    with pytest.raises(RenderError, match="cannot be written") as info:
        render(conv_with(Text("ok"), tools=(Tool(name="a b"),)), "harmony", gptoss)
    assert info.value.path == "$.tools[0]"
    with pytest.raises(RenderError, match="must be a JSON object"):
        render(conv_with(ToolCall(id="c", name="f", arguments=[1])), "harmony", gptoss)
    orphan = Conversation(messages=(Message(role="user", blocks=(Text("go"),)),
                                    Message(role="tool", blocks=(ToolResult(call_id=None, content=(Text("r"),)),))))
    with pytest.raises(RenderError, match="names no tool") as info:
        render(orphan, "harmony", gptoss)
    assert info.value.code == "render_result_name"
    named = structs.replace(orphan, messages=(orphan.messages[0], Message(role="tool", blocks=(
        ToolResult(call_id=None, name="lookup", content=(Text("r"),)),))))
    assert "<|start|>functions.lookup to=assistant" in render(named, "harmony", gptoss).text


def test_adjacent_assistant_messages_without_a_final_answer_are_refused(gptoss):
    conv = Conversation(messages=(Message(role="user", blocks=(Text("go"),)),
                                  Message(role="assistant", blocks=(Reasoning(text="think"),)),
                                  Message(role="assistant", blocks=(Text("done"),))))
    with pytest.raises(RenderError, match="no boundary") as info:
        render(conv, "harmony", gptoss)
    assert info.value.code == "render_turn_boundary" and info.value.path == "$.messages[2]"
    ended = structs.replace(conv, messages=(conv.messages[0], Message(role="assistant", blocks=(Text("a"),)),
                                            conv.messages[2]))
    rendered = render(ended, "harmony", gptoss)
    assert [m.blocks for m in check_roundtrip(ended, rendered, "harmony", gptoss).messages][1:] == [
        (Text("a"),), (Text("done"),)]


def test_special_tokens_spelled_in_content_are_refused(gptoss):
    flattened = Conversation(messages=(
        Message(role="user", blocks=(Text("go"),)),
        Message(role="assistant",
                blocks=(Text('to=functions.f<|channel|>commentary json<|message|>{"a": 1}<|call|>'),))))
    with pytest.raises(RenderError, match="special token <\\|channel\\|>") as info:
        render(flattened, "harmony", gptoss)
    assert info.value.path == "$.messages[1].blocks[0]"


# --- parse-back ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["harmony", "harmony-jinja"])
@pytest.mark.parametrize("name", NAMES)
def test_parse_back_equals_rendered_conversation(name, family, gptoss):
    conv = load_fixture(name)
    rendered = render(conv, family, gptoss)
    parsed = check_roundtrip(conv, rendered, family, gptoss)
    assert parse_back(rendered.text, family) == parsed
    calls = [b for m in parsed.messages for b in m.blocks if isinstance(b, ToolCall)]
    originals = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolCall) and b.kind != "hosted"]
    assert [(c.name, c.arguments) for c in calls] == [(c.name, call_arguments(c)) for c in originals]


def test_parse_back_reads_tool_schemas(gptoss):
    conv = load_fixture("weather_parallel")
    parsed = check_roundtrip(conv, render(conv, "harmony", gptoss), "harmony", gptoss)
    assert parsed.tools[0] == Tool(name="get_weather", description="Current weather for a city.", parameters={
        "type": "object", "properties": {"city": {"description": "City name", "type": "string"},
                                         "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]})


def test_parse_back_catches_a_changed_stream(gptoss):
    conv = load_fixture("weather_parallel")
    rendered = render(conv, "harmony", gptoss)

    def with_text(text):
        return structs.replace(rendered, input_ids=gptoss.encode(text))

    with pytest.raises(RenderError, match="parse-back differs"):
        check_roundtrip(conv, with_text(rendered.text.replace('"Tokyo"', '"Kyoto"')), "harmony", gptoss)
    # a call flattened into a commentary message (the failure this project exists to prevent)
    flat = rendered.text.replace("<|start|>assistant to=functions.get_time<|channel|>commentary <|constrain|>json"
                                 "<|message|>{\"city\": \"Tokyo\"}<|call|>",
                                 "<|start|>assistant<|channel|>commentary<|message|>get_time(city=Tokyo)<|end|>")
    with pytest.raises(RenderError, match="parse-back differs"):
        check_roundtrip(conv, with_text(flat), "harmony", gptoss)
    # the second call dropped, as the official template drops it
    dropped = rendered.text.replace("<|start|>assistant to=functions.get_time<|channel|>commentary <|constrain|>json"
                                    "<|message|>{\"city\": \"Tokyo\"}<|call|>", "")
    with pytest.raises(RenderError, match="parse-back differs"):
        check_roundtrip(conv, with_text(dropped), "harmony", gptoss)
    lossy = load_fixture("lossy")
    with pytest.raises(RenderError, match="parse-back differs"):
        check_roundtrip(lossy, structs.replace(render(lossy, "harmony", gptoss), ledger=()), "harmony", gptoss)


def test_parse_back_generation_prompt_and_errors(gptoss):
    text = render(load_fixture("plain_chat"), "harmony", gptoss, options=RenderOptions(add_generation_prompt=True)).text
    assert text.endswith("<|start|>assistant<|channel|>final<|message|>Cold rain on the roof\nmaple leaves drift past "
                         "the glass\nthe kettle answers<|end|><|start|>assistant")
    assert [m.role for m in parse_back(text, "harmony").messages] == ["user", "assistant", "user", "assistant"]
    system = "<|start|>system<|message|>x<|end|>"
    for bad, message in [
        ("<|start|>user<|message|>hi<|end|>", "first message must be the system"),
        (system + "<|start|>user<|message|>hi", "exactly one"),
        (system + "<|start|>assistant<|channel|>final<|message|>a<|return|><|start|>user<|message|>b<|end|>",
         "only the last message"),
        (system + "<|start|>assistant<|channel|>analysis<|message|>a<|call|>", "ends only a call"),
        (system + "<|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json<|message|>[1]<|call|>",
         "must be a JSON object"),
        (system + "<|start|>assistant to=browser.search<|channel|>commentary <|constrain|>json<|message|>{}<|call|>",
         "only the functions namespace"),
        (system + "<|start|>assistant<|channel|>thoughts<|message|>a<|end|>", "unknown assistant channel"),
    ]:
        with pytest.raises(RenderError, match=message):
            parse_back(bad, "harmony")


# --- tool signatures --------------------------------------------------------------------------------------

def _all_tools() -> list[Tool]:
    tools = [t for name in NAMES for t in load_fixture(name).tools]
    for _, body in request_bodies():
        try:
            tools += list(parse(body).tools)
        except ShapeError:
            continue
    return [t for t in tools if t.kind == "function"]


def test_template_macro_writes_signatures_as_the_python_writer(gptoss_hf):
    """Templates given plain Hugging Face tools (no ready-written `definition`) write the same signatures
    as the renderer: the Jinja macro and `_harmony_typescript` agree on every fixture and corpus tool."""
    source = load_template("harmony").source
    seen = set()
    for tool in _all_tools():
        key = json.dumps([tool.name, tool.description, None if tool.parameters is UNSET else tool.parameters])
        if key in seen:
            continue
        seen.add(key)
        spec = {"name": tool.name, **({"description": tool.description} if tool.description is not None else {}),
                **({"parameters": tool.parameters} if tool.parameters is not UNSET else {})}
        text = gptoss_hf.apply_chat_template([{"role": "user", "content": "x"}],
                                             tools=[{"type": "function", "function": spec}], chat_template=source,
                                             tokenize=False)
        expected = typescript.tool_definition(tool.name, tool.description, tool.parameters)
        assert f"namespace functions {{\n\n{expected}\n\n}} // namespace functions" in text, key
    assert len(seen) > (20 if corpus_available() else 10)  # the fixtures' tools alone, without the corpus


def test_signatures_read_back_to_schemas_that_write_the_same():
    """For the schemas in fixtures and corpus, reading a signature gives a schema that writes the same
    text (what parse-back returns is usable, not just comparable)."""
    unreadable = []
    for tool in _all_tools():
        if tool.parameters is UNSET:
            continue
        written = typescript.signature(tool.parameters)
        back = typescript.read_signature(written)
        if isinstance(back, dict) and typescript.SIGNATURE_KEY in back:
            unreadable.append(tool.name)
            continue
        assert typescript.signature(back) == written, tool.name
    assert unreadable == ["refund"]  # a oneOf union: kept as text


# --- tokenizers, options, names ---------------------------------------------------------------------------

def test_tokenizer_missing_template_tokens_is_an_error_up_front():
    for name in ("qwen2.5", "llama3"):
        with pytest.raises(ConfigError, match="lacks <\\|start\\|>"):
            render(load_fixture("plain_chat"), "harmony", load_tokenizer(name))


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ConfigError, match="valid: .*harmony, harmony-jinja"):
        load_template("gpt-oss")
    with pytest.raises(ConfigError, match="valid: harmony, jinja"):
        harmony.family("vllm")


def test_template_options_and_pinned_date(gptoss):
    conv = load_fixture("plain_chat")
    options = RenderOptions(now=datetime(2025, 3, 4), template_kwargs={"reasoning_effort": "high",
                                                                      "model_identity": "You are Ada."})
    rendered = render(conv, "harmony", gptoss, options=options)
    assert rendered.text.startswith("<|start|>system<|message|>You are Ada.\nKnowledge cutoff: 2024-06\n"
                                    "Current date: 2025-03-04\n\nReasoning: high\n\n")
    check_roundtrip(conv, rendered, "harmony", gptoss)
    assert "Current date: 2024-07-26\n" in render(conv, "harmony", gptoss).text
    with pytest.raises(RenderError, match="builtin_tools"):
        render(conv, "harmony", gptoss, options=RenderOptions(template_kwargs={"builtin_tools": ["python"]}))


def test_string_arguments_are_refused_by_the_template(gptoss_hf):
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}]
    with pytest.raises(Exception, match="must be an object"):
        gptoss_hf.apply_chat_template(messages, chat_template=load_template("harmony").source, tokenize=False)


def test_parse_back_refuses_any_malformed_stream_with_a_render_error(gptoss):
    """Whatever the text (pieces of real renders shuffled, cut and mixed with noise), parse-back returns a
    conversation or raises RenderError naming the message: never another exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    whole = render(load_fixture("harmony/reasoning_agent"), "harmony", gptoss).text
    pieces = re.split(r"(<\|[a-z_]+\|>)", whole) + ["// x", "type f = (_: {\n", ") => any;\n\n", "\n", " to=", "{}"]

    head = whole[:whole.index("<|start|>user")]  # system and developer messages, so later pieces get read

    @settings(max_examples=300, deadline=None)
    @given(st.booleans(), st.lists(st.sampled_from(pieces), max_size=40), st.sampled_from(["harmony", "jinja"]))
    def check(with_head, parts, style):
        text = (head if with_head else "") + "".join(parts)
        try:
            harmony.parse_back(text, style)
        except RenderError:
            pass

    check()


def _schemas():
    from hypothesis import strategies as st

    text = st.text(alphabet="ab \"'\n\r/é{}", max_size=8)
    # Floats with few digits: openai-harmony reads JSON numbers with serde_json's fast parser, which can be
    # one unit in the last place off for long ones (1.6106113325123825 comes back ...823).
    floats = st.one_of(st.integers(-4000, 4000).map(lambda i: i / 64),
                       st.sampled_from([1e-7, 6.103515625e-05, 1e-5, 1e21, 2.5e300, -0.0, 0.1, 1e16, 1.2345e15]))
    scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), floats, text)
    leaf = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "number", "integer", "boolean", "null", ["string", "integer"], ["null"]])},
        optional={"description": text, "title": text, "default": scalar, "nullable": st.booleans(),
                  "enum": st.lists(st.one_of(text, st.integers(0, 3)), max_size=3),
                  "examples": st.lists(text, max_size=2),
                  "format": st.just("email")})

    def extend(inner):
        names = st.text(alphabet="abxy_", min_size=1, max_size=4)
        obj = st.fixed_dictionaries(
            {"type": st.just("object"), "properties": st.dictionaries(names, inner, max_size=4)},
            optional={"required": st.lists(names, max_size=3), "description": text,
                      "additionalProperties": st.booleans()})
        array = st.fixed_dictionaries({"type": st.just("array")}, optional={"items": inner, "description": text})
        union = st.fixed_dictionaries({"oneOf": st.lists(inner, max_size=3)},
                                      optional={"description": text, "default": scalar})
        return st.one_of(obj, array, union)

    return st.recursive(leaf, extend, max_leaves=8)


def _python_floats_agree(value) -> bool:
    if isinstance(value, float):
        return json.dumps(value) == typescript.float_text(value)
    if isinstance(value, dict):
        return all(map(_python_floats_agree, value.values()))
    if isinstance(value, list):
        return all(map(_python_floats_agree, value))
    return True


def test_float_text_follows_openai_harmony():
    cases = {1.0: "1.0", 1.5: "1.5", 100.0: "100.0", 1e-7: "1e-7", 6.103515625e-05: "0.00006103515625", 1e21: "1e21",
             2.5e300: "2.5e300", -0.0: "-0.0", 0.1: "0.1", 1e16: "1e16", 1.2345e15: "1234500000000000.0",
             1e-5: "0.00001", -1.25e-6: "-1.25e-6"}
    assert {number: typescript.float_text(number) for number in cases} == cases


def test_signature_writer_agrees_with_openai_harmony_and_the_template_macro(encoding):
    """On generated schemas (objects, arrays, unions, enums, defaults, titles, nullable, odd text), the
    Python writer gives openai-harmony's text, and the template's macro gives the Python writer's."""
    import openai_harmony as oh
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from pipeline.render.templates import make_environment

    macro = make_environment().from_string(load_template("harmony").source).module.tool_definition

    @settings(max_examples=int(os.environ.get("SFTPREP_HYPOTHESIS_EXAMPLES", "300")), deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(_schemas(), st.text(alphabet="ab\n\r ", max_size=6))
    def check(schema, description):
        tool = oh.ToolDescription.new("f", description, parameters=schema)
        developer = oh.DeveloperContent.new().with_function_tools([tool])
        expected = encoding.decode(encoding.render(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer)))
        ours = typescript.tool_definition("f", description, schema)
        assert f"namespace functions {{\n\n{ours}\n\n}} // namespace functions" in expected
        if _python_floats_agree(schema):  # the macro writes floats as Python does (see the template)
            assert str(macro({"type": "function", "function": {"name": "f", "description": description,
                                                               "parameters": schema}})) == ours
        back = typescript.read_signature(typescript.signature(schema))  # reading back is a function of the text
        assert typescript.read_signature(typescript.signature(back)) == back or typescript.SIGNATURE_KEY in back

    check()
