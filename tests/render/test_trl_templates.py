"""Every tool-capable template of TRL 1.16's collection as a user template: where the renderer accepts it,
its text (and ids, where the vocabulary is offline) equals transformers' apply_chat_template, and with
the `_training` variant our mask equals the variant's generation marks; where it does not, it refuses
with a located error. Never a different text in silence. The README's table of templates is this
outcome (CONFORMING below is what it lists as carried)."""

from __future__ import annotations

from datetime import datetime

import pytest
from msgspec import structs

from render_support import OFFICIAL, assert_same, assert_same_list, load_fixture
from test_qwen3 import reference_inputs

from pipeline.errors import RenderError
from pipeline.render import RenderOptions, Template, load_tokenizer, render

TEMPLATES = sorted(name[:-len(".jinja")] for name in OFFICIAL if not name.endswith("_training.jinja"))
TRAINING = {name: f"{name}_training" for name in TEMPLATES if f"{name}_training.jinja" in OFFICIAL}
CONVERSATIONS = ["calls_only", "weather_parallel", "qwen3/newlines", "harmony/reasoning_agent"]
# The offline vocabulary of a template's model, where the project has one (else: text only).
VOCABULARY = {"qwen2_5": "qwen2.5", "qwen3": "qwen3", "qwen3_instruct_2507": "qwen3", "qwen3_vl": "qwen3",
              "qwen3_5_nothink": "qwen3", "qwen3_5_think": "qwen3", "qwen3_6": "qwen3", "qwen3_8": "qwen3",
              "llama3_1": "llama3", "llama3_2": "llama3", "gptoss": "gpt-oss"}
# The conversations each template renders identically today (the rest: refused, or the reference raises).
CONFORMING = {
    "deepseek_r1_distill": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "diffusion_gemma": {"calls_only"},
    "gemma4": {"calls_only"},
    "gemma4_v2": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "gemma4_v3": {"calls_only"},
    "gemma4_v4": {"calls_only"},
    "gemma4_v5": {"calls_only"},
    "glm4moe": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "gptoss": {"calls_only", "weather_parallel"},
    "lfm2_2_5": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "lfm2_2_5_v2": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "lfm2_2_5_vl": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "lfm2_v2": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "llama3_1": {"calls_only", "harmony/reasoning_agent"},
    "llama3_2": {"calls_only", "harmony/reasoning_agent"},
    "muse_glimmer": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "nemotron_3_5_lightning": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "nemotron_3_nano": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "nemotron_3_super": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "nemotron_3_ultra": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen2_5": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "qwen3": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_5_nothink": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_5_think": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_6": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_8": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_instruct_2507": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "qwen3_vl": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
}
# The conversations on which each training variant's generation marks are our mask.
MARKS_CONFORMING = {
    "deepseek_r1_distill": {"qwen3/newlines", "weather_parallel"},
    "deepseekv3": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "glm4moe": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "gptoss": {"calls_only", "weather_parallel"},
    "lfm2_v2": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "muse_glimmer": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "nemotron_3_5_lightning": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "nemotron_3_nano": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "nemotron_3_super": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "nemotron_3_ultra": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen2_5": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "qwen3": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_5_nothink": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_5_think": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_6": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_8": {"calls_only", "harmony/reasoning_agent", "weather_parallel"},
    "qwen3_instruct_2507": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
    "qwen3_vl": {"calls_only", "harmony/reasoning_agent", "qwen3/newlines", "weather_parallel"},
}


@pytest.fixture(scope="module")
def tokenizers():
    loaded: dict[str, object] = {}

    def get(template: str):
        name = VOCABULARY.get(template, "qwen3")
        if name not in loaded:
            tok = load_tokenizer(name)
            loaded[name] = (tok, tok.to_transformers())
        return loaded[name]

    return get


def _conversation(name: str):
    return structs.replace(load_fixture(name), developer=())  # the templates have no developer role


def outcome(source: str, template: str, conv_name: str, tokenizers, *, mask: bool = False):
    """("same", ours, reference ids, reference mask), ("refused", code), or ("reference raises", message);
    ("different", ours, text) only on a silent difference."""
    conv = _conversation(conv_name)
    tok, hf = tokenizers(template)
    messages, tools = reference_inputs(conv)
    try:
        out = hf.apply_chat_template(messages, tools=tools, chat_template=source, tokenize=True, return_dict=True,
                                     return_assistant_tokens_mask=mask)
        text = hf.apply_chat_template(messages, tools=tools, chat_template=source, tokenize=False)
    except Exception as exc:  # the reference refuses the conversation (e.g. Llama's one call per turn)
        return ("reference raises", str(exc)[:120])
    try:
        # A template calling strftime_now gets today's date from transformers: ours, here, too (the
        # renderer pins it otherwise); `date_string` keeps its default (26 Jul 2024) in both.
        options = RenderOptions(now=datetime.now()) if "strftime_now" in source else RenderOptions()
        ours = render(conv, Template.compile(template, source), tok, options=options)
    except RenderError as exc:
        return ("refused", exc.code, exc.path)
    if ours.text != text:
        return ("different", ours, text)
    return ("same", ours, list(out["input_ids"]), list(out["assistant_masks"]) if mask else None)


@pytest.mark.parametrize("conv_name", CONVERSATIONS)
@pytest.mark.parametrize("template", TEMPLATES)
def test_identical_or_refused_never_silently_different(template, conv_name, tokenizers, official):
    result = outcome(official(f"{template}.jinja"), template, conv_name, tokenizers)
    if result[0] == "different":
        assert_same(result[2], [], result[1].text, [], what=f"{template} renders {conv_name} differently")
    conforming = conv_name in CONFORMING.get(template, ())
    assert result[0] == ("same" if conforming else result[0]), result[:3]
    if result[0] == "same":
        assert conforming, "conforms now: add it to CONFORMING and the README's table"
        if template in VOCABULARY:
            assert_same_list(result[2], result[1].input_ids, "transformers' ids vs ours")
    elif result[0] == "refused":
        assert result[1].startswith("render_") and result[2], result


@pytest.mark.parametrize("conv_name", CONVERSATIONS)
@pytest.mark.parametrize("template", sorted(TRAINING))
def test_training_variant_marks_are_our_mask(template, conv_name, tokenizers, official):
    training = TRAINING[template]
    result = outcome(official(f"{training}.jinja"), training, conv_name, tokenizers, mask=True)
    assert result[0] != "different", f"{training} renders {conv_name} differently"
    if conv_name in MARKS_CONFORMING.get(template, ()):
        assert result[0] == "same", result[:3]
        assert_same_list(result[3], result[1].loss_mask, f"{training}'s generation marks vs our mask")
    elif result[0] == "same":
        assert result[3] != result[1].loss_mask, "marks conform now: add it to MARKS_CONFORMING and the README"
