"""The segment encoder's shortcuts give what the plain paths give: the piece texts the split keeps equal
the slices `encode` would take, lookups read from the index equal the per-position bisects, the LRU
ends in the order of one lookup and refresh per piece (and one eviction per batch of misses evicts what
one per stored piece would), the fast engine's ids taken from shared int objects are HF's ids, and spans
built from bulk lookups equal those of an unindexed encoding."""

from __future__ import annotations

import importlib
import re
from collections import OrderedDict

import numpy as np

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render_support import fixture_names, load_fixture

from corpus import params, require_corpus, tau_bench_trajectories
from pipeline.formats import parse
from pipeline.render import load_template, load_tokenizer, render
from pipeline.render.engine import render_marked
from pipeline.render.fast_tokenizer import FastEncoder, TokenizerDisagreement, byte_lengths, hf_encode
from pipeline.render.segments import SegmentEncoder
from pipeline.render.spans import _spans

_SPECIALS = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<|endoftext|>"]
_texts = st.lists(st.one_of(st.text(max_size=24), st.sampled_from(_SPECIALS),
                            st.sampled_from(["\n", "  \n", "é\u0301", "日本", "\U0001F600", "<|im_", "|>"])),
                  max_size=10).map("".join)
_SLOW = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])



def _split_model(text, added):
    """The split as a scan: leftmost match, longest token first; the text between matches kept."""
    pattern = re.compile("|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)))
    pieces, pos = [], 0
    for match in pattern.finditer(text):
        if match.start() > pos:
            pieces.append((pos, match.start(), None))
        pieces.append((match.start(), match.end(), added[match.group()]))
        pos = match.end()
    return pieces + [(pos, len(text), None)] if pos < len(text) else pieces

@settings(max_examples=300, **_SLOW)
@given(_texts)
def test_split_keeps_each_piece_text_and_encoding_with_it_is_the_same(text):
    qwen = load_tokenizer("qwen2.5")
    encoder = SegmentEncoder(qwen, cache_size=0)
    pieces, texts = encoder.split_texts(text)
    assert pieces == encoder.split(text) == _split_model(text, qwen.added_tokens)
    assert texts == [text[a:b] for a, b, token in pieces if token is None]
    assert "".join(text[a:b] for a, b, _ in pieces) == text
    assert all(b == c for (_, b, _), (c, _, _) in zip(pieces, pieces[1:]))
    assert encoder.encode(text, pieces, texts) == encoder.encode(text, pieces) == encoder.encode(text)
    assert encoder.encode(text).ids == qwen.backend.encode(text, add_special_tokens=False).ids


@settings(max_examples=150, **_SLOW)
@given(_texts)
def test_ranges_read_from_the_index_equal_the_per_position_ones(text):
    """`overlapping` and `inside` read the indexed tables; for every pair of positions (inside, at and
    past the ends) they answer as without an index."""
    encoder = SegmentEncoder(load_tokenizer("qwen2.5"))
    indexed = encoder.encode(text)
    positions = range(-1, len(text) + 2)
    indexed.index([p for p in positions if p % 3])  # some positions indexed, the others computed
    plain = indexed._replace(starting=None, ending=None)
    for a in positions:
        for b in positions:
            assert indexed.overlapping(a, b) == plain.overlapping(a, b)
            assert indexed.inside(a, b) == plain.inside(a, b)


def _lru_model(texts_per_call, size, budget, tokens_of):
    """The cache as one lookup and refresh per piece in order, then the misses stored in first-seen order."""
    cache: OrderedDict[str, int] = OrderedDict()
    held = hits = misses = 0
    for texts in texts_per_call:
        missing: dict[str, None] = {}
        for piece in texts:
            if piece in cache:
                cache.move_to_end(piece)
                hits += 1
            else:
                missing[piece] = None
        misses += len(missing)
        for piece in missing:
            n = tokens_of(piece)
            if size and 0 < n <= budget and piece not in cache:
                cache[piece] = n
                held += n
                while len(cache) > size or held > budget:
                    held -= cache.popitem(last=False)[1]
    return list(cache), hits, misses


@settings(max_examples=200, **_SLOW)
@given(st.lists(st.lists(st.sampled_from(["a", "b b", "c c c", "d", "e e", "<|im_end|>", "f\n"]), max_size=8),
                max_size=12), st.integers(1, 4), st.integers(1, 8))
def test_cache_order_and_counts_equal_one_lookup_per_piece(calls, size, budget):
    qwen = load_tokenizer("qwen2.5")
    encoder = SegmentEncoder(qwen, cache_size=size, cache_tokens=budget)
    texts_per_call = []
    for words in calls:
        text = "<|im_end|>".join(words)
        encoder.encode(text)
        texts_per_call.append(encoder.split_texts(text)[1])
    order, hits, misses = _lru_model(texts_per_call, size, budget,
                                     lambda piece: len(qwen.backend.encode(piece, add_special_tokens=False).ids))
    assert list(encoder._cache) == order
    assert (encoder.hits, encoder.misses) == (hits, misses)



@pytest.mark.parametrize(("size", "budget"), [(3, 10**6), (40, 10**6), (4096, 900), (25, 2500), (0, 10**6)])
def test_cache_order_and_counts_equal_one_eviction_per_store_on_the_corpus(size, budget):
    """Rendered corpus conversations: each has more misses than the small caches hold, so one batch
    both fills and overflows them (by entries, by tokens or both)."""
    require_corpus()
    qwen = load_tokenizer("qwen2.5")
    template = load_template("chatml", qwen)
    texts = [render(parse(traj, "openai-chat"), template, qwen).text for _, traj in tau_bench_trajectories()[:10]]
    encoder = SegmentEncoder(qwen, cache_size=size, cache_tokens=budget)
    calls = []
    for text in texts + texts[::-1]:  # the second half hits what is left
        assert encoder.encode(text).ids == qwen.backend.encode(text, add_special_tokens=False).ids
        calls.append(encoder.split_texts(text)[1])
    order, hits, misses = _lru_model(calls, size, budget,
                                     lambda piece: len(qwen.backend.encode(piece, add_special_tokens=False).ids))
    assert list(encoder._cache) == order and (encoder.hits, encoder.misses) == (hits, misses)
    assert encoder._cached_tokens == sum(len(value[0]) for value in encoder._cache.values()) <= budget
    assert hits > 0 and misses > len(order) or size == 0


def test_fast_engine_ids_are_plain_ints_equal_to_hf_and_an_id_past_the_vocabulary_still_fails():
    require_corpus()
    qwen = load_tokenizer("qwen2.5")
    encoder = SegmentEncoder(qwen, cache_size=0)
    encoder.use_backend("fastokens", check_every=0)
    pieces = [piece for _, traj in tau_bench_trajectories()[:5]
              for piece in encoder.split_texts(render(parse(traj, "openai-chat"), load_template("chatml", qwen),
                                                      qwen).text)[1]]
    fast = encoder.fast.encode(pieces)
    assert fast == hf_encode(qwen.backend, pieces)
    assert all(type(token) is int for ids, _, _, _ in fast for token in ids)  # not numpy scalars

    class PastTheVocabulary:
        name = "past"

        def encode(self, texts):
            return np.array([qwen.backend.get_vocab_size(with_added_tokens=True)], dtype=np.uint32), np.array([0, 1])

    wrong = FastEncoder(PastTheVocabulary(), "qwen2.5", qwen.backend, byte_lengths(qwen.backend), "NFC", 0)
    with pytest.raises(TokenizerDisagreement):
        wrong.encode(["a"])
    assert wrong.encode.__func__ is FastEncoder.encode  # the real path, not a stand-in


def _spans_without_index(conv, template, tokenizer, monkeypatch):
    """Render, then build the spans again from an unindexed encoding of the same text."""
    captured = {}

    def capture(text, blocks, regions, seg):
        captured.update(text=text, blocks=blocks, regions=regions, seg=seg)
        return _spans(text, blocks, regions, seg)

    with monkeypatch.context() as patch:
        patch.setattr(importlib.import_module("pipeline.render.engine"), "_spans", capture)
        rendered = render_marked(conv, template, tokenizer)[0]
    seg = captured["seg"]._replace(starting=None, ending=None)
    return rendered, _spans(captured["text"], captured["blocks"], captured["regions"], seg)


def _check_spans(conv, template, tokenizer, monkeypatch):
    rendered, unindexed = _spans_without_index(conv, template, tokenizer, monkeypatch)
    assert list(rendered.spans) == unindexed
    spans = rendered.spans
    assert spans[0].char_start == 0 and spans[-1].char_end == len(rendered.text)
    assert spans[0].token_start == 0 and spans[-1].token_end == len(rendered.input_ids)
    for left, right in zip(spans, spans[1:]):
        assert left.char_end == right.char_start and left.token_end == right.token_start


@pytest.mark.parametrize("name", fixture_names())
def test_spans_from_bulk_lookups_equal_unindexed_ones_on_fixtures(name, monkeypatch):
    qwen = load_tokenizer("qwen2.5")
    _check_spans(load_fixture(name), load_template("chatml", qwen), qwen, monkeypatch)


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()[:12]))
def test_spans_from_bulk_lookups_equal_unindexed_ones_on_the_corpus(traj, monkeypatch):
    qwen = load_tokenizer("qwen2.5")
    _check_spans(parse(traj, "openai-chat"), load_template("chatml", qwen), qwen, monkeypatch)
