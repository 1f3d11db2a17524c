"""Differential tests of the built-in families: conversations drawn with edge cases in every field
(edge_conversations) rendered by each family and compared with its reference, text and token ids: the
official template through transformers (and the mask of trl's training variant where there is one),
openai-harmony, mistral-common. Every render also parses back to what went in, up to its ledger, and
`sftprep render --json` gives the same. What they found is pinned in test_edge_cases.py.
SFTPREP_HYPOTHESIS_EXAMPLES sets the examples per test."""

from __future__ import annotations

import json
import os
import re

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from edge_conversations import Shape, conversations
from render_support import assert_same, assert_same_list, transformers_render
from test_harmony import (encoding, gptoss, gptoss_hf, harmony_reference, official_messages,  # noqa: F401
                          official_render, official_supports)
from test_llama3 import reference_inputs as llama3_reference, reference_tools as llama3_tools
from test_qwen3 import reference_inputs as qwen_reference

from pipeline.conversation import Conversation
from pipeline.errors import RenderError
from pipeline.render import RenderOptions, check_roundtrip, load_tokenizer, render

SETTINGS = settings(max_examples=int(os.environ.get("SFTPREP_HYPOTHESIS_EXAMPLES", "40")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def tokenizers():
    return {name: load_tokenizer(name) for name in ("qwen3", "llama3", "mistral")}


@pytest.fixture(scope="module")
def hf(tokenizers):
    """transformers tokenizers over the same vocabularies (built once: it takes seconds)."""
    return {name: tokenizers[name].to_transformers() for name in ("qwen3", "llama3")}


def _render(conv: Conversation, family: str, tokenizer, refusals: tuple[str, ...] = (), **options):
    """Our render, or None when it refuses text that spells a special token (that text is in `conv`) or
    with another code of `refusals` (declared refusals of the family)."""
    try:
        return render(conv, family, tokenizer, options=RenderOptions(**options))
    except RenderError as exc:
        if exc.code == "render_special_token":
            token = re.search(r"special token (\S+), which", exc.message).group(1)
            assert token in json.dumps(msgspec.to_builtins(conv), ensure_ascii=False)
        elif exc.code not in refusals:
            raise
        event(f"refused: {exc.code}")
        return None


def _prompt(conv: Conversation, asked: bool) -> bool:
    """A generation prompt, when asked, for a conversation that does not end on an answer."""
    return asked and bool(conv.messages) and conv.messages[-1].role != "assistant"


# --- ChatML (Qwen2.5) and Qwen3: the official templates ------------------------------------------------

def _without_trl_newlines(ids: list[int], mask: list[int], tokenizer) -> list[int]:
    """trl's training mask without the newlines it also trains: after <|im_start|>assistant and after
    <|im_end|> (README: sftprep trains neither)."""
    newline, end = tokenizer.encode("\n"), tokenizer.token_id("<|im_end|>")
    header = tokenizer.encode("<|im_start|>assistant")
    assert len(newline) == 1
    return [0 if m and i == newline[0] and (ids[k - 1:k] == [end] or ids[k - len(header):k] == header) else m
            for k, (i, m) in enumerate(zip(ids, mask))]


@SETTINGS
@given(conv=conversations(), asked=st.booleans())
def test_chatml_equals_the_official_qwen25_template(conv, asked, qwen, qwen_hf, official):
    prompt = _prompt(conv, asked)
    ours = _render(conv, "chatml", qwen, add_generation_prompt=prompt)
    if ours is None:
        return
    check_roundtrip(conv, ours, "chatml", qwen)
    messages, tools = qwen_reference(conv)
    text, ids = transformers_render(qwen_hf, official("qwen2_5.jinja"), messages, tools, add_generation_prompt=prompt)
    assert_same(text, ids, ours.text, ours.input_ids)
    event("compared with the official template" + (" (generation prompt)" if prompt else ""))
    if not prompt:
        trl = qwen_hf.apply_chat_template(messages, tools=tools, chat_template=official("qwen2_5_training.jinja"),
                                          tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        assert_same(qwen.decode(ids), ids, qwen.decode(trl["input_ids"]), list(trl["input_ids"]),
                    "the official template vs trl's training variant")
        expected = _without_trl_newlines(ids, list(trl["assistant_masks"]), qwen)
        assert_same_list(expected, ours.loss_mask, "trl's training mask (less its two newlines) vs ours")


@SETTINGS
@given(conv=conversations(), asked=st.booleans(), thinking=st.booleans())
def test_qwen3_equals_the_official_template(conv, asked, thinking, tokenizers, hf, official):
    tok = tokenizers["qwen3"]
    prompt = _prompt(conv, asked)
    kwargs = {} if thinking else {"enable_thinking": False}
    ours = _render(conv, "qwen3", tok, add_generation_prompt=prompt, template_kwargs=kwargs)
    if ours is None:
        return
    check_roundtrip(conv, ours, "qwen3", tok)
    messages, tools = qwen_reference(conv)
    text, ids = transformers_render(hf["qwen3"], official("qwen3.jinja"), messages, tools,
                                    add_generation_prompt=prompt, **kwargs)
    assert_same(text, ids, ours.text, ours.input_ids)
    event("compared with the official template" + (" (generation prompt)" if prompt else ""))


# --- Llama 3.1: the official template, one call per turn, text beside it dropped as it drops it --------

@SETTINGS
@given(conv=conversations(Shape(parallel=False, opening_assistant=False)), asked=st.booleans(),
       in_user=st.booleans())
def test_llama3_equals_the_official_template(conv, asked, in_user, tokenizers, hf, official):
    """Without parallel calls and (as the official template would relabel it) an opening assistant turn."""
    tok = tokenizers["llama3"]
    prompt = _prompt(conv, asked)
    ours = _render(conv, "llama3", tok, add_generation_prompt=prompt, calls="drop-text",
                   template_kwargs={"tools_in_user_message": in_user})
    if ours is None:
        return
    check_roundtrip(conv, ours, "llama3", tok)
    text, ids = transformers_render(hf["llama3"], official("llama3_1.jinja"), llama3_reference(conv),
                                    llama3_tools(conv), add_generation_prompt=prompt, tools_in_user_message=in_user)
    assert_same(text, ids, ours.text, ours.input_ids)
    event("compared with the official template" + (" (generation prompt)" if prompt else ""))


@SETTINGS
@given(conv=conversations())
def test_llama3_splits_any_turn_and_parses_back(conv, tokenizers):
    tok = tokenizers["llama3"]
    ours = _render(conv, "llama3", tok)
    if ours is not None:
        check_roundtrip(conv, ours, "llama3", tok)


# --- Harmony: openai-harmony's tokens; the official gpt-oss template in the jinja style ----------------

# What the official gpt-oss template renders faithfully (official_supports says the rest).
GPTOSS = Shape(parallel=False, text_beside_calls=False, structured_results=False)


@SETTINGS
@given(conv=conversations() | conversations(GPTOSS), asked=st.booleans())
def test_harmony_equals_openai_harmony_and_the_official_template(conv, asked, gptoss, gptoss_hf, encoding,
                                                                 official):
    """Two adjacent assistant messages whose first ends without an answer are a declared refusal."""
    prompt = _prompt(conv, asked)
    ours = _render(conv, "harmony", gptoss, ("render_turn_boundary",), add_generation_prompt=prompt)
    if ours is None:
        return
    check_roundtrip(conv, ours, "harmony", gptoss)
    expected = harmony_reference(conv, encoding, prompt)
    assert_same(encoding.decode(expected), expected, ours.text, ours.input_ids, "ours vs openai-harmony")
    event("compared with openai-harmony" + (" (generation prompt)" if prompt else ""))
    if official_supports(conv, encoding, official("gptoss.jinja")) is not None:
        return
    text, ids, now = official_render(gptoss_hf, official("gptoss.jinja"), conv,
                                     add_generation_prompt=prompt)
    jinja = render(conv, "harmony-jinja", gptoss, options=RenderOptions(now=now, add_generation_prompt=prompt))
    check_roundtrip(conv, jinja, "harmony-jinja", gptoss)
    assert_same(text, ids, jinja.text, jinja.input_ids, "ours (jinja style) vs the official template")
    event("compared with the official template" + (" (generation prompt)" if prompt else ""))
    if not prompt:
        messages, tools = official_messages(conv)
        trl = gptoss_hf.apply_chat_template(
            messages, tools=tools, chat_template=official("gptoss_training.jinja"), tokenize=True, return_dict=True,
            return_assistant_tokens_mask=True)
        assert_same(text, ids, gptoss.decode(trl["input_ids"]), list(trl["input_ids"]),
                    "the official template vs trl's training variant")
        assert_same_list(list(trl["assistant_masks"]), jinja.loss_mask, "trl's training mask vs ours")


# --- Mistral: mistral-common's encoder ----------------------------------------------------------------

MISTRAL = Shape(extra_strings=(), names=("get_weather", "lookup", "f", "tool_2"), system_midway=False)


@SETTINGS
@given(conv=conversations(MISTRAL))
def test_mistral_equals_mistral_common_where_it_accepts(conv, tokenizers):
    """mistral-common refuses some conversations (an empty answer, say): those parse back only."""
    from test_mistral import mistral_common_render  # skips without mistral-common (a dev extra)

    tok = tokenizers["mistral"]
    ours = _render(conv, "mistral", tok)
    if ours is None:
        return
    check_roundtrip(conv, ours, "mistral", tok)
    reference = mistral_common_render(conv)
    if not isinstance(reference, str):
        assert_same(*reference, ours.text, ours.input_ids, "mistral-common vs ours")
        event("compared with mistral-common")



# --- the command line: `sftprep render --json` gives the render API's output, which parses back -------

FAMILY_TOKENIZERS = {"chatml": "qwen2.5", "qwen3": "qwen3", "llama3": "llama3", "harmony": "gpt-oss",
                     "harmony-jinja": "gpt-oss", "mistral": "mistral"}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(convs=st.lists(conversations(), min_size=4, max_size=4))
def test_cli_render_json_equals_the_render_api_and_parses_back(convs, tmp_path_factory, capsys):
    from pipeline.cli.main import main
    from pipeline.conversation import to_json

    path = tmp_path_factory.mktemp("generated") / "conversations.jsonl"
    path.write_bytes(b"".join(to_json(conv) + b"\n" for conv in convs))
    for family, name in FAMILY_TOKENIZERS.items():
        tok = load_tokenizer(name)
        code = main(["render", str(path), "--record", "all", "--template", family, "--json", "--from", "canonical",
                     "--date", "2024-07-26"])
        lines = [json.loads(line) for line in capsys.readouterr().out.split("\n") if line]  # U+2028 is no break
        assert len(lines) == len(convs)
        failed = False
        for conv, line in zip(convs, lines):
            try:
                expected = render(conv, family, tok)
            except RenderError as exc:
                assert line["error"]["code"] == exc.code
                failed = True
                continue
            assert_same(expected.text, expected.input_ids, line["text"], line["input_ids"], f"{family}: API vs CLI")
            assert_same_list(expected.loss_mask, line["loss_mask"], f"{family}: the API's mask vs the CLI's")
            check_roundtrip(conv, msgspec.structs.replace(expected, input_ids=line["input_ids"]), family, tok)
        assert code == (1 if failed else 0)
