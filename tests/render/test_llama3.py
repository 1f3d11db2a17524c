"""Llama 3.1/3.3: conformance with the official template (trl 1.16.0 llama3_1.jinja), the calls policies
where it is lossy (split, drop-text, refuse), trimming, JSON-quoted results, the mask, spans, goldens,
parse-back, and the corpus."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from msgspec import UNSET, structs

from corpus import params, request_bodies, tau_bench_trajectories
from pipeline.conversation import Conversation, Media, Message, Reasoning, Text, Tool, ToolCall, ToolResult, from_json
from pipeline.errors import ConfigError, RenderError
from pipeline.formats import parse
from pipeline.render import (MaskPolicy, RenderOptions, Template, check_roundtrip, load_template, load_tokenizer,
                             parse_back, render)
from pipeline.render.llama3 import FAMILY
from render_support import (FIXTURES, GOLDENS, assert_concatenates_to_whole, assert_mask_matches_transformers,
                            assert_same, assert_segmented_ids_equal_whole_text_ids, assert_spans_partition,
                            call_arguments, check_golden, corpus_tools, fixture_names, parse_chat, result_content,
                            trained_pieces, transformers_render, with_call)

OWN = sorted(p.stem for p in (FIXTURES / "llama3").glob("*.json"))  # this family's own fixtures
ALL = fixture_names() + OWN
# Inside what the official template supports: one call per turn, nothing beside it, a user message first.
CONFORMING = ["calls_only", "plain_chat", "structured_results", "weighted", "whitespace"]
DROP_TEXT = "drop-text"


def load(name: str) -> Conversation:
    path = FIXTURES / "llama3" / f"{name}.json" if name in OWN else FIXTURES / f"{name}.json"
    return from_json(path.read_bytes())


@pytest.fixture(scope="module")
def llama():
    return load_tokenizer("llama3")


@pytest.fixture(scope="module")
def llama_hf(llama):
    return llama.to_transformers()


@pytest.fixture(scope="module")
def llama3():
    return load_template("llama3")


@pytest.fixture(scope="module")
def official_llama(official):
    return official("llama3_1.jinja")


# --- reference inputs, written independently of the renderer's conversion --------------------------

def _result_dict(result: ToolResult) -> dict:
    texts = [p.text for p in result.content if isinstance(p, Text)]
    # A structured object goes in as the object: the official template `tojson`s a mapping once.
    content = result.output if isinstance(result.output, dict) and not texts else result_content(result)
    return {"role": "tool", "content": content}


def _call_dict(call: ToolCall) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": call.name, "arguments": call_arguments(call)}}]}


def _head(conv: Conversation) -> list[dict]:
    system = "\n".join(b.text for b in conv.system + conv.developer if isinstance(b, Text) and b.text)
    return [{"role": "system", "content": system}] if system else []


def reference_tools(conv: Conversation) -> list[dict] | None:
    tools = [{"type": "function", "function": {"name": t.name,
                                                **({"description": t.description} if t.description is not None else {}),
                                                **({"parameters": t.parameters} if t.parameters is not UNSET else {})}}
             for t in conv.tools if t.kind == "function"]
    return tools or None


def reference_inputs(conv: Conversation) -> list[dict]:
    """What a transformers user hands the official template: one dict per message (text joined by
    newlines, untrimmed: the template trims; developer text as system text), one tool message per result."""
    messages = _head(conv)
    for m in conv.messages:
        texts = "\n".join(b.text for b in m.blocks if isinstance(b, Text) and b.text)
        results = [b for b in m.blocks if isinstance(b, ToolResult)]
        calls = [b for b in m.blocks if isinstance(b, ToolCall)]
        if results:
            messages += [_result_dict(r) for r in results]
        elif calls:
            messages.append({**_call_dict(calls[0]), "content": texts,
                             "tool_calls": [_call_dict(c)["tool_calls"][0] for c in calls]})
        else:
            messages.append({"role": "system" if m.role == "developer" else m.role, "content": texts})
    return messages


# The turn order the split policy must give, by hand: (message, blocks) per rendered turn.
SPLIT_ORDER = {
    "weather_parallel": [(0, [0]), (1, [0]), (1, [1]), (2, [0]), (1, [2]), (3, [0]), (4, [0])],
    "system_midway": [(0, [0]), (1, [0]), (2, [0]), (3, [0]), (4, [0]), (5, [0]), (6, [0]), (6, [1]), (7, [0]),
                      (8, [0])],
    # the result of the first call moves ahead of the text that followed the call; the blank text
    # after the last call and the reasoning are not turns of their own
    "text_between_calls": [(0, [0]), (1, [1]), (1, [2]), (2, [1]), (1, [3]), (1, [4]), (2, [0]), (2, [2]), (3, [0])],
    # b is unanswered: its turn is followed straight by c's
    "unanswered": [(0, [0]), (1, [0]), (3, [0]), (1, [1]), (1, [2]), (2, [0]), (4, [0])],
}


def split_reference(conv: Conversation, order: list[tuple[int, list[int]]]) -> list[dict]:
    messages = _head(conv)
    for mi, bis in order:
        role = conv.messages[mi].role
        blocks = [conv.messages[mi].blocks[bi] for bi in bis]
        match blocks:
            case [ToolCall() as call]:
                messages.append(_call_dict(call))
            case [ToolResult() as result]:
                messages.append(_result_dict(result))
            case _:
                messages.append({"role": role, "content": "\n".join(b.text for b in blocks)})
    return messages


def _ledger(rendered) -> set[tuple[str, str]]:
    return {(e.kind, e.path) for e in rendered.ledger}


# --- conformance ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CONFORMING)
def test_matches_official_template(name, llama, llama_hf, llama3, official_llama):
    conv = load(name)
    text, ids = transformers_render(llama_hf, official_llama, reference_inputs(conv), reference_tools(conv))
    ours = render(conv, llama3, llama)
    assert_same(text, ids, ours.text, ours.input_ids)
    assert llama.encode(ours.text) == ours.input_ids


@pytest.mark.parametrize("name", sorted(SPLIT_ORDER))
def test_split_turns_are_what_the_official_template_renders_for_them(name, llama, llama_hf, llama3, official_llama):
    """Under `split`, the render equals the official template's render of the hand-split conversation."""
    conv = load(name)
    messages = split_reference(conv, SPLIT_ORDER[name])
    text, ids = transformers_render(llama_hf, official_llama, messages, reference_tools(conv))
    ours = render(conv, llama3, llama)
    assert_same(text, ids, ours.text, ours.input_ids)
    assert any(kind == "moved" for kind, _ in _ledger(ours))


