"""The validation stage's shortcuts agree with the work they skip: the flattened-call detector run with
its per-family triggers against every detector run on every text, code regions found with and without
the fence pre-check, on the corpus and on drawn texts built from the syntaxes' own pieces; and the
per-conversation index found in one pass against each index found on its own."""

from __future__ import annotations

import re
import sys

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.conversation import Conversation, Reasoning, ToolCall, ToolResult

from pipeline.validate._flattened_base import Finding, _CodeRegions, _fences
from pipeline.validate._flattened_json import _json_objects
from pipeline.validate._flattened_tags import (_MARKER_LEAD, _chatml, _function_tags, _harmony, _markers, _python_tag,
                                               _react, _special_tokens, _tool_code, _xml_invoke)
from pipeline.validate.flattened import find_flattened
from pipeline.validate import validate
from pipeline.validate.rules import _BLOCK_TYPES, Context, block_kind

from test_flattened import POSITIVES, TOOLS, corpus_texts
from test_validator import damaged


def every_detector(text: str, tools) -> list[Finding]:
    """The detector without any pre-check: every family's scan over every text."""
    code = _CodeRegions(text)
    found: list[Finding] = []
    found.extend(_chatml(text, tools, code))
    found.extend(_function_tags(text, tools, code, found))
    found.extend(_python_tag(text, tools, code))
    found.extend(_harmony(text, tools, code))
    found.extend(_react(text, tools, code))
    found.extend(_markers(text, tools, code))
    found.extend(_xml_invoke(text, tools, code))
    found.extend(_special_tokens(text, tools, code, found))
    found.extend(_tool_code(text, tools, code))
    found.extend(_json_objects(text, tools, code, found))
    found.sort(key=lambda f: (f.start, f.end))
    return found


# The syntaxes' pieces, their near misses, code fences and prose: drawn texts reach every family.
_PIECES = st.sampled_from([
    "<tool_call>", "</tool_call>", "{", "}", "[", "]", '"name": ', '"name"', '"function":', '"action": ', '"tool":',
    '"tool_input": ', '"action_input": ', '"arguments": ', '"parameters": ', '"get_weather"', '"x"', '{"city": "Oslo"}',
    "```", "```json\n", "~~~", "~~", "``", "`", "\n", "\n\n", "Action: ", "Action Input: ", "Action:",
    "Thought: ",
    "to=functions.x", "to=functions.get_weather", "<|message|>", "<|call|>", "<|start|>", "<|constrain|>json",
    "<|python_tag|>", "<function=f>", "<function=get_weather>", "</function>", '<invoke name="x">', "</invoke>",
    "<parameter", "<function_calls>", "[TOOL_CALLS]", "<|tool_call|>", "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<start_function_call>", "<|tool_cal",
    "default_api.f(", "print(default_api.get_weather(", "[Calling tool: f(", "[tool: x", "[Called get_weather with ",
    ")]", "(", ")", " ", "\t", ". ", "prose ", "[session 000149]", "Let me check.", ":", ",", "null", "1",
    '"type": "function"', '"id": "c1"',
    # Whole calls of each shape, one with its key written as a JSON escape (no call key in the text).
    '{"name": "get_weather", "arguments": {"city": "Oslo"}}', '{"action": "get_weather", "action_input": {"q": 1}}',
    '{"tool": "x", "tool_input": {}}', '{"function": {"name": "f", "arguments": "{}"}}',
    '{"functionCall": {"name": "f", "args": {}}}', '{"na\\u006de": "get_weather", "arguments": {}}',
    '[{"id": "c1", "type": "function", "function": {"name": "x", "arguments": {}}}]',
    # Markers in any case, after blanks, and with the Turkish i's that re.I takes for "i".
    "[Tool: x]", "[FUNCTION: f(1)]", "[ \tinvoked tool: x]", "[\u0131nvoked get_weather with (1)]", "[ran tool: x()]",
    "[Using function -> f{}]", "[Executed TOOL_call: x]", "[\u0130NVOKED get_weather with {1}]", "[funct\u0131on: x]",
])
_TEXTS = st.lists(_PIECES | st.text(max_size=4), max_size=40).map("".join)
_TOOL_SETS = st.sets(st.sampled_from(["x", "f", "get_weather", "search_flights"]))


@settings(max_examples=3000, deadline=None)
@given(_TEXTS, _TOOL_SETS)
def test_triggered_detectors_find_what_every_detector_finds(text, tools):
    assert find_flattened(text, tools) == every_detector(text, tools)
    # As the whole text, and after prose on its own line: the JSON detector's three ways in.
    for variant in (text.strip(), "Sure.\n" + text, text + "\n"):
        assert find_flattened(variant, tools) == every_detector(variant, tools)


@settings(max_examples=1000, deadline=None)
@given(_TEXTS)
def test_code_regions_without_a_fence_mark_have_no_fences(text):
    assert _CodeRegions(text).fences == _fences(text)


