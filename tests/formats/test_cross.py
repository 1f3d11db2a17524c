"""Conversion between every ordered pair of formats.

- Over the corpus: each converted body is one the target API accepts (strict checkers built on the
  official SDK types) and every divergence is in the ledger.
- Property: A -> B -> A keeps, exactly, all that B can carry.
"""

from __future__ import annotations

import importlib
import json
import itertools

import pytest
from hypothesis import HealthCheck, given, settings

from corpus import params, request_bodies, tau_bench_trajectories
from pipeline import formats
from pipeline.conversation import ToolCall, ToolResult, Text, iter_blocks
from pipeline.errors import SftprepError
from strategies import conversations

FORMATS = list(formats.FORMATS)
PAIRS = [(a, b) for a, b in itertools.product(FORMATS, FORMATS) if a != b]
CHECKERS = {name: importlib.import_module(f"formats.accept_{module.__name__.rsplit('.', 1)[1]}").check_request
            for name, module in formats.FORMATS.items()}


def _corpus_conversations():
    out = []
    for key, body in request_bodies():
        try:
            out.append((key, formats.parse(body)))
        except SftprepError:
            continue  # other endpoints (uploads, caches) and ambiguous bodies: covered by ingest tests
    for key, traj in tau_bench_trajectories()[:20]:
        out.append((key, formats.parse(traj, "openai-chat")))
    return out


CORPUS = _corpus_conversations()


@pytest.mark.parametrize("target", FORMATS)
@pytest.mark.parametrize("conv", params(CORPUS))
def test_corpus_converts_to_an_accepted_body(conv, target):
    if conv.meta.provider == target:
        pytest.skip("same format: covered by the codec's exact round trip")
    try:
        body, ledger = formats.serialize(conv, target)
    except SftprepError as exc:
        if not (conv.messages or conv.system or conv.developer):
            assert exc.code == "empty_conversation"
            return
        pytest.fail(f"conversion to {target} raised {exc!r}")
    problems = CHECKERS[target](body)
    assert not problems, f"{target} would refuse this body:\n" + "\n".join(problems)
    _assert_calls_survive(conv, formats.parse(body, target), ledger)


def _call_projection(conv):
    calls = [(b.name, b.arguments if b.arguments_valid else b.raw_arguments)
             for _, _, b in iter_blocks(conv) if isinstance(b, ToolCall)]
    names = {b.id: b.name for _, _, b in iter_blocks(conv) if isinstance(b, ToolCall)}
    results = [names.get(b.call_id) for _, _, b in iter_blocks(conv) if isinstance(b, ToolResult)]
    return calls, results


def _assert_calls_survive(before, after, ledger):
    """Every function call and the pairing of every result survive any conversion, unless dropped
    with a ledger entry."""
    dropped = [e for e in ledger if e.kind == "dropped"]
    calls_before, results_before = _call_projection(before)
    calls_after, results_after = _call_projection(after)
    if not dropped:
        assert calls_after == calls_before
        assert results_after == results_before
    else:
        assert len(calls_after) + sum("call" in e.reason for e in dropped) >= len(calls_before)


def _texts(conv, role):
    return [b.text for m in conv.messages if m.role == role for b in m.blocks if isinstance(b, Text) and b.text.strip()]


def _result_texts(conv):
    return [c.text for _, _, b in iter_blocks(conv) if isinstance(b, ToolResult)
            for c in b.content if isinstance(c, Text) and c.text.strip()]


@pytest.mark.parametrize("source,target", PAIRS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=conversations())
def test_a_b_a_keeps_what_b_carries(source, target, data):
    body_a, _ = formats.serialize(data, source)
    conv_a = formats.parse(body_a, source)
    body_b, ledger_b = formats.serialize(conv_a, target)
    assert not CHECKERS[target](body_b), CHECKERS[target](body_b)
    conv_b = formats.parse(body_b, target)
    body_a2, _ = formats.serialize(conv_b, source)
    if not ledger_b:
        assert body_a2 == body_a
    else:
        back = formats.parse(body_a2, source)
        _assert_calls_survive(conv_a, back, ledger_b)
        # Text is never lost: folded, moved or reordered text still appears.
        for before, after in ((_texts(conv_a, "user"), _texts(back, "user")),
                              (_texts(conv_a, "assistant"), _texts(back, "assistant")),
                              (_result_texts(conv_a), _result_texts(back))):
            joined = "\n".join(after)
            for text in before:
                # A result folded into a JSON object (Gemini's `response`) comes back as JSON text.
                assert text in joined or json.dumps(text, ensure_ascii=False)[1:-1] in joined


# --- where a log came from is no content to lose ----------------------------------------------------

SESSION_SAMPLES = ["claude_session.jsonl", "codex_rollout.jsonl", "gemini_cli_session.jsonl", "hf_sts_session.jsonl"]


@pytest.mark.parametrize("target", FORMATS)
def test_session_provenance_is_never_ledgered_as_a_dropped_field(target):
    # A session reader keeps its file's facts (session id, cwd, line numbers) under the source's name in
    # `extras`; no format writes them, and none may report them as a loss (--strict would refuse them all).
    from pathlib import Path

    from pipeline.ingest import expand_paths, iter_parsed

    data = Path(__file__).resolve().parents[2] / "data" / "sessions"
    parsed = [item for item in iter_parsed(expand_paths([str(data / name) for name in SESSION_SAMPLES]))
              if item.conversation is not None]
    sources = {slot for item in parsed for slot in item.conversation.extras if slot not in formats.FORMATS}
    assert sources >= {"claude-code", "codex", "gemini-cli", "hf-sts"}
    for item in parsed:
        _, ledger = formats.serialize(item.conversation, target)
        named = [e.reason for e in ledger if any(e.reason.startswith(f"{slot} ") for slot in sources)]
        assert named == [], (item.source, named)
