"""past_reasoning = "expand": every trained assistant turn is trained exactly once, in a row that starts
with what the official template gives the model before that turn (checked through transformers), with
its reasoning rendered and trained."""

from __future__ import annotations

import pytest
from msgspec import structs

from corpus import corpus_available, params
from render_support import load_fixture
from test_qwen3 import reasoning_exchanges, reference_inputs

from pipeline.conversation import Conversation, Message, Reasoning, Text, ToolCall, ToolResult
from pipeline.errors import RenderError
from pipeline.render import MaskPolicy, RenderOptions, Template, load_template, load_tokenizer, render
from pipeline.render.expand import expand


@pytest.fixture(scope="module")
def qwen3():
    return load_tokenizer("qwen3")


@pytest.fixture(scope="module")
def qwen3_hf(qwen3):
    return qwen3.to_transformers()


@pytest.fixture(scope="module")
def template():
    return load_template("qwen3")


def trained_messages(rendered) -> dict[int, int]:
    """message -> trained tokens in it."""
    out: dict[int, int] = {}
    for span in rendered.spans:
        trained = sum(rendered.loss_mask[span.token_start:span.token_end])
        if trained and span.message is not None:
            out[span.message] = out.get(span.message, 0) + trained
    return out


def check_expansion(conv: Conversation, rows, template, tokenizer, hf, official_source: str) -> None:
    """The properties `expand` promises, checked independently of it: each assistant turn trained in
    exactly one row; that row starts with the model's prompt for the turn (the conversation so far with
    the generation prompt: text and ids) and trains every reasoning block of the turn. The prompt is the
    official template's (through transformers) where the independently written reference_inputs carry
    the conversation exactly (the official full render equals ours), else our render of the prompt."""
    messages, tools = reference_inputs(conv)
    official_full = hf.apply_chat_template(messages, tools=tools, chat_template=official_source, tokenize=False)
    reference_exact = official_full == render(conv, template, tokenizer).text
    seen: dict[int, int] = {}
    for k, row in enumerate(rows):
        trained = trained_messages(row.rendered)
        assert set(trained) == set(row.trained), f"row {k} says it trains {row.trained}, its mask {sorted(trained)}"
        for mi in trained:
            assert mi not in seen, f"message {mi} trained in rows {seen[mi]} and {k}"
            seen[mi] = k
            head = structs.replace(conv, messages=conv.messages[:mi])
            if reference_exact:
                messages, tools = reference_inputs(head)
                prompt = hf.apply_chat_template(messages, tools=tools, chat_template=official_source, tokenize=False,
                                                add_generation_prompt=True)
            else:
                prompt = render(head, template, tokenizer, options=RenderOptions(add_generation_prompt=True)).text
            assert row.rendered.text.startswith(prompt), f"row {k}: the prompt of message {mi} is not its prefix"
            ids = tokenizer.encode(prompt)
            assert row.rendered.input_ids[:len(ids)] == ids
            for bi, block in enumerate(conv.messages[mi].blocks):
                if isinstance(block, Reasoning) and block.text and block.text.strip("\n"):
                    spans = [s for s in row.rendered.spans if (s.message, s.block, s.kind) == (mi, bi, "reasoning")]
                    assert spans and all(all(row.rendered.loss_mask[s.token_start:s.token_end]) for s in spans), (
                        f"row {k}: the reasoning at messages[{mi}].blocks[{bi}] is not rendered and trained")
    wanted = {mi for mi, m in enumerate(conv.messages) if m.role == "assistant" and m.weight != 0
              and any(render_carries(b) for b in m.blocks)}
    assert set(seen) == wanted, f"trained {sorted(seen)}, assistant turns {sorted(wanted)}"


def render_carries(block) -> bool:
    return not isinstance(block, (Reasoning, ToolCall)) or (isinstance(block, Reasoning) and bool(block.text)) or (
        isinstance(block, ToolCall) and block.kind != "hosted")


def test_fixture_rows_and_cases(qwen3, qwen3_hf, template, official):
    conv = load_fixture("qwen3/thinking_agent")
    rows = expand(conv, template, qwen3)
    assert [(r.case, r.messages, r.trained) for r in rows] == [("prefix", 5, (1, 4)), ("final", 9, (6, 8))]
    check_expansion(conv, rows, template, qwen3, qwen3_hf, official("qwen3.jinja"))
    assert "Two ISBNs: look both up at once.\n</think>" in rows[0].rendered.text
    as_template = render(conv, template, qwen3)
    assert rows[1].rendered.text == as_template.text  # the full render, its earlier turns untrained
    assert sum(rows[1].rendered.loss_mask) < sum(as_template.loss_mask)


