"""Long conversations as windows: every row fits, no call is separated from its result, every assistant
turn is trained in exactly one window, earlier turns come along as masked context."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corpus import ROOT, require_corpus
from pipeline import run_job
from pipeline.conversation import ToolCall, ToolResult, to_json
from pipeline.errors import ConfigError
from pipeline.formats import parse
from pipeline.ingest import iter_parsed
from pipeline.run.config import load_config
from pipeline.run.window import boundaries, plan_windows

TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object",
                                                                          "properties": {"path": {"type": "string"}}}}}]


def _session(steps: int, *, parallel_every: int = 3, big_step: int | None = None) -> list[dict]:
    """A user task, then steps of calls (parallel ones now and then) and results, a user follow-up in the
    middle, and a final answer. `big_step` gets a huge assistant text (a unit over any small limit)."""
    messages = [{"role": "system", "content": "You read files."}, {"role": "user", "content": "Summarise the repo."}]
    for i in range(steps):
        n = 2 if i % parallel_every == 0 else 1
        calls = [{"id": f"c{i}_{j}", "type": "function",
                  "function": {"name": "read", "arguments": json.dumps({"path": f"f{i}_{j}.py"})}} for j in range(n)]
        text = ("word " * 400) if i == big_step else f"Reading step {i}."
        messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": f"contents of {c['id']} " * 5} for c in calls]
        if i == steps // 2:
            messages += [{"role": "assistant", "content": "Halfway there."}, {"role": "user", "content": "Go on."}]
    messages.append({"role": "assistant", "content": "The repo reads files."})
    return messages


def _conv(messages):
    return parse({"messages": messages, "tools": TOOLS}, "openai-chat")


def _chars(conv) -> int:
    """A stand-in token count: characters of every text, argument and result, plus the header."""
    total = 50
    for message in conv.messages:
        for block in message.blocks:
            match block:
                case ToolCall():
                    total += len(json.dumps(block.arguments))
                case ToolResult():
                    total += sum(len(c.text) for c in block.content)
                case _:
                    total += len(getattr(block, "text", "") or "")
    return total


def _trained(conv, window):
    return [m for m in window.conversation.messages if m.role == "assistant" and m.weight != 0]


def _check_paired(messages) -> None:
    calls = {b.id for m in messages for b in m.blocks if isinstance(b, ToolCall)}
    results = {b.call_id for m in messages for b in m.blocks if isinstance(b, ToolResult)}
    assert results <= calls, "a result without its call"
    assert calls <= results or messages[-1].role == "assistant", "a call without its result"


@pytest.mark.parametrize("overlap", [0, 1, 3])
def test_windows_fit_keep_calls_with_results_and_train_each_turn_once(overlap):
    conv = _conv(_session(30))
    limit = 700
    plan = plan_windows(conv, limit, overlap, lambda c: (_chars(c), None))
    assert len(plan.windows) > 3 and not plan.lost
    trained = []
    for i, window in enumerate(plan.windows):
        assert _chars(window.conversation) <= limit
        assert window.conversation.system == conv.system and window.conversation.tools == conv.tools
        _check_paired(window.conversation.messages)
        assert window.context <= window.start < window.end
        context = window.conversation.messages[: window.start - window.context]
        assert all(m.weight == 0 for m in context if m.role == "assistant")
        if i and overlap:
            assert window.context < window.start  # earlier turns came along as context
        trained += _trained(conv, window)
    assert trained == [m for m in conv.messages if m.role == "assistant"]  # each once, in order
    assert plan.windows[-1].end == len(conv.messages)


def test_cuts_never_fall_between_a_call_and_its_result():
    conv = _conv(_session(6))
    cuts = boundaries(conv)
    for k in cuts[1:-1]:
        _check_paired(conv.messages[:k])
        _check_paired(conv.messages[k:])


def test_a_unit_over_the_limit_alone_is_lost_and_reported():
    conv = _conv(_session(12, big_step=5))
    plan = plan_windows(conv, 800, 1, lambda c: (_chars(c), None))
    assert len(plan.lost) == 1 and plan.lost[0].assistant_turns == 1 and plan.lost[0].tokens > 800
    lost = plan.lost[0]
    trained = [m for w in plan.windows for m in _trained(conv, w)]
    expected = [m for i, m in enumerate(conv.messages) if m.role == "assistant" and not lost.start <= i < lost.end]
    assert trained == expected


def _job(tmp_path: Path, inputs, **overrides):
    settings = {"input.paths": [str(p) for p in inputs], "output.dir": str(tmp_path / "out"), "run.workers": 1,
                "output.qa_report": False, "shape.long": "window"}
    settings.update(overrides)
    return load_config(ROOT / "configs" / "default.toml", settings)


def _check_rows(rows: list[dict], original, limit: int) -> None:
    """Rows of one windowed conversation: each fits, indexes 0..n-1, every assistant turn trained once."""
    assert [r["window"] for r in rows] == list(range(len(rows))) and {r["windows"] for r in rows} == {len(rows)}
    assert len({r["id"] for r in rows}) == len(rows)
    whole = json.loads(to_json(original))
    trained = []
    for row in rows:
        assert row["num_tokens"] <= limit and row["num_trained_tokens"] > 0
        conv = json.loads(row["conversation"])
        assert (conv.get("system"), conv.get("tools")) == (whole.get("system"), whole.get("tools"))
        trained += [m for m in conv["messages"] if m["role"] == "assistant" and m.get("weight") != 0]
        tokens = json.loads(row["role_tokens"])
        assert sum(tokens.values()) == row["num_tokens"] and tokens["assistant"] + tokens["template"] >= row["num_trained_tokens"]
    expected = [m for m in whole["messages"] if m["role"] == "assistant"]
    assert [json.dumps(m, sort_keys=True) for m in trained] == [json.dumps(m, sort_keys=True) for m in expected]


def test_a_long_request_becomes_window_rows(tmp_path):
    log = tmp_path / "long.jsonl"
    log.write_text(json.dumps({"model": "m", "messages": _session(40), "tools": TOOLS}) + "\n")
    result = run_job(_job(tmp_path, [log], **{"shape.max_tokens": 600, "shape.window_overlap": 2}), progress=False)
    rows = [row for shard in result.shards for row in pq.read_table(shard).to_pylist()]
    assert len(rows) > 3 and {r["source"] for r in rows} == {f"{log}:1"}
    original = next(iter_parsed([log])).conversation
    _check_rows(rows, original, 600)
    stats = result.stats.to_dict()
    assert stats["records"] == {"read": 1, "written": 1, "rejected": 0, "filtered": 0, "balanced": True}
    assert stats["tallies"]["output"]["rows"] == len(rows)
    assert stats["tallies"]["window"] == {"conversations": 1, "rows": len(rows), "lost_units": 0,
                                          "lost_assistant_turns": 0}
    for row in rows:  # each window exports itself, not the whole conversation
        export = json.loads(row["export"])["messages"]
        results = [b for m in json.loads(row["conversation"])["messages"] for b in m["blocks"]
                   if b["type"] == "tool_result"]
        assert sum(m["role"] == "tool" for m in export) == len(results)


def test_the_longest_corpus_session_becomes_windows(tmp_path):
    corpus = require_corpus()
    path = corpus / "claude_code_spotter_sessions" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    trimmed = run_job(_job(tmp_path, [path], **{"shape.long": "trim"}), progress=False)
    assert trimmed.stats.stages["render"].filtered == {"too_long_untrimmable": 1}
    result = run_job(_job(tmp_path, [path], **{"run.workers": 2}), progress=False)
    rows = [row for shard in result.shards for row in pq.read_table(shard).to_pylist()]
    assert len(rows) >= 10
    _check_rows(rows, next(iter_parsed([path])).conversation, 8192)
    assert result.stats.tallies["window"]["lost_units"] == 0


def test_trim_key_of_older_configs():
    assert load_config(None, {"shape.trim": False}).shape.long == "drop"
    assert load_config(None, {"shape.trim": True}).shape.long == "trim"
    assert load_config(None).shape.long == "trim"
    assert load_config(None, {"shape.trim": True, "shape.long": "trim"}).shape.long == "trim"
    with pytest.raises(ConfigError, match="shape.trim = true and shape.long = 'window'"):
        load_config(None, {"shape.trim": True, "shape.long": "window"})
