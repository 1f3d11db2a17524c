"""Runs with every [export] format on, for the trainer-contract tests: on the bundled samples and this
suite's fixture always, plus the corpus when it is there (required under CI). Rows come back with their
JSON columns decoded and, per format, the export record made from each (None where the row's ledger says
it was not exported): the files list rows in the order of the data, split by split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from corpus import CORPUS, ROOT, corpus_available, require_corpus
from pipeline import run_job
from pipeline.run.config import load_config

FIXTURE = ROOT / "tests" / "fixtures" / "exports" / "mixed.jsonl"
FORMATS = ["openai", "trl", "sharegpt"]
TARGETS = {"openai": "openai export", "trl": "trl export", "sharegpt": "sharegpt export"}
# The corpus sources the contract tests read (every shape the exports meet: long tool loops, parallel
# calls, hosted tools, reasoning, structured results, sessions that are trimmed).
CORPUS_INPUTS = ["tau_bench_gpt4o_airline", "pydantic_ai_openai_chat", "pydantic_ai_anthropic", "pydantic_ai_google",
                 "pydantic_ai_openai_responses", "claude_code_spotter_sessions"]


def inputs(corpus: bool = True) -> list[str]:
    paths = [str(ROOT / "data"), str(FIXTURE)]
    if corpus:
        require_corpus()
        paths += [str(CORPUS / name) for name in CORPUS_INPUTS]
    return paths


def run(out: Path, paths: list[str], **overrides: Any) -> Path:
    settings = {"input.paths": paths, "output.dir": str(out), "export.formats": FORMATS, "output.validation": 0.1,
                "output.qa_report": False, "shape.max_tokens": 8192, "run.workers": 1}
    settings.update(overrides)
    run_job(load_config(ROOT / "configs" / "default.toml", settings), progress=False)
    return out


_RUNS: dict[tuple, Path] = {}


def shared_run(tmp_path_factory: Any, corpus: bool, **overrides: Any) -> Path:
    """One run per (inputs, settings) for the whole session: the contract tests of several modules read it."""
    key = (corpus, tuple(sorted(overrides.items())))
    if key not in _RUNS:
        paths = inputs(corpus)
        _RUNS[key] = run(tmp_path_factory.mktemp("exports"), paths, **{"run.workers": 2, **overrides})
    return _RUNS[key]


def splits(out: Path) -> list[str]:
    return ["train", "validation"] if list(out.glob("validation-*.parquet")) else ["train"]


def rows(out: Path, split: str = "train") -> list[dict[str, Any]]:
    prefix = "data" if split == "train" else split
    found = []
    for shard in sorted(out.glob(f"{prefix}-*.parquet")):
        for row in pq.read_table(shard).to_pylist():
            for name in ("messages", "tools", "conversation", "ledger", "issues"):
                row[name] = json.loads(row[name])
            found.append(row)
    return found


def skipped(row: dict[str, Any], fmt: str) -> list[str]:
    return [e["reason"] for e in row["ledger"] if e["target"] == TARGETS[fmt] and e["reason"].startswith("not exported")]


def records(out: Path, fmt: str, split: str = "train") -> list[dict[str, Any]]:
    if fmt == "trl":
        table = pq.read_table(out / "trl" / f"{split}.parquet")
        return [{key: json.loads(value) for key, value in row.items()} for row in table.to_pylist()]
    path = out / fmt / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def paired(out: Path, fmt: str) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(row, its export record or None) for every row of every split; the counts must agree."""
    out_pairs = []
    for split in splits(out):
        lines = iter(records(out, fmt, split))
        for row in rows(out, split):
            out_pairs.append((row, None if skipped(row, fmt) else next(lines)))
        assert next(lines, None) is None, f"{fmt} {split}: more records than exported rows"
    return out_pairs


__all__ = ["corpus_available", "inputs", "paired", "records", "rows", "run", "shared_run", "skipped", "splits"]
