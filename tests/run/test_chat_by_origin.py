"""The messages export of a generic-conversion family (ChatML, user templates) reads which assistant
messages are trained from the inputs' origins instead of collecting each message's marks: for any set of
trained canonical messages, both give the same stripped messages and the same flags, on generated
conversations, on edge turns (empty, whitespace only, calls only, dropped calls) and on the corpus."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import export_runs
from pipeline import jsonpolicy
from pipeline.conversation import Conversation, Message, Text, ToolCall
from pipeline.errors import RenderError
from pipeline.ledger import Ledger
from pipeline.render.chatml import FAMILY as CHATML
from pipeline.render.marks import Marks
from pipeline.render.templates import CUSTOM
from pipeline.run.config import load_config
from pipeline.run.exports.chat import _by_marks, _by_origin
from pipeline.run.stages import Context
from strategies import conversations
from test_row_inputs_reuse import _conversations

# (family, whitespace outside the sentinels): ChatML as built in, the custom family as user templates run.
FAMILIES = [(CHATML, False), (CUSTOM, True)]


def _agree(conv: Conversation, family, edges_outside: bool, trained_messages: set[int]) -> bool:
    """False when the conversion refuses the conversation (no export to compare)."""
    marks = Marks(edges_outside=edges_outside)
    try:
        inputs = family.inputs(conv, marks, Ledger(family.name))
    except RenderError:
        return False
    assert family.build_inputs is None and len(inputs.origins) == len(inputs.messages)
    by_marks = _by_marks(inputs, marks, trained_messages)
    by_origin = _by_origin(inputs, marks, trained_messages)
    assert jsonpolicy.dumps(by_origin[0]) == jsonpolicy.dumps(by_marks[0])
    assert by_origin[1] == by_marks[1]
    return True


@settings(max_examples=150, deadline=None)
@given(conversations(), st.sampled_from(FAMILIES), st.sets(st.integers(0, 12), max_size=8))
def test_origins_give_the_flags_the_marks_give(conv, family_edges, trained_messages):
    family, edges_outside = family_edges
    _agree(conv, family, edges_outside, trained_messages)


_EDGE_TURNS = {
    "no blocks": Message(role="assistant"),
    "empty text": Message(role="assistant", blocks=(Text(""),)),
    "whitespace only": Message(role="assistant", blocks=(Text(" \n "),)),
    "call only": Message(role="assistant", blocks=(ToolCall(id="c1", name="lookup", arguments={"q": "x"}),)),
    "hosted call only": Message(role="assistant", blocks=(ToolCall(id="c2", name="web", kind="hosted"),)),
}


@pytest.mark.parametrize("turn", list(_EDGE_TURNS.values()), ids=list(_EDGE_TURNS))
@pytest.mark.parametrize("family, edges_outside", FAMILIES, ids=["chatml", "custom"])
def test_edge_turns(turn, family, edges_outside):
    conv = Conversation(messages=(Message(role="user", blocks=(Text("hi"),)), turn, turn,
                                  Message(role="user", blocks=(Text("again"),)), turn))
    for trained_messages in (set(), {1}, {2}, {4}, {0, 1, 2, 3, 4}):
        assert _agree(conv, family, edges_outside, trained_messages)


@pytest.mark.parametrize("family, edges_outside", FAMILIES, ids=["chatml", "custom"])
def test_on_the_samples_and_the_corpus(family, edges_outside):
    paths = export_runs.inputs(corpus=export_runs.corpus_available())
    config = load_config(export_runs.ROOT / "configs" / "default.toml",
                         {"input.paths": paths, "render.template": "chatml", "render.tokenizer": "qwen2.5",
                          "scrub.enabled": False})
    compared = 0
    for conv in _conversations(Context(config), paths):
        every = set(range(len(conv.messages)))
        compared += all([_agree(conv, family, edges_outside, trained) for trained in (every, set(range(1, len(every), 2)))])
    assert compared >= (100 if export_runs.corpus_available() else 5)
