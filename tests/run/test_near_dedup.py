"""Near-duplicate filtering: a re-run of the same task with one value changed is filtered as
`near_duplicate_of` the first row; different conversations that share a start are both kept; the decision
is the same whatever the worker count and batch size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus import ROOT
from pipeline import run_job
from pipeline.run.config import load_config
from pipeline.run.near_dedup import NearDuplicates, signature

LOG = "\n".join(f"2026-02-01T09:{i // 60:02d}:{i % 60:02d} worker-{i % 7} processed batch {i} in {i * 37 % 1000} ms"
                for i in range(120))


def _chat(question: str, log: str, answer: str) -> dict:
    return {"model": "gpt-4o", "messages": [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_log", "arguments": "{\"service\": \"etl\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": log},
        {"role": "assistant", "content": answer}],
        "tools": [{"type": "function", "function": {"name": "read_log", "description": "Read a service log.",
                                                   "parameters": {"type": "object", "properties": {"service": {"type": "string"}}}}}]}


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    records = [
        _chat("Why is the ETL slow?", LOG, "Batches take up to a second; worker-3 is the slowest."),
        _chat("Why is the ETL slow?", LOG.replace("batch 77 in", "batch 77 took"), "Batches take up to a second; worker-3 is the slowest."),
        _chat("Why is the ETL slow?", LOG[: len(LOG) // 3], "Only a third of the log was read, nothing stands out."),
        _chat("How many batches ran?", "batches: 120", "120 batches ran."),
    ]
    path = tmp_path / "in" / "chat.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path.parent


def _run(logs: Path, out: Path, **overrides):
    settings = {"input.paths": [str(logs)], "output.dir": str(out), "shape.near_dedup": True,
                "shape.near_dedup_threshold": 0.85, "run.workers": 1}
    settings.update(overrides)
    return run_job(load_config(ROOT / "configs" / "default.toml", settings), progress=False)


def test_a_rerun_with_one_value_changed_is_filtered_naming_the_kept_row(logs, tmp_path):
    result = _run(logs, tmp_path / "out")
    near = [json.loads(line) for line in (result.output_dir / "near_duplicates.jsonl").read_text().splitlines()]
    assert [(Path(n["source"]).name, Path(n["kept_source"]).name, n["reason"]) for n in near] == [
        ("chat.jsonl:2", "chat.jsonl:1", "near_duplicate_of")]
    assert near[0]["similarity"] >= 0.85  # one word in ~3,000 tokens: few shingles change
    stats = json.loads((result.output_dir / "stats.json").read_text())
    assert stats["stages"]["dedup"]["filtered"] == {"near_duplicate_of": 1}
    records = stats["records"]
    assert records == {**records, "read": 4, "written": 3, "filtered": 1}


def test_decisions_do_not_depend_on_workers_or_batches(logs, tmp_path):
    one = _run(logs, tmp_path / "one", **{"run.batch_size": 1})
    two = _run(logs, tmp_path / "two", **{"run.workers": 2, "run.batch_size": 3})
    for name in ("near_duplicates.jsonl", "data-00000.parquet"):
        assert (one.output_dir / name).read_bytes() == (two.output_dir / name).read_bytes()


def test_off_by_default_and_then_no_file(logs, tmp_path):
    result = run_job(load_config(None, {"input.paths": [str(logs)], "output.dir": str(tmp_path / "o"),
                                        "run.workers": 1}), progress=False)
    assert not (result.output_dir / "near_duplicates.jsonl").exists()
    assert result.stats.to_dict()["records"]["written"] == 4


def test_signatures_estimate_similarity():
    ids = list(range(2000))
    index = NearDuplicates(0.9)
    assert index.check("a", "a:1", signature(ids)) is None
    assert index.check("b", "b:1", signature([i + 5000 for i in ids])) is None  # nothing shared
    changed = ids[:1000] + [99_999] + ids[1001:]
    kept = index.check("c", "c:1", signature(changed))
    assert kept is not None and kept[:2] == ("a", "a:1") and kept[2] >= 0.9


def test_the_qa_report_shows_near_duplicate_clusters(logs, tmp_path):
    from pipeline.qa import build_report

    near = build_report(_run(logs, tmp_path / "out").output_dir).near_duplicates
    assert (near.enabled, near.removed, near.clusters) == (True, 1, 1)
    assert Path(near.largest[0].kept).name == "chat.jsonl:1"
    assert [Path(e).name for e in near.largest[0].examples] == ["chat.jsonl:2"]