def test_drop_text_equals_the_official_template(llama, llama_hf, llama3, official_llama):
    """`drop-text` is the official behaviour for text beside a call, ledgered instead of silent."""
    conv = load("system_midway")
    text, ids = transformers_render(llama_hf, official_llama, reference_inputs(conv), reference_tools(conv))
    ours = render(conv, llama3, llama, options=RenderOptions(calls=DROP_TEXT))
    assert_same(text, ids, ours.text, ours.input_ids)
    assert "Running:" not in ours.text
    assert ("dropped", "$.messages[6].blocks[0]") in _ledger(ours)
    check_roundtrip(conv, ours, llama3, llama)


@pytest.mark.parametrize("name", CONFORMING)
def test_official_template_renders_the_same_in_our_sandbox(name, llama_hf, official_llama):
    from pipeline.render.templates import make_environment

    conv = load(name)
    messages, tools = reference_inputs(conv), reference_tools(conv)
    expected, _ = transformers_render(llama_hf, official_llama, messages, tools)
    ours = make_environment().from_string(official_llama).render(messages=messages, tools=tools,
                                                                 bos_token="<|begin_of_text|>",
                                                                 add_generation_prompt=False)
    assert ours == expected


@pytest.mark.parametrize("name", CONFORMING + sorted(SPLIT_ORDER))
def test_transformers_assistant_mask_with_our_template(name, llama, llama_hf, llama3):
    """templates/llama3.jinja works with `apply_chat_template(..., return_assistant_tokens_mask=True)`,
    and transformers' mask equals ours under the default policy."""
    conv = load(name)
    messages = split_reference(conv, SPLIT_ORDER[name]) if name in SPLIT_ORDER else reference_inputs(conv)
    out = llama_hf.apply_chat_template(messages, tools=reference_tools(conv), chat_template=llama3.source,
                                       tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ours = render(conv, llama3, llama)
    assert list(out["input_ids"]) == ours.input_ids
    assert_mask_matches_transformers(conv, out["assistant_masks"], ours)


def test_pinned_date_and_tools_in_the_system_message_match_official(llama, llama_hf, llama3, official_llama):
    conv = load("calls_only")
    kwargs = {"date_string": "02 Jan 2025", "tools_in_user_message": False}
    text, ids = transformers_render(llama_hf, official_llama, reference_inputs(conv), reference_tools(conv), **kwargs)
    ours = render(conv, llama3, llama, options=RenderOptions(now=datetime(2025, 1, 2),
                                                             template_kwargs={"tools_in_user_message": False}))
    assert_same(text, ids, ours.text, ours.input_ids)
    assert "Today Date: 02 Jan 2025\n\nYou have access to the following functions." in ours.text
    assert check_roundtrip(conv, ours, llama3, llama).tools == conv.tools


def test_string_arguments_and_results(llama, llama_hf, llama3, official_llama):
    """The official template JSON-encodes an argument string again (corrupt) and a result string (a
    reversible quoting, kept for conformance); ours refuses the former and matches the latter."""
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
                {"role": "tool", "content": "a \"b\"\nc"}]
    text = llama_hf.apply_chat_template(messages, chat_template=official_llama, tokenize=False)
    assert '"parameters": "{\\"x\\": 1}"' in text
    assert '<|start_header_id|>ipython<|end_header_id|>\n\n"a \\"b\\"\\nc"<|eot_id|>' in text
    with pytest.raises(Exception, match="must be an object"):
        llama_hf.apply_chat_template(messages, chat_template=llama3.source, tokenize=False)
    # canonical calls with only the raw string are parsed, written once
    conv = load("whitespace")
    rendered = render(conv, llama3, llama)
    assert '{"name": "read_file", "parameters": {"path": "/tmp/a b", "mode": "r"}}<|eot_id|>' in rendered.text
    parsed = check_roundtrip(conv, rendered, llama3, llama)
    result = parsed.messages[-2].blocks[0]
    assert result.content == (Text('  line 1\nline "2"\t\\ end ✓\n'),)  # not trimmed, unquoted on the way back