def test_marker_lead_takes_every_character_the_markers_first_letters_match():
    """The markers match case-insensitively (re.I, full Unicode): every character that matches the first
    letter of a verb, "tool" or "function" must pass the pre-check's character class."""
    first_letters = re.compile("[ciuretf]", re.I)
    missed = [hex(cp) for cp in range(sys.maxunicode + 1)
              if first_letters.fullmatch(chr(cp)) and not _MARKER_LEAD.match("[ \t" + chr(cp))]
    assert missed == []


# Calls each reached by one way in only: no call key in the text (the key is a JSON escape), so only
# the whole text being one value or one fenced block lets the JSON detector in.
_ESCAPED = '{"na\\u006de": "get_weather", "arguments": {"city": "Oslo"}}'
ONE_WAY_IN = [_ESCAPED, f"  {_ESCAPED}\n", f"```json\n{_ESCAPED}\n```", f"~~~\n{_ESCAPED}\n~~~\n",
              f"[{_ESCAPED}]", f"<|tool_call|>{_ESCAPED}", f"<start_function_call>{_ESCAPED}"]


def test_positives_and_their_spans_are_kept():
    for family, text, _, _ in POSITIVES:
        got = find_flattened(text, TOOLS)
        assert got == every_detector(text, TOOLS) and any(f.family == family for f in got)
    for text in ONE_WAY_IN:
        assert find_flattened(text, TOOLS) == every_detector(text, TOOLS) != []


@pytest.mark.slow
def test_corpus_texts_find_the_same_with_and_without_triggers(corpus):
    texts = 0
    for _, tools, text in corpus_texts():
        for names in (tools, set(), TOOLS):
            assert find_flattened(text, names) == every_detector(text, names)
        assert _CodeRegions(text).fences == _fences(text)
        texts += 1
    assert texts > 1000


# --- the per-conversation index ---------------------------------------------------------------------------

def _naive_index(conv: Conversation) -> dict:
    """What `Context` finds in its one pass, each found on its own by its definition."""
    messages = conv.messages
    n = len(messages)
    turn_end = []
    for mi in range(n):
        end = mi + 1
        while end < n and messages[end].role == messages[mi].role:
            end += 1
        turn_end.append(end)
    return {
        "assistant": [mi for mi, m in enumerate(messages) if m.role == "assistant"],
        "reasoning": [(mi, bi, b) for mi, m in enumerate(messages) for bi, b in enumerate(m.blocks)
                      if isinstance(b, Reasoning)],
        "call_list": [((mi, bi), b) for mi, m in enumerate(messages) for bi, b in enumerate(m.blocks)
                      if isinstance(b, ToolCall)],
        "results": [((mi, bi), b) for mi, m in enumerate(messages) for bi, b in enumerate(m.blocks)
                    if isinstance(b, ToolResult)],
        "turn_end": turn_end,
        "next_assistant": [next((k for k in range(mi + 1, n) if messages[k].role == "assistant"), n) for mi in range(n)],
    }


def _index(ctx: Context) -> dict:
    return {key: getattr(ctx, key) for key in ("assistant", "reasoning", "call_list", "results", "turn_end",
                                               "next_assistant")}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_context_index_is_each_index_by_its_definition(conv):
    assert _index(Context(conv)) == _naive_index(conv)


@pytest.mark.slow
def test_context_index_on_the_corpus(corpus):
    from pipeline.ingest import expand_paths, iter_parsed
    convs = [item.conversation for item in iter_parsed(expand_paths([str(corpus)])) if item.conversation is not None]
    assert len(convs) > 500
    for conv in convs:
        assert _index(Context(conv)) == _naive_index(conv)


# Subclasses of the block classes: a block's class is read from its exact type, with isinstance as the
# fallback, so a subclass must be taken for its base everywhere.
_SUBCLASSES = {base: type(f"Sub{base.__name__}", (base,), {}) for base in _BLOCK_TYPES}


def _as_subclasses(conv: Conversation) -> Conversation:
    def sub(block):
        return _SUBCLASSES[type(block)](**msgspec.structs.asdict(block))
    return msgspec.structs.replace(conv, messages=tuple(msgspec.structs.replace(m, blocks=tuple(map(sub, m.blocks)))
                                                        for m in conv.messages))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_blocks_of_subclasses_are_indexed_and_validated_as_their_bases(conv):
    subbed = _as_subclasses(conv)
    assert all(type(b) in _SUBCLASSES.values() for m in subbed.messages for b in m.blocks)
    assert _index(Context(subbed)) == _naive_index(subbed)
    assert validate(subbed) == validate(conv)
    assert [block_kind(b) for m in subbed.messages for b in m.blocks] == [type(b) for m in conv.messages
                                                                         for b in m.blocks]
