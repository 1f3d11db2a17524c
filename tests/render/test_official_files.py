"""The official chat templates used as user files (no generation markers): what they train is found by
rendering, and it equals what the built-in families train, up to the differences the README names:

- Qwen2.5: none (ids and masks equal).
- Llama 3.1: the official template drops text beside a call (ledgered `dropped`); the built-in family
  does the same with `calls = "drop-text"`, and then ids and masks are equal.
- gpt-oss: the built-in trains each turn's `<|start|>assistant` (as trl's training template does); the
  official file is a plain template, so its turns are trained from after that generation prompt. Where a
  later final answer exists the official template drops the text beside a call (ledgered), which the
  built-in keeps as a commentary preamble; where none exists it writes that text on the analysis channel.
"""

from __future__ import annotations

import pytest

from corpus import params, tau_bench_trajectories
from render_support import load_fixture, trained_pieces

from pipeline.conversation import Conversation, Message, Text, Tool, ToolCall, ToolResult
from pipeline.formats import parse
from pipeline.render import RenderOptions, load_template, load_tokenizer, render

PREAMBLE = "<|start|>assistant<|channel|>commentary<|message|>"
PAIRS = {"qwen2_5.jinja": ("chatml", "qwen2.5"), "llama3_1.jinja": ("llama3", "llama3"),
         "gptoss.jinja": ("harmony-jinja", "gpt-oss")}


@pytest.fixture(scope="module")
def official_file(official, tmp_path_factory):
    """official_file("qwen2_5.jinja") -> the sha256-checked official template, loaded from a .jinja file."""
    folder = tmp_path_factory.mktemp("official")

    def get(name: str):
        path = folder / name
        if not path.exists():
            path.write_text(official(name), encoding="utf-8")
        return load_template(str(path))

    return get


@pytest.fixture(scope="module")
def tokenizers():
    return {name: load_tokenizer(name) for name in ("qwen2.5", "llama3", "gpt-oss")}


def _generation_prompt_cleared(builtin, tokenizer) -> list[int]:
    """The built-in Harmony mask without each trained `<|start|>assistant` that opens a run of trained
    tokens (the generation prompt the official file does not train)."""
    mask, ids = list(builtin.loss_mask), builtin.input_ids
    start, assistant = tokenizer.token_id("<|start|>"), tokenizer.encode("assistant")
    for k in range(len(ids) - 1):
        if ids[k] == start and [ids[k + 1]] == assistant and mask[k] and (k == 0 or not mask[k - 1]):
            mask[k] = mask[k + 1] = 0
    return mask