def test_structured_result_rendered_once(llama, llama3):
    rendered = render(load("structured_results"), llama3, llama)
    assert ('<|start_header_id|>ipython<|end_header_id|>\n\n{"temperature": 18, "unit": "C", "summary": '
            '"légère pluie", "hourly": [17.5, 18, null]}<|eot_id|>') in rendered.text
    parsed = check_roundtrip(load("structured_results"), rendered, llama3, llama)
    assert parsed.messages[2].blocks[0].output == {"temperature": 18, "unit": "C", "summary": "légère pluie",
                                                   "hourly": [17.5, 18, None]}


# --- the calls policies and other ledgered changes ------------------------------------------------------

def test_split_is_the_default_and_ledgered(llama, llama3):
    conv = load("text_between_calls")
    rendered = render(conv, llama3, llama)
    assert rendered.ledger == render(conv, llama3, llama, options=RenderOptions(calls="split")).ledger
    entries = _ledger(rendered)
    assert ("moved", "$.messages[1]") in entries  # the turn was split
    assert ("moved", "$.messages[2].blocks[1]") in entries  # the quote's result moved after its call
    assert ("dropped", "$.messages[1].blocks[0]") in entries  # reasoning
    assert ("dropped", "$.messages[1].blocks[1].text") in entries  # trailing newline trimmed
    assert ("dropped", "$.system[0].text") in entries
    assert all(kind != "dropped" or path.endswith(".text") or path == "$.messages[1].blocks[0]"
               for kind, path in entries)  # no text or call lost
    # each call trained, results and headers not
    assert trained_pieces(rendered, llama) == [
        "I'll check the quote first.<|eot_id|>", '{"name": "get_quote", "parameters": {"symbol": "ACME"}}<|eot_id|>',
        "Then the news.<|eot_id|>",
        '{"name": "get_news", "parameters": {"topic": "ACME \\"Corp\\"", "limit": 3}}<|eot_id|>',
        "ACME trades at 41.20 USD, up 1.3%, and is opening a plant in Lyon.<|eot_id|>"]
    with pytest.raises(Exception, match="cannot carry"):
        render(conv, llama3, llama, options=RenderOptions(strict=True))


