"""The renderer's fast paths give what the straightforward code gives: buffers equal to the token lists,
sentinels found as the regex finds them, cached tool definitions and JSON texts equal to fresh ones, a
segment cache bounded in tokens that still returns the whole text's ids."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from render_support import fixture_names, load_fixture

from corpus import params, tau_bench_trajectories
from pipeline.conversation import Conversation, Message, Text, Tool, ToolCall
from pipeline.errors import RenderError
from pipeline.formats import parse
from pipeline.render import Template, load_tokenizer, render
from pipeline.render.engine import render_buffers
from pipeline.render.marks import MARK_RE, _sentinels, mark_index
from pipeline.render.segments import SegmentEncoder


def _int32(ids: list[int]) -> bytes:
    return struct.pack(f"<{len(ids)}i", *ids)


def _check_buffers(conv: Conversation, template, tokenizer) -> None:
    rendered, ids, mask = render_buffers(conv, template, tokenizer)
    assert ids == _int32(rendered.input_ids)
    assert mask == bytes(rendered.loss_mask)
    assert rendered == render(conv, template, tokenizer)
    assert rendered.input_ids == tokenizer.encode(rendered.text)


@pytest.mark.parametrize("name", fixture_names())
def test_buffers_equal_the_token_lists_on_fixtures(name, qwen, chatml):
    _check_buffers(load_fixture(name), chatml, qwen)


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()[:20]))
def test_buffers_equal_the_token_lists_on_the_corpus(traj, qwen, chatml):
    _check_buffers(parse(traj, "openai-chat"), chatml, qwen)


# --- sentinels ---------------------------------------------------------------------------------------

def _sentinels_by_regex(raw: str) -> tuple[str, list[tuple[int, int]]]:
    """The straightforward way: every MARK_RE match, its index, its position once earlier ones are gone."""
    found = [(mark_index(m.group()), m.start() - k) for k, m in enumerate(MARK_RE.finditer(raw))]
    return MARK_RE.sub("", raw), found


_chars = st.one_of(
    st.characters(),  # anything, surrogates included
    st.sampled_from(["\U000F0000", "\U000F0001", "\U000F0002", "\U000FFFFD", "\U00100000", "\U0010FFFD",
                     "\U000FFFFE", "\U000FFFFF", "\U0010FFFE", "\U0010FFFF",  # noncharacters: not sentinels
                     "\U000EFFFF", "\U0001F600", "\ud800", "\udfff", "é", "\n"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(_chars, max_size=60).map("".join))
def test_sentinels_found_as_the_regex_finds_them(raw):
    text, found = _sentinels(raw)
    assert (text, list(found)) == _sentinels_by_regex(raw)


# --- tool definitions and their JSON ----------------------------------------------------------------

def _conv(*tools: Tool) -> Conversation:
    return Conversation(tools=tools, messages=(Message(role="user", blocks=(Text("hi"),)),
                                               Message(role="assistant", blocks=(Text("ok"),))))


def test_cached_tool_definitions_keep_int_and_float_apart(qwen, chatml):
    # Equal as Python values (1 == 1.0), different as JSON: the cache must not serve one for the other.
    as_int = Tool(name="f", parameters={"type": "object", "properties": {"n": {"type": "integer", "default": 1}}})
    as_float = Tool(name="f", parameters={"type": "object", "properties": {"n": {"type": "integer", "default": 1.0}}})
    for _ in range(2):  # the second round is served from the cache
        assert '"default": 1}' in render(_conv(as_int), chatml, qwen).text
        assert '"default": 1.0}' in render(_conv(as_float), chatml, qwen).text


def test_private_use_characters_in_a_tool_are_refused_every_time(qwen, chatml):
    bad = Tool(name="f", description="see \U000F0003 here", parameters={"type": "object"})
    for _ in range(2):
        with pytest.raises(RenderError, match="private-use") as caught:
            render(_conv(bad), chatml, qwen)
        assert caught.value.path == "$.tools[0]"


def test_tojson_with_arguments_of_its_own_matches_transformers(qwen, qwen_hf):
    """A template dumping marked values with its own arguments (indent, sort_keys) gets json.dumps' output
    for them, not the cached default dump: same text as transformers renders."""
    source = ("{% for t in tools %}{{ t | tojson(indent=2) }}\n{% endfor %}"
              "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}"
              "{% generation %}{% for c in m.tool_calls %}{{ c.function.name }} {{ c.function.arguments | tojson(sort_keys=True) }}"
              "{% endfor %}<|im_end|>{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}")
    tool = Tool(name="lookup", description="Find ü", parameters={"type": "object", "properties": {"b": {}, "a": {}}})
    conv = Conversation(tools=(tool,), messages=(
        Message(role="user", blocks=(Text("find"),)),
        Message(role="assistant", blocks=(ToolCall(id="c1", name="lookup", arguments={"b": 1, "a": "é"}),))))
    ours = render(conv, Template.compile("indent", source), qwen)
    messages = [{"role": "user", "content": "find"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "lookup", "arguments": {"b": 1, "a": "é"}}}]}]
    tools = [{"type": "function", "function": {"name": "lookup", "description": "Find ü",
                                                "parameters": {"type": "object", "properties": {"b": {}, "a": {}}}}}]
    expected = qwen_hf.apply_chat_template(messages, tools=tools, chat_template=source, tokenize=False)
    assert ours.text == expected
    assert '{"a": "é", "b": 1}' in ours.text and json.dumps(tools[0], indent=2, ensure_ascii=False) in ours.text


# --- the segment cache --------------------------------------------------------------------------------

def test_segment_cache_is_bounded_in_tokens_and_keeps_ids_exact():
    qwen = load_tokenizer("qwen2.5")
    encoder = SegmentEncoder(qwen, cache_tokens=200)
    system = "<|im_start|>system\nA system prompt that repeats, as agent logs repeat them.<|im_end|>\n"
    for k in range(60):
        text = system + f"<|im_start|>user\nquestion {k}: " + "word " * (k % 7) + "<|im_end|>\n"
        segmented = encoder.encode(text)
        assert segmented.ids == qwen.backend.encode(text, add_special_tokens=False).ids
        assert segmented.buffer == _int32(segmented.ids)
        assert encoder.stats()["tokens"] <= 200
    stats = encoder.stats()
    assert stats["hits"] >= 59 and stats["entries"] < 60  # the prompt stayed; old questions were evicted
    big = "x" * 3000  # a piece larger than the whole budget is encoded, not cached
    assert encoder.encode(big).ids == qwen.backend.encode(big, add_special_tokens=False).ids
    assert big not in encoder._cache and encoder.stats()["tokens"] <= 200


def test_segment_cache_limit_evicts_and_zero_turns_it_off():
    qwen = load_tokenizer("qwen2.5")
    encoder = SegmentEncoder(qwen)
    texts = [f"<|im_start|>user\nquestion {k}<|im_end|>\n" for k in range(20)]
    for text in texts:
        encoder.encode(text)
    assert encoder.stats()["entries"] == 21  # the 20 questions and the newline after <|im_end|>
    encoder.limit(12)
    assert 0 < encoder.stats()["tokens"] <= 12
    encoder.limit(0)
    for text in texts:
        assert encoder.encode(text).ids == qwen.backend.encode(text, add_special_tokens=False).ids
    assert encoder.stats()["entries"] == 0


def test_added_token_buffers_sit_between_cached_pieces(qwen):
    text = "<|im_start|>user\n<tool_call>\n{}\n</tool_call><|im_end|>"
    segmented = SegmentEncoder(qwen).encode(text)
    assert segmented.buffer == _int32(qwen.backend.encode(text, add_special_tokens=False).ids)



_texts = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(["<|im_start|>", "<|im_end|>", "<tool_call>", "\n",
                                                                  "é\u0301", "e\u0301", "日本", "\U0001F600", "  \n"])),
                  max_size=10).map("".join)


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_indexed_lookups_equal_the_per_position_ones(text):
    """Positions answered in bulk (`Segmented.index`) agree with the per-position bisects, at every
    character position of texts with special tokens, combining marks and multi-byte characters."""
    qwen = load_tokenizer("qwen2.5")
    encoder = SegmentEncoder(qwen)
    plain = encoder.encode(text)
    indexed = encoder.encode(text)
    positions = range(-1, len(text) + 2)
    indexed.index(positions)
    assert len(indexed.starting) == len(positions) or not text
    for pos in positions:
        assert indexed.first_token_starting_at(pos) == plain._replace(starting=None).first_token_starting_at(pos)
        assert indexed.first_token_ending_after(pos) == plain._replace(ending=None).first_token_ending_after(pos)


@pytest.mark.parametrize("name", ["qwen2.5", "llama3", "gpt-oss"])
def test_segmentable_reads_the_same_config_as_tokenizer_json(name):
    """`segmentable` reads the components instead of serializing the whole tokenizer: same facts."""
    tok = load_tokenizer(name)
    full = json.loads(tok.backend.to_str())
    parts = tok._pipeline_config()
    assert parts["normalizer"] == full["normalizer"] and parts["pre_tokenizer"] == full["pre_tokenizer"]
    keys = ("lstrip", "rstrip", "single_word", "normalized")
    assert parts["added_tokens"] == [{k: t[k] for k in keys} for t in full["added_tokens"]]


# --- attribute lookup in the built-in templates' environment --------------------------------------------

_LOOKUPS = ["{{ m.role }}", "{{ m.missing is defined }}", "{{ m.items() | list | length }}", "{{ m.get('role') }}",
            "{{ m.content.text }}", "{{ m.keys | string | truncate(14, true, '') }}", "{{ (m.n or 0) + 1 }}"]


# Names the inline item read applies to (loop and set variables) and ones it leaves to getattr.
_LOCAL_LOOKUPS = ["{% for x in [m] %}{{ x.role }}|{{ x.missing is defined }}|{{ x.items | string | truncate(9) }}"
                  "{% endfor %}", "{% set y = m %}{{ y.role }}{{ y.content }}",
                  "{% for x in [m, m] %}{{ loop.first }}{{ x.n }}{{ loop.previtem.role }}{% endfor %}"]


class _Sub(dict):
    pass


@pytest.mark.parametrize("source", _LOOKUPS + _LOCAL_LOOKUPS)
@pytest.mark.parametrize("value", [{"role": "user", "content": {"text": "hi"}, "n": 2},
                                   {"role": "tool", "items": "a key named like a dict method", "keys": 1}, {},
                                   {"role": "user", "content": "hi", "n": 2}, _Sub(role="sub", items="an item"),
                                   {"items": 1, "keys": 2}, "a string", [1, 2]])
def test_trusted_environment_looks_up_as_jinja_does(source, value):
    import jinja2

    from pipeline.render.templates import _TRUSTED_ENV

    def outcome(env) -> tuple[str, str]:
        try:
            return "ok", env.from_string(source).render(m=value)
        except jinja2.TemplateError as exc:
            return type(exc).__name__, str(exc)

    assert outcome(_TRUSTED_ENV) == outcome(jinja2.Environment())