def _opens_with_a_call() -> Conversation:
    tools = (Tool("get_weather", "Current weather for a city.",
                  {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),)
    return Conversation(tools=tools, messages=(
        Message("user", (Text("Weather in Oslo?"),)),
        Message("assistant", (ToolCall(id="c1", name="get_weather", arguments={"city": "Oslo"}),)),
        Message("tool", (ToolResult(call_id="c1", name="get_weather", content=(Text('{"temp_c": 4}'),)),)),
        Message("assistant", (Text("It is 4 °C in Oslo."),))))


def test_qwen_file_trains_the_call_syntax_that_opens_a_turn(official_file, tokenizers):
    qwen = tokenizers["qwen2.5"]
    conv = _opens_with_a_call()
    ours, theirs = render(conv, "chatml", qwen), render(conv, official_file("qwen2_5.jinja"), qwen)
    assert theirs.input_ids == ours.input_ids and theirs.loss_mask == ours.loss_mask
    trained = trained_pieces(theirs, qwen)
    assert trained[0].startswith('<tool_call>\n{"name": "get_weather"') and trained[0].endswith("<|im_end|>")
    assert trained[1] == "It is 4 °C in Oslo.<|im_end|>"


@pytest.mark.parametrize("name", ["calls_only", "plain_chat", "system_midway", "weather_parallel", "weighted"])
def test_qwen_file_equals_the_builtin_on_the_fixtures(name, official_file, tokenizers):
    qwen, conv = tokenizers["qwen2.5"], load_fixture(name)
    ours, theirs = render(conv, "chatml", qwen), render(conv, official_file("qwen2_5.jinja"), qwen)
    assert theirs.text == ours.text and theirs.input_ids == ours.input_ids
    assert theirs.loss_mask == ours.loss_mask


def test_files_render_what_opens_with_a_call_like_the_builtins(official_file, tokenizers):
    conv = _opens_with_a_call()
    for name in ("llama3_1.jinja", "gptoss.jinja"):
        family, tok = PAIRS[name]
        theirs, ours = render(conv, official_file(name), tokenizers[tok]), render(conv, family, tokenizers[tok])
        assert theirs.input_ids == ours.input_ids, name
        expected = _generation_prompt_cleared(ours, tokenizers[tok]) if tok == "gpt-oss" else list(ours.loss_mask)
        assert theirs.loss_mask == expected, name


def test_llama_file_ledgers_the_text_it_drops(official_file, tokenizers):
    llama = tokenizers["llama3"]
    conv = Conversation(tools=_opens_with_a_call().tools, messages=(
        Message("user", (Text("Weather in Oslo?"),)),
        Message("assistant", (Text("Let me check."), ToolCall(id="c1", name="get_weather", arguments={"city": "Oslo"}))),
        Message("tool", (ToolResult(call_id="c1", content=(Text("4 C"),)),)),
        Message("assistant", (Text("4 °C."),))))
    theirs = render(conv, official_file("llama3_1.jinja"), llama)
    assert "Let me check." not in theirs.text
    assert [(e.kind, e.path) for e in theirs.ledger] == [("dropped", "$.messages[1].blocks[0]")]
    ours = render(conv, "llama3", llama, options=RenderOptions(calls="drop-text"))
    assert theirs.input_ids == ours.input_ids and theirs.loss_mask == ours.loss_mask


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()))
def test_official_files_train_what_the_builtins_train_on_the_corpus(traj, official_file, tokenizers):
    conv = parse(traj, "openai-chat")
    qwen, llama, gptoss = tokenizers["qwen2.5"], tokenizers["llama3"], tokenizers["gpt-oss"]

    theirs, ours = render(conv, official_file("qwen2_5.jinja"), qwen), render(conv, "chatml", qwen)
    assert (theirs.input_ids, theirs.loss_mask) == (ours.input_ids, ours.loss_mask)

    theirs = render(conv, official_file("llama3_1.jinja"), llama)
    ours = render(conv, "llama3", llama, options=RenderOptions(calls="drop-text"))
    assert (theirs.input_ids, theirs.loss_mask) == (ours.input_ids, ours.loss_mask)
    # What the file drops is text beside a call, which the built-in's default keeps in a turn of its own.
    split = render(conv, "llama3", llama)
    moved = {e.path for e in split.ledger if e.kind == "moved"}
    assert {e.path.rsplit(".blocks", 1)[0] for e in theirs.ledger if e.kind == "dropped"} == moved

    theirs, ours = render(conv, official_file("gptoss.jinja"), gptoss), render(conv, "harmony-jinja", gptoss)
    dropped = [e for e in theirs.ledger if e.kind == "dropped"]
    if not dropped and theirs.input_ids != ours.input_ids:
        # Text beside the last call, with no final answer after it: the official template writes it on
        # the analysis channel, the built-in as the call's commentary preamble.
        assert theirs.text == ours.text.replace(PREAMBLE, "<|start|>assistant<|channel|>analysis<|message|>")
    elif not dropped:
        assert theirs.loss_mask == _generation_prompt_cleared(ours, gptoss)
    else:  # text beside a call, with a final answer later: the official template leaves it out
        for entry in dropped:
            message = int(entry.path.split("[")[1].split("]")[0])
            block = conv.messages[message].blocks[int(entry.path.rsplit("[", 1)[1][:-1])]
            assert isinstance(block, Text) and any(isinstance(b, ToolCall) for b in conv.messages[message].blocks)
            assert block.text.strip() and block.text.strip() not in theirs.text and block.text.strip() in ours.text