def test_drop_text_drops_text_and_still_splits_parallel_calls(llama, llama3):
    conv = load("text_between_calls")
    rendered = render(conv, llama3, llama, options=RenderOptions(calls=DROP_TEXT))
    assert "check the quote" not in rendered.text and "Then the news" not in rendered.text
    entries = _ledger(rendered)
    assert {("dropped", "$.messages[1].blocks[1]"), ("dropped", "$.messages[1].blocks[3]")} <= entries
    assert ("moved", "$.messages[1]") in entries
    assert rendered.text.count('{"name": "get_') == 2
    check_roundtrip(conv, rendered, llama3, llama)


@pytest.mark.parametrize("name, path, message", [
    ("text_between_calls", "$.messages[1].blocks[1]", "text beside a tool call"),
    ("weather_parallel", "$.messages[1].blocks[0]", "text beside a tool call"),
    ("unanswered", "$.messages[1].blocks[1]", "a second tool call in one turn"),
])
def test_refuse_names_the_block(name, path, message, llama, llama3):
    with pytest.raises(RenderError, match=message) as info:
        render(load(name), llama3, llama, options=RenderOptions(calls="refuse"))
    assert info.value.path == path and info.value.code == "render_unsupported_turn"
    # what the template can carry renders the same under every policy
    plain = load("calls_only")
    assert render(plain, llama3, llama, options=RenderOptions(calls="refuse")).text == render(plain, llama3, llama).text


def test_unknown_calls_policy_lists_the_valid_ones(llama, llama3):
    with pytest.raises(ConfigError, match="valid: split, drop-text, refuse"):
        render(load("plain_chat"), llama3, llama, options=RenderOptions(calls="merge"))  # type: ignore[arg-type]


def test_tools_without_an_opening_user_message(llama, llama3):
    conv = load("tools_no_opening_user")
    rendered = render(conv, llama3, llama)
    assert ("synthesized", "$.messages") in _ledger(rendered)
    # the official template would write the assistant's greeting as the user text under the tool list
    assert '"required": [\n                "order"\n            ]\n        }\n    }\n}\n\n<|eot_id|>' \
           '<|start_header_id|>assistant<|end_header_id|>\n\nHello!' in rendered.text
    check_roundtrip(conv, rendered, llama3, llama)
    only_tools = Conversation(tools=conv.tools)
    assert render(only_tools, llama3, llama).text.endswith("\n\n<|eot_id|>")


def test_tools_in_the_system_message_need_no_opening_user_turn(llama, llama3):
    conv = load("tools_no_opening_user")
    rendered = render(conv, llama3, llama, options=RenderOptions(template_kwargs={"tools_in_user_message": False}))
    assert ("synthesized", "$.messages") not in _ledger(rendered)
    assert "You track orders.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!" in rendered.text
    check_roundtrip(conv, rendered, llama3, llama)


def test_split_order_with_text_after_the_last_call(llama, llama3):
    """Blocks [T1, C1, T2, C2, T3] with results R2, R1 render as T1 | C1 | R1 | T2 | C2 | R2 | T3."""
    c1, c2 = (ToolCall(id=f"c{i}", name="ping", arguments={"host": h}) for i, h in ((1, "a"), (2, "b")))
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("ping a and b"),)),
        Message(role="assistant", blocks=(Text("T1"), c1, Text("T2"), c2, Text("T3"))),
        Message(role="user", blocks=(ToolResult(call_id="c2", content=(Text("R2"),)),
                                     ToolResult(call_id="c1", content=(Text("R1"),))))))
    rendered = render(conv, llama3, llama)
    order = ["T1<|eot_id|>", '"a"}}', '"R1"', "T2<|eot_id|>", '"b"}}', '"R2"', "T3<|eot_id|>"]
    assert [rendered.text.index(piece) for piece in order] == sorted(rendered.text.index(p) for p in order)
    assert {("moved", "$.messages[2].blocks[0]"), ("moved", "$.messages[2].blocks[1]")} <= _ledger(rendered)
    check_roundtrip(conv, rendered, llama3, llama)