def test_without_reasoning_one_whole_row_equal_to_the_render(qwen3, template):
    conv = load_fixture("weather_parallel")
    rows = expand(conv, template, qwen3)
    assert [(r.case, r.messages, r.trained) for r in rows] == [("whole", 5, (1, 4))]
    assert rows[0].rendered == render(conv, template, qwen3)


def test_reasoning_only_in_the_current_query_needs_one_row(qwen3, template):
    conv = load_fixture("qwen3/thinking_agent")
    late = structs.replace(conv, messages=tuple(
        m if mi >= 5 else structs.replace(m, blocks=tuple(b for b in m.blocks if not isinstance(b, Reasoning)))
        for mi, m in enumerate(conv.messages)))
    rows = expand(late, template, qwen3)
    assert [(r.case, r.trained) for r in rows] == [("whole", (1, 4, 6, 8))]
    assert rows[0].rendered == render(late, template, qwen3)


def test_weights_and_last_turn_policy(qwen3, template):
    conv = load_fixture("qwen3/thinking_agent")
    weighted = structs.replace(conv, messages=tuple(structs.replace(m, weight=0) if mi == 4 else m
                                                    for mi, m in enumerate(conv.messages)))
    assert [(r.case, r.trained) for r in expand(weighted, template, qwen3)] == [("prefix", (1,)), ("final", (6, 8))]
    assert [(r.case, r.trained) for r in expand(conv, template, qwen3, mask=MaskPolicy(turns="last"))] == [
        ("whole", (8,))]


def test_a_turn_no_row_renders_as_at_inference_is_an_error(qwen3):
    """A template whose generation prompt is not how it writes the turn: no row is faithful, so refuse."""
    source = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
              "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}"
              "<|im_end|>{% endgeneration %}\n{% else %}{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\nSure: {% endif %}")
    conv = Conversation(messages=(Message(role="user", blocks=(Text("2+2?"),)),
                                  Message(role="assistant", blocks=(Reasoning(text="add"), Text("4")))))
    with pytest.raises(RenderError, match="not rendered as the model sees it") as info:
        expand(conv, Template.compile("prompted", source), qwen3)
    assert info.value.path == "$.messages[1]" and info.value.code == "render_expand"


def test_rendering_with_expand_gives_the_full_row(qwen3, template):
    conv = load_fixture("qwen3/thinking_agent")
    assert render(conv, template, qwen3, options=RenderOptions(past_reasoning="expand")) == render(conv, template, qwen3)


def _multi_turn_reasoning(items):
    """Conversations with reasoning in an assistant turn before the last user query: the ones `expand`
    is for."""
    out = []
    for key, conv in items:
        users = [mi for mi, m in enumerate(conv.messages) if m.role == "user"
                 and not all(isinstance(b, ToolResult) for b in m.blocks)]
        reasoning = [mi for mi, m in enumerate(conv.messages) if m.role == "assistant"
                     and any(isinstance(b, Reasoning) and b.text for b in m.blocks)]
        if users and reasoning and min(reasoning) < max(users):
            out.append((key, conv))
    return out


def claude_code_sessions() -> list[tuple[str, Conversation]]:
    if not corpus_available():
        return []
    from corpus import CORPUS
    from pipeline.formats import parse
    from pipeline.ingest.sessions.claude_code import read_session_file

    folder = CORPUS / "claude_code_spotter_sessions"
    return [(str(p.relative_to(folder)), parse(read_session_file(p).body, "anthropic"))
            for p in sorted(folder.rglob("*.jsonl"))]


@pytest.mark.parametrize("conv", params(_multi_turn_reasoning(reasoning_exchanges() + claude_code_sessions())
                                        if corpus_available() else []))
def test_corpus_multi_turn_reasoning_each_turn_trained_once_in_context(conv, qwen3, qwen3_hf, template, official):
    rows = expand(conv, template, qwen3)
    assert len(rows) >= 2 or rows[0].case == "prefix"
    check_expansion(conv, rows, template, qwen3, qwen3_hf, official("qwen3.jinja"))
