"""The OpenAI Chat parser's shortcuts read exactly what its general path reads: the usual message
(plain user text, an assistant turn of content and tool calls) skips the optional fields, call ids come
from a digest remembered by (name, arguments text), item paths are reused. Checked on the corpus, the
fixtures and mutated records (every field set to every JSON type, removed, or added), errors included."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from corpus import request_bodies, response_bodies, tau_bench_trajectories
from pipeline import ids
from pipeline.errors import SftprepError
from pipeline.formats import openai_chat as oc
from pipeline.formats.openai_chat import blocks, messages
from pipeline.ids import CallIds

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "openai_chat"


def outcome(record):
    """The parse as bytes (every field of the conversation) or the error with its path."""
    try:
        return msgspec.json.encode(oc.parse(record))
    except SftprepError as exc:
        return (exc.code, exc.message, exc.path)


def general_outcome(record, monkeypatch):
    """The same parse with the shortcuts off: no message counts as usual, every digest is computed."""
    with monkeypatch.context() as patch:
        patch.setattr(messages, "_PLAIN_KEYS", frozenset())
        patch.setattr(messages, "_USUAL_ASSISTANT_KEYS", frozenset())
        patch.setattr(ids, "_TEXT_DIGESTS_LONGEST", -1)
        return outcome(record)


def chat_records() -> list:
    found = [body for _, body in request_bodies() + response_bodies() if oc.detect(body) is not None]
    found += [{"messages": traj} for _, traj in tau_bench_trajectories()[:20]]
    for path in sorted(FIXTURES.glob("*.json")):
        data = json.loads(path.read_text())
        found += [r for r in (data if isinstance(data, list) else [data]) if isinstance(r, dict)]
    return found


RECORDS = chat_records()
JSON_VALUES = st.sampled_from([None, 0, 1.5, True, "", "x", [], {}, [1], {"a": 1}, "assistant", "tool", "function",
                               "text", [{"type": "text", "text": "t"}]])
KEYS = st.sampled_from(["role", "content", "name", "weight", "tool_calls", "function_call", "refusal", "audio",
                        "reasoning", "reasoning_content", "tool_call_id", "id", "type", "function", "arguments",
                        "description", "parameters", "custom", "extra"])


def containers(value, out):
    if isinstance(value, (dict, list)):
        out.append(value)
        for child in (value.values() if isinstance(value, dict) else value):
            containers(child, out)
    return out


@st.composite
def mutants(draw):
    record = copy.deepcopy(draw(st.sampled_from(RECORDS)))
    for _ in range(draw(st.integers(1, 3))):
        spots = containers(record, [])
        spot = spots[draw(st.integers(0, len(spots) - 1))]
        if isinstance(spot, dict):
            key = draw(st.sampled_from(sorted(spot)) | KEYS) if spot else draw(KEYS)
            if draw(st.booleans()) and key in spot:
                del spot[key]
            else:
                spot[key] = copy.deepcopy(draw(JSON_VALUES))  # never the shared sample itself
        elif spot:
            spot[draw(st.integers(0, len(spot) - 1))] = copy.deepcopy(draw(JSON_VALUES))
    return record


def test_there_are_records_to_compare():
    assert len(RECORDS) > 20


def test_corpus_and_fixtures_read_the_same_through_the_shortcuts(monkeypatch):
    for record in RECORDS:
        assert outcome(record) == general_outcome(record, monkeypatch)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutants())
def test_mutated_records_read_the_same_through_the_shortcuts(monkeypatch, record):
    assert outcome(record) == general_outcome(record, monkeypatch)


ARGUMENTS = st.one_of(
    st.text(max_size=30),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                 max_leaves=8).map(json.dumps),
    st.just('{"a": 123456789012345678901234567890}'), st.just('{"b": 1, "a": 2}'), st.just('{"a": 2, "b": 1}'),
    st.just('{"x": "' + "y" * 2000 + '"}'), st.just("[" * 200 + "]" * 200), st.just('"\\ud800"'),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["get", "set", "\ud800"]), ARGUMENTS), max_size=6), st.booleans())
def test_ids_from_arguments_text_equal_ids_from_the_parsed_arguments(calls, warm):
    if not warm:
        ids._TEXT_DIGESTS.clear()
    remembered, computed = CallIds(), CallIds()
    for name, raw in calls:
        arguments, _ = blocks.loads(raw)
        assert remembered.from_text(name, raw, arguments) == computed.new(name, arguments, raw_arguments=raw)


def test_the_remembered_digests_stay_bounded():
    ids._TEXT_DIGESTS.clear()
    for i in range(ids._TEXT_DIGESTS_MAX + 10):
        CallIds().from_text("f", json.dumps({"i": i}), {"i": i})
    assert len(ids._TEXT_DIGESTS) <= ids._TEXT_DIGESTS_MAX


@pytest.mark.parametrize("base", ["$.messages", "$", "$.tools"])
@pytest.mark.parametrize("count", [0, 3, 64, 65, 5000])
def test_item_paths_name_each_item(base, count):
    for _ in range(2):  # built, then reused
        paths = blocks.item_paths(base, count)
        assert [paths[i] for i in range(count)] == [f"{base}[{i}]" for i in range(count)]


def test_unparsed_arguments_keep_their_text_and_their_id(monkeypatch):
    record = {"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]}
    call = oc.parse(record).messages[0].blocks[0]
    assert call.arguments is UNSET and call.raw_arguments == "{not json" and call.arguments_valid is False
    assert outcome(record) == general_outcome(record, monkeypatch)