def test_split_looks_past_a_turn_the_conversion_drops(llama, llama3):
    """A reasoning-only assistant message between the calls and their results (as session logs write
    them) renders nothing, so the results still answer the split turn."""
    calls = tuple(ToolCall(id=f"c{i}", name="ping", arguments={"host": h}) for i, h in enumerate("ab"))
    conv = Conversation(messages=(
        Message(role="user", blocks=(Text("ping a and b"),)),
        Message(role="assistant", blocks=calls),
        Message(role="assistant", blocks=(Reasoning(text="waiting", signature="s"),)),
        Message(role="tool", blocks=(ToolResult(call_id="c0", content=(Text("a up"),)),)),
        Message(role="tool", blocks=(ToolResult(call_id="c1", content=(Text("b up"),)),))))
    rendered = render(conv, llama3, llama)
    assert rendered.text.index('"host": "a"') < rendered.text.index('"a up"') < rendered.text.index('"host": "b"') \
        < rendered.text.index('"b up"')
    assert {("dropped", "$.messages[2]"), ("moved", "$.messages[3].blocks[0]")} <= _ledger(rendered)
    parsed = check_roundtrip(conv, rendered, llama3, llama)
    assert [m.blocks[0].call_id is not None for m in parsed.messages if m.role == "tool"] == [True, True]


def test_lossy_conversation_is_ledgered_not_silent(llama, llama3):
    conv = load("lossy")
    rendered = render(conv, llama3, llama)
    entries = _ledger(rendered)
    assert {("dropped", "$.messages[0].blocks[1]"), ("dropped", "$.messages[1].blocks[0]"),
            ("dropped", "$.messages[2].blocks[1].is_error"), ("folded", "$.developer[0]"),
            ("dropped", "$.tools[1]"), ("moved", "$.messages[1]")} <= entries
    # results follow the call they answer: the error of the first call right after it
    assert rendered.text.index('"amount": 42.5') < rendered.text.index('"rate service timeout"') \
        < rendered.text.index("Converting now.") < rendered.text.index('"amount": 1,') < rendered.text.index('"0.92"')
    check_roundtrip(conv, rendered, llama3, llama)


@pytest.mark.parametrize("fields, message", [
    (dict(raw_arguments='{"q": ', arguments_valid=False), "not valid JSON"),
    (dict(arguments=["a", "b"]), "must be a JSON object"),
    (dict(arguments={"a": 1}, kind="custom"), "free text"),
    (dict(name='say"hi', arguments={}), "cannot be written"),
])
def test_refusals_name_the_block(llama, llama3, fields, message):
    with pytest.raises(RenderError, match=message) as info:
        render(with_call(**fields), llama3, llama)
    assert info.value.path == "$.messages[1].blocks[0]"


def test_text_shaped_like_a_call_or_spelling_special_tokens_is_refused(llama, llama3):
    def turn(*texts: str) -> Conversation:
        return Conversation(messages=(Message(role="user", blocks=(Text("go"),)),
                                      Message(role="assistant", blocks=tuple(Text(t) for t in texts))))

    # rendered, this text would be exactly a call: refused rather than read back as one
    with pytest.raises(RenderError, match="flattened") as info:
        render(turn(" ", '{"name": "f", "parameters": {"x": 1}} '), llama3, llama)
    assert info.value.path == "$.messages[1].blocks[1]"
    # call-shaped JSON inside other text stays text (the validator reports it; the stream is unambiguous)
    beside = turn("Sure.", '{"name": "f", "parameters": {"x": 1}}')
    parsed = check_roundtrip(beside, render(beside, llama3, llama), llama3, llama)
    assert parsed.messages[1].blocks == (Text('Sure.\n{"name": "f", "parameters": {"x": 1}}'),)
    spelled = Conversation(messages=(Message(role="user", blocks=(
        Text("hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nsure"),)),))
    with pytest.raises(RenderError, match="special token") as info:
        render(spelled, llama3, llama)
    assert info.value.path == "$.messages[0].blocks[0]"


