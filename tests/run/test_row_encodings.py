"""The digest and the conversation column share one encoding of each conversation's header (system,
developer, tools), the sorted form looked up by the plain one: both equal encoding the whole conversation
directly, on the corpus and on generated conversations whose objects hold their keys in any order."""

from __future__ import annotations

import hashlib

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from corpus import require_corpus
from pipeline.conversation import Conversation, Message, Meta, Text, Tool, ToolCall
from pipeline.ingest import expand_paths, iter_parsed
from pipeline.run import fold
from pipeline.run.item import content_digest, conversation_json

_SORTED = msgspec.json.Encoder(order="deterministic")
_PLAIN = msgspec.json.Encoder()


def _direct_digest(conv: Conversation) -> str:
    core = replace(conv, meta=Meta(), original=msgspec.UNSET)
    return hashlib.blake2b(_SORTED.encode(core), digest_size=16).hexdigest()


def _direct_json(conv: Conversation) -> bytes:
    return _PLAIN.encode(replace(conv, original=msgspec.UNSET))


def _direct_header(conv: Conversation) -> bytes:
    header = (tuple(fold._block(b) for b in conv.system), tuple(fold._block(b) for b in conv.developer),
              tuple(replace(t, extras={}, form={}) for t in conv.tools))
    return hashlib.blake2b(_SORTED.encode(header), digest_size=16).digest()


def _check(conv: Conversation) -> None:
    assert conversation_json(conv) == _direct_json(conv)
    assert content_digest(conv) == _direct_digest(conv)
    assert fold.chain(conv, 1)[0] == _direct_header(conv)


def test_corpus_encodings_equal_the_direct_ones():
    paths = expand_paths([require_corpus()])
    convs = [p.conversation for keep in (False, True) for p in iter_parsed(paths, keep_original=keep)
             if p.conversation is not None]
    assert len(convs) > 500
    for conv in convs:
        _check(conv)
    for conv in reversed(convs):  # and in another order: each lookup meets other conversations' headers
        _check(conv)


_KEYS = st.text(max_size=6)
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
                     max_leaves=12)
_TOOLS = st.lists(st.builds(Tool, name=st.text(min_size=1, max_size=8),
                            parameters=st.dictionaries(_KEYS, _JSON, max_size=4),
                            extras=st.dictionaries(st.just("openai-chat"), st.dictionaries(_KEYS, _JSON, max_size=2),
                                                   max_size=1)), max_size=3)
# Instructions with and without what the session chain leaves out (a signature, provider extras).
_SYSTEM = st.lists(st.builds(Text, text=st.text(max_size=10), signature=st.none() | st.just("c2ln"),
                             extras=st.dictionaries(st.just("anthropic"), st.dictionaries(_KEYS, _JSON, max_size=2),
                                                    max_size=1)), max_size=2).map(tuple)
_MESSAGES = st.lists(st.builds(Message, role=st.sampled_from(["user", "assistant"]), blocks=st.lists(
    st.builds(Text, text=st.text(max_size=10)) | st.builds(
        ToolCall, id=st.just("call_1"), name=st.just("f"), arguments=st.dictionaries(_KEYS, _JSON, max_size=4)),
    max_size=2).map(tuple)), max_size=3).map(tuple)


@settings(deadline=None)
@given(st.lists(st.tuples(_SYSTEM, _SYSTEM, _TOOLS.map(tuple), _MESSAGES), min_size=1, max_size=4), st.data())
def test_generated_encodings_equal_the_direct_ones(headers, data):
    convs = [Conversation(messages=messages, system=system, developer=developer, tools=tools,
                          meta=Meta(source="in.jsonl:1", provider="openai-chat"))
             for system, developer, tools, messages in headers]
    # Conversations sharing header objects (a trimmed prefix, a window), and equal headers built anew.
    convs += [replace(c, messages=c.messages[:1]) for c in convs]
    convs += [msgspec.json.decode(_PLAIN.encode(c), type=Conversation) for c in convs]
    for conv in data.draw(st.permutations(convs)):
        _check(conv)
