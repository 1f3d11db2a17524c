"""Session folding: prefixes folded into the longest conversation of their session, branches kept, the
comparison on canonical content, decisions independent of workers and batches, accounting exact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corpus import ROOT, require_corpus
from pipeline import run_job
from pipeline.formats import parse
from pipeline.run.config import load_config
from pipeline.run.fold import chain, recording_of

TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Look a key up",
                                           "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}}]


def _call(i: int, key: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"c{i}", "type": "function",
                            "function": {"name": "lookup", "arguments": json.dumps({"key": key})}}]}


def _loop(task: str, results: list[str], *, answer: bool = True) -> list[dict]:
    """An agent loop as a request logs it: the task, a call and its result per step, then the answer."""
    messages = [{"role": "system", "content": "You look things up."}, {"role": "user", "content": task}]
    for i, result in enumerate(results):
        messages += [_call(i, f"k{i}"), {"role": "tool", "tool_call_id": f"c{i}", "content": result}]
    if answer:
        messages.append({"role": "assistant", "content": f"Found {len(results)}."})
    return messages


def _requests(path: Path, conversations: list[list[dict]]) -> Path:
    path.write_text("".join(json.dumps({"model": "m", "messages": m, "tools": TOOLS}) + "\n" for m in conversations))
    return path


def _run(tmp_path: Path, inputs: list[Path], name: str = "out", **overrides):
    settings = {"input.paths": [str(p) for p in inputs], "output.dir": str(tmp_path / name), "run.workers": 1,
                "output.qa_report": False}
    settings.update(overrides)
    return run_job(load_config(ROOT / "configs" / "default.toml", settings), progress=False)


def _rows(result) -> list[dict]:
    return [row for shard in result.shards for row in pq.read_table(shard).to_pylist()]


def test_prefixes_fold_into_the_longest_and_name_it(tmp_path):
    # Every request of one loop logged: each holds the history so far (the last one the answer).
    steps = [_loop("find k", ["r0", "r1", "r2"][:n], answer=False) + [_call(n, f"k{n}")] for n in range(3)]
    log = _requests(tmp_path / "loop.jsonl", steps + [_loop("find k", ["r0", "r1", "r2"])])
    result = _run(tmp_path, [log])
    rows = _rows(result)
    assert [r["source"] for r in rows] == [f"{log}:4"]
    assert rows[0]["folded"] == 3
    stats = result.stats.to_dict()
    assert stats["stages"]["fold"] == {"in": 4, "passed": 1, "rejected": {}, "filtered": {"prefix_of": 3}}
    assert stats["records"]["balanced"] and stats["records"]["filtered"] == 3
    listed = [json.loads(line) for line in (result.output_dir / "filtered.jsonl").read_text().splitlines()]
    assert [(f["source"], f["reason"], f["detail"]["keeper"]) for f in listed] == [
        (f"{log}:{n}", "prefix_of", f"{log}:4") for n in (1, 2, 3)]


def test_near_misses_are_branches_not_prefixes(tmp_path):
    # Same system prompt, tools, task and call; a different tool result: neither holds the other.
    first = _loop("find k", ["sunny"])
    other = _loop("find k", ["rainy"]) + [{"role": "user", "content": "and tomorrow?"},
                                           {"role": "assistant", "content": "Also rainy."}]
    shared = _loop("find k", [], answer=False) + [_call(0, "k0")]  # the start both share: folded
    log = _requests(tmp_path / "branches.jsonl", [first, other, shared])
    rows = _rows(_run(tmp_path, [log]))
    assert sorted(r["source"] for r in rows) == [f"{log}:1", f"{log}:2"]
    assert len({r["session"] for r in rows}) == 1  # two branches of one session
    assert sum(r["folded"] for r in rows) == 1
    for row in rows:  # each kept its own result
        conv = json.loads(row["conversation"])
        results = [b["content"][0]["text"] for m in conv["messages"] for b in m["blocks"] if b["type"] == "tool_result"]
        assert results == (["sunny"] if row["source"].endswith(":1") else ["rainy"])


def test_different_tasks_never_fold(tmp_path):
    a, b = _loop("find a", ["r"]), _loop("find b", ["r", "s"])
    b_prefix = _loop("find b", ["r"], answer=False)  # a prefix of b, but not of a
    rows = _rows(_run(tmp_path, [_requests(tmp_path / "two.jsonl", [a, b_prefix, b])]))
    assert sorted(r["source"].rsplit(":", 1)[1] for r in rows) == ["1", "3"]
    assert len({r["session"] for r in rows}) == 2


def test_sessions_all_keeps_every_record(tmp_path):
    steps = [_loop("find k", ["r0", "r1"][:n]) for n in range(3)]
    result = _run(tmp_path, [_requests(tmp_path / "loop.jsonl", steps)], **{"shape.sessions": "all"})
    assert len(_rows(result)) == 3 and result.stats.stages["fold"].filtered == {}


def test_canonical_comparison_ignores_provider_ids_and_layout():
    # A turn as the response logged it and as the next request replays it: other ids, a cache_control,
    # the text as a string instead of a block list.
    logged = parse({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                 {"role": "assistant", "content": [
                                     {"type": "text", "text": "Let me look."},
                                     {"type": "tool_use", "id": "toolu_A", "name": "lookup", "input": {"key": "x"}}]}]},
                   "anthropic")
    replayed = parse({"messages": [{"role": "user", "content": "hi"},
                                   {"role": "assistant", "content": [
                                       {"type": "text", "text": "Let me look."},
                                       {"type": "tool_use", "id": "toolu_B", "name": "lookup", "input": {"key": "x"},
                                        "cache_control": {"type": "ephemeral"}}]},
                                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_B",
                                                                 "content": "42"}]}]}, "anthropic")
    short, long = chain(logged), chain(replayed)
    assert long[: len(short)] == short
    changed = parse({"messages": [{"role": "user", "content": "hi"},
                                  {"role": "assistant", "content": [
                                      {"type": "text", "text": "Let me look."},
                                      {"type": "tool_use", "id": "toolu_A", "name": "lookup", "input": {"key": "y"}}]}]},
                    "anthropic")
    assert chain(changed)[1] == short[1] and chain(changed)[2] != short[2]


def test_recordings_are_sessions():
    assert recording_of("logs/a.json:1#interactions[3]") == "logs/a.json:1"
    assert recording_of("logs/s.txt:1#responses[0]") == "logs/s.txt:1"
    assert recording_of("logs/t.jsonl:2#resourceSpans[0].scopeSpans[0].spans[1]") == "logs/t.jsonl:2"
    assert recording_of("logs/a.jsonl:7") is None and recording_of("logs/t.json:1#4") is None


def _interleaved(tmp_path: Path) -> Path:
    """One session logged request by request, then twelve more interleaved, one with a branch."""
    lines = [_loop("solo", ["a", "b"][:n], answer=n == 2) for n in range(1, 3)]
    for step in range(4):
        for s in range(12):
            results = [f"s{s} r{i}" for i in range(step)]
            lines.append(_loop(f"task {s}", results, answer=step == 3))
            if s == 3 and step == 2:
                lines.append(_loop(f"task {s}", ["s3 r0", "other"]))
    return _requests(tmp_path / "interleaved.jsonl", lines)


@pytest.mark.parametrize("window", [256, 3])
def test_same_bytes_whatever_the_workers_and_batches(tmp_path, window):
    inputs = [_interleaved(tmp_path), ROOT / "data"]
    runs = [_run(tmp_path, inputs, f"w{workers}b{batch}", **{"run.workers": workers, "run.batch_size": batch,
                                                              "shape.session_window": window})
            for workers, batch in ((1, 64), (2, 1), (2, 5))]
    for other in runs[1:]:
        for name in ("data-00000.parquet", "rejects.jsonl", "stats.json"):
            assert (other.output_dir / name).read_bytes() == (runs[0].output_dir / name).read_bytes(), name
    stats = runs[0].stats
    assert stats.balanced() and stats.stages["fold"].filtered["prefix_of"] > 0


def test_a_small_window_writes_sessions_it_cannot_hold(tmp_path):
    log = _interleaved(tmp_path)
    wide, narrow = (_run(tmp_path, [log], f"n{w}", **{"shape.session_window": w}) for w in (256, 3))
    assert len(_rows(wide)) == 14  # thirteen sessions, one with a branch
    assert len(_rows(narrow)) > len(_rows(wide))  # sessions outlived the window: written in stretches
    assert narrow.stats.balanced()


def test_every_strict_prefix_in_a_corpus_recording_is_folded(tmp_path):
    corpus = require_corpus()
    folders = [corpus / name for name in ("pydantic_ai_anthropic", "pydantic_ai_openai_chat",
                                          "pydantic_ai_openai_responses", "pydantic_ai_google")]
    kept = _run(tmp_path, folders, "fold", **{"run.workers": 2})
    every = _run(tmp_path, folders, "all", **{"run.workers": 2, "shape.sessions": "all"})
    by_recording: dict[str, list[dict]] = {}
    for row in _rows(every):
        by_recording.setdefault(re.sub(r"#interactions\[\d+\]$", "", row["source"]), []).append(row)
    prefixes = set()
    for rows in by_recording.values():
        for a in rows:
            if any(len(b["input_ids"]) > len(a["input_ids"]) and b["input_ids"][: len(a["input_ids"])] == a["input_ids"]
                   for b in rows):
                prefixes.add(a["source"])
    assert len(prefixes) > 80
    written = {row["source"] for row in _rows(kept)}
    assert not prefixes & written
    folded = kept.stats.stages["fold"].filtered["prefix_of"]
    assert folded == len(_rows(every)) - len(written) >= len(prefixes)
    # Nothing folded across recordings: every folded record's keeper is from its own recording.
    keepers = {row["source"]: row["folded"] for row in _rows(kept)}
    for recording, rows in by_recording.items():
        gone = sum(row["source"] not in written for row in rows)
        assert gone == sum(keepers.get(row["source"], 0) for row in rows), recording


def test_every_folded_record_names_the_row_that_holds_it():
    from pipeline.run.fold import Folder, session_id
    from pipeline.run.item import Item
    from pipeline.run.stats import Stats

    def item(n: int, results: list[str]) -> Item:
        conv = parse({"messages": _loop("task", results, answer=False) + [_call(len(results), f"k{len(results)}")],
                      "tools": TOOLS},
                     "openai-chat")
        links = chain(conv)
        return Item(f"log.jsonl:{n}", None, chain=links, session=session_id(f"log.jsonl:{n}", links),
                    rendered={"source": f"log.jsonl:{n}"})

    stats = Stats()
    folder = Folder("longest", 256, stats)
    out = [i for n in range(1, 4) for i in folder.push(item(n, ["r"] * (n - 1)))]
    out += list(folder.close())
    assert [i.source for i in out] == ["log.jsonl:3", "log.jsonl:1", "log.jsonl:2"]
    keeper, *folded = out
    assert keeper.outcome is None and keeper.rendered["folded"] == 2
    for record in folded:  # folded into :2 first, then :2 into :3: all name :3
        assert record.outcome.code == "prefix_of" and record.outcome.detail == {"keeper": "log.jsonl:3"}
        assert "log.jsonl:3" in record.outcome.message and record.rendered is None
    assert stats.stages["fold"].to_dict() == {"in": 3, "passed": 1, "rejected": {}, "filtered": {"prefix_of": 2}}


def test_header_digest_is_the_same_from_the_cache_and_tells_tool_lists_apart():
    """The header's hash is kept by the header's plain JSON: a repeat, a cache_control on the system
    prompt or a tool's key order gives the same links; another schema value does not."""
    from pipeline.run import fold

    def body(system: list | str, tools: list) -> dict:
        return {"system": system, "tools": tools, "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}

    tool = {"name": "lookup", "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}}}
    reordered = {"input_schema": {"properties": {"key": {"type": "string"}}, "type": "object"}, "name": "lookup"}
    other = {"name": "lookup", "input_schema": {"type": "object", "properties": {"key": {"type": "integer"}}}}
    cached = [body("Be brief.", [tool]), body([{"type": "text", "text": "Be brief.", "cache_control":
                                                {"type": "ephemeral"}}], [tool]), body("Be brief.", [reordered])]
    first = [chain(parse(b, "anthropic")) for b in cached]
    fold._HEADERS.clear()
    assert [chain(parse(b, "anthropic")) for b in reversed(cached)] == first[::-1]
    assert first[0] == first[1] == first[2]
    assert chain(parse(body("Be brief.", [other]), "anthropic"))[0] != first[0][0]