# --- bad input --------------------------------------------------------------------------------------

def test_tokenizer_missing_template_tokens_is_an_error_up_front(llama3):
    # checked before anything is rendered: this conversation would otherwise be refused
    with pytest.raises(ConfigError, match="lacks <\\|begin_of_text\\|>, <\\|start_header_id\\|>"):
        render(load("weather_parallel"), llama3, load_tokenizer("qwen2.5"), options=RenderOptions(calls="refuse"))


def test_mask_checks_catch_a_template_that_trains_the_wrong_tokens(llama, llama3):
    conv = load("calls_only")
    results_trained = llama3.source.replace(
        '{{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" + message.content | tojson + "<|eot_id|>" }}',
        '{{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}{% generation %}{{ message.content | tojson }}'
        '<|eot_id|>{% endgeneration %}')
    eot_only = llama3.source.replace("        {%- generation %}\n", "").replace(
        '        {{- "<|eot_id|>" }}\n        {%- endgeneration %}',
        '        {%- generation %}{{- "<|eot_id|>" }}{%- endgeneration %}')
    # call turns left outside any generation region: their calls would silently go untrained
    calls_unmarked = llama3.source.replace(
        "        {%- generation %}\n        {%- if message.tool_calls %}", "        {%- if message.tool_calls %}").replace(
        '        {%- else %}\n            {{- message.content | trim }}\n        {%- endif %}\n'
        '        {{- "<|eot_id|>" }}\n        {%- endgeneration %}',
        '            {{- "<|eot_id|>" }}\n        {%- else %}{%- generation %}\n            {{- message.content | trim }}'
        '\n        {{- "<|eot_id|>" }}\n        {%- endgeneration %}\n        {%- endif %}')
    assert llama3.source not in (results_trained, eot_only, calls_unmarked)
    for source, message, code in ((results_trained, "non-assistant message", "render_template_structure"),
                                  (eot_only, "no message content", "render_template_structure"),
                                  (calls_unmarked, "tool_call tokens of a trained turn are masked", "render_mask")):
        template = Template.compile("broken-llama3", source, FAMILY, builtin=True)
        with pytest.raises(RenderError, match=message) as info:
            render(conv, template, llama)
        assert info.value.code == code


# --- masks, spans, goldens, message by message --------------------------------------------------------

def test_mask_policies(llama, llama3):
    conv = load("weighted")

    def trained(policy):
        return trained_pieces(render(conv, llama3, llama, mask=policy), llama)

    assert trained(MaskPolicy()) == ["4<|eot_id|>", "6<|eot_id|>"]  # weight 0 never trained
    assert trained(MaskPolicy(turns="last")) == ["6<|eot_id|>"]
    assert trained(MaskPolicy(eot=False)) == ["4", "6"]
    header = llama.token_id("<|start_header_id|>")
    rendered = render(load("weather_parallel"), llama3, llama, mask=MaskPolicy(turns="last"))
    assert trained_pieces(rendered, llama) == ["Paris has light rain at 18°C, and it is 22:14 in Tokyo.<|eot_id|>"]
    assert not any(m for i, m in zip(rendered.input_ids, rendered.loss_mask) if i == header)


@pytest.mark.parametrize("name", ALL)
def test_golden(name, llama, llama3, regen_goldens):
    rendered = render(load(name), llama3, llama)
    assert llama.decode(rendered.input_ids) == rendered.text
    check_golden(GOLDENS / "llama3" / f"{name}.txt", name, rendered, llama, regen_goldens)


@pytest.mark.parametrize("name", ALL)
def test_spans_partition_text_and_tokens(name, llama, llama3):
    conv = load(name)
    rendered = render(conv, llama3, llama)
    assert_spans_partition(rendered)
    assert_segmented_ids_equal_whole_text_ids(rendered, llama)
    for span in rendered.spans:
        piece = rendered.text[span.char_start:span.char_end]
        block = conv.messages[span.message].blocks[span.block] if span.block is not None and span.message is not None \
            else None
        if span.kind == "tool_call":
            assert piece == f'{block.name}", "parameters": {json.dumps(call_arguments(block), ensure_ascii=False)}'
        if span.kind == "tool_result" and block.output is UNSET:  # inside the JSON quotes
            assert json.loads(f'"{piece}"') == "\n".join(t.text for t in block.content)


def _units(conv: Conversation) -> list[int]:
    """Where the conversation can be cut: after any message, except between a turn that gets split and
    the results that move into it (whole units, as truncation cuts)."""
    cuts = set(range(1, len(conv.messages) + 1))
    for mi, m in enumerate(conv.messages):
        calls = sum(isinstance(b, ToolCall) for b in m.blocks)
        text = any(isinstance(b, Text) and b.text.strip() for b in m.blocks)
        if m.role == "assistant" and calls and (calls > 1 or text):
            nxt = next((k for k in range(mi + 1, len(conv.messages)) if conv.messages[k].role == "assistant"),
                       len(conv.messages))
            cuts -= set(range(mi + 1, nxt))
    return sorted(cuts)


@pytest.mark.parametrize("name", ALL)
def test_message_by_message_concatenates_to_whole(name, llama, llama3):
    conv = load(name)
    assert_concatenates_to_whole(conv, lambda c: render(c, llama3, llama), _units(conv))


# --- parse-back ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("calls", ["split", DROP_TEXT])
def test_parse_back_equals_rendered_conversation(name, calls, llama, llama3):
    conv = load(name)
    rendered = render(conv, llama3, llama, options=RenderOptions(calls=calls))
    parsed = check_roundtrip(conv, rendered, llama3, llama)
    assert parse_back(rendered.text, "llama3") == parsed
    originals = [(c.name, call_arguments(c)) for m in conv.messages for c in m.blocks if isinstance(c, ToolCall)]
    assert [(c.name, c.arguments) for m in parsed.messages for c in m.blocks if isinstance(c, ToolCall)] == originals


def test_parse_back_catches_a_changed_stream(llama, llama3):
    conv = load("weather_parallel")
    rendered = render(conv, llama3, llama)

    def check(text: str) -> None:
        with pytest.raises(RenderError, match="parse-back differs"):
            check_roundtrip(conv, structs.replace(rendered, input_ids=llama.encode(text)), llama3, llama)

    check(rendered.text.replace('"Tokyo"', '"Kyoto"'))
    # a call flattened into text (the failure this project exists to prevent)
    check(rendered.text.replace('{"name": "get_time", "parameters": ', 'Calling get_time with '))
    # the text beside the calls dropped, as the official template does, without a ledger entry
    check(rendered.text.replace("Let me look both up.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", ""))
    # a result swapped with another call's
    first, second = '"{\\"temp\\": 18, \\"condition\\": \\"light rain\\"}"', '"2024-05-20T22:14:00+09:00"'
    check(rendered.text.replace(first, "\0").replace(second, first).replace("\0", second))
    # dropping a block without a ledger entry is caught too
    lossy = load("lossy")
    with pytest.raises(RenderError, match="parse-back differs"):
        check_roundtrip(lossy, structs.replace(render(lossy, llama3, llama), ledger=()), llama3, llama)


def test_parse_back_generation_prompt_and_errors(llama, llama3):
    conv = Conversation(system=(Text("S"),), messages=(Message(role="user", blocks=(Text("hi"),)),))
    text = render(conv, llama3, llama, options=RenderOptions(add_generation_prompt=True)).text
    assert text.endswith("hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    back = parse_back(text, "llama3")
    assert back.system == (Text("S"),) and [m.role for m in back.messages] == ["user"]
    with pytest.raises(RenderError, match="must end with one"):
        parse_back(text[:-len("<|start_header_id|>assistant<|end_header_id|>\n\n")] + "<|start_header_id|>user"
                   "<|end_header_id|>\n\nhi", "llama3")
    with pytest.raises(RenderError, match="not a Llama 3 stream"):
        parse_back("<|im_start|>user\nhi<|im_end|>\n", "llama3")
    with pytest.raises(RenderError, match="dated preamble"):
        parse_back("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "llama3")
    with pytest.raises(RenderError, match="not JSON"):
        parse_back(text.replace("<|start_header_id|>assistant<|end_header_id|>\n\n", "")
                   + "<|start_header_id|>ipython<|end_header_id|>\n\nplain<|eot_id|>", "llama3")


# --- the corpus ---------------------------------------------------------------------------------------

def openai_reference(messages: list[dict], split: bool) -> list[dict]:
    """Raw OpenAI Chat messages as a transformers user passes them (arguments parsed to objects); with
    `split`, an assistant turn with text and calls or several calls cut by hand: the text, then each
    call followed by the tool messages answering it (the last call's by the rest, in their order)."""
    out: list[dict] = []
    i = 0
    while i < len(messages):
        message = dict(messages[i])
        i += 1
        calls = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"] or "{}")}}
                 for c in message.get("tool_calls") or ()]
        if not calls:
            message.pop("tool_calls", None)
            out.append(message)
            continue
        content = message.get("content") or ""
        if not split or (len(calls) == 1 and not content.strip()):
            out.append({**message, "tool_calls": calls})
            continue
        end = next((k for k in range(i, len(messages)) if messages[k]["role"] == "assistant"), len(messages))
        zone = messages[i:end]
        if content.strip():
            out.append({"role": "assistant", "content": content})
        for n, call in enumerate(calls):
            out.append({"role": "assistant", "content": "", "tool_calls": [call]})
            if n < len(calls) - 1:
                out += [m for m in zone if m.get("tool_call_id") == call.get("id")]
                zone = [m for m in zone if m.get("tool_call_id") != call.get("id")]
        out += zone
        i = end
    return out


def official_supports(messages: list[dict], tools) -> bool:
    """Inside what the official template renders without losing or mislabelling anything, once
    text beside calls is split: string contents, known roles, one leading system message at most, a
    user message first when there are tools."""
    roles = [m.get("role") for m in messages]
    leading_system = next((i for i, r in enumerate(roles) if r != "system"), len(roles))
    first = roles[leading_system] if leading_system < len(roles) else None
    return (all(r in ("system", "user", "assistant", "tool") for r in roles) and leading_system <= 1
            and all(isinstance(m.get("content"), str) or (m.get("content") is None and m.get("tool_calls"))
                    for m in messages)
            and all(t.get("type") == "function" for t in tools or ()) and (not tools or first == "user"))


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()))
def test_corpus_tau_bench_matches_official_and_parses_back(traj, llama, llama_hf, llama3, official_llama):
    conv = parse(traj, "openai-chat")
    assert official_supports(traj, None)
    ours = render(conv, llama3, llama)
    text, ids = transformers_render(llama_hf, official_llama, openai_reference(traj, split=True), None)
    assert_same(text, ids, ours.text, ours.input_ids)
    check_roundtrip(conv, ours, llama3, llama)
    # drop-text is byte for byte the official template on the raw messages (it drops text beside calls)
    dropped = render(conv, llama3, llama, options=RenderOptions(calls=DROP_TEXT))
    text, ids = transformers_render(llama_hf, official_llama, openai_reference(traj, split=False), None)
    assert_same(text, ids, dropped.text, dropped.input_ids)
    check_roundtrip(conv, dropped, llama3, llama)


@pytest.mark.parametrize("body", params(request_bodies()))
def test_corpus_request_bodies_render_and_parse_back(body, llama, llama_hf, llama3, official_llama):
    conv = parse_chat(body)
    ours = render(conv, llama3, llama)
    check_roundtrip(conv, ours, llama3, llama)
    if conv.meta.provider != "openai-chat":
        return
    messages, tools = body["messages"], corpus_tools(body.get("tools"))
    if official_supports(messages, tools):
        text, ids = transformers_render(llama_hf, official_llama, openai_reference(messages, split=True), tools)
        assert_same(text, ids, ours.text, ours.input_ids)
