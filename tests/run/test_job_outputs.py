"""What a run leaves behind and how the job is chosen: only the new run's files, an empty run that
loads as an empty set, filtered records listed, --quiet, the template's own tokenizer, misfits as
usage errors, and the default job equal to configs/default.toml."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest

from corpus import ROOT
from pipeline import build_report, run_job
from pipeline.cli.main import main
from pipeline.run.config import JobConfig, load_config

DATA = ROOT / "data"
DEFAULT = ROOT / "configs" / "default.toml"


def _job(out: Path, **overrides):
    settings = {"input.paths": [str(DATA)], "output.dir": str(out), "run.workers": 1}
    return load_config(DEFAULT, settings | overrides)


def test_a_rerun_leaves_only_the_new_runs_files(tmp_path):
    import datasets

    out = tmp_path / "out"
    first = run_job(_job(out, **{"output.shard_size": 2}), progress=False)
    assert len(first.shards) > 3
    (out / "notes.txt").write_text("mine")  # not a run file: stays
    second = run_job(_job(out, **{"output.shard_size": 100, "output.qa_report": False}), progress=False)
    assert sorted(out.glob("data-*.parquet")) == second.shards == [out / "data-00000.parquet"]
    assert not (out / "qa_report.html").exists()  # the earlier run's report described other files
    assert (out / "notes.txt").read_text() == "mine"
    ds = datasets.load_dataset("parquet", data_files=str(out / "data-*.parquet"), split="train",
                               cache_dir=str(tmp_path / "hf"))
    assert len(ds) == second.stats.written == first.stats.written


def test_a_run_that_fails_its_checks_leaves_the_earlier_run_whole(tmp_path):
    out = tmp_path / "out"
    first = run_job(_job(out), progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["run", str(DEFAULT), "--input", str(DATA), "--output", str(out), "--template", "llama3",
                 "--tokenizer", "qwen2.5"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before and first.shards


def test_a_run_without_rows_loads_as_an_empty_set(tmp_path):
    import datasets

    out = tmp_path / "out"
    result = run_job(_job(out, **{"shape.min_tokens": 10**9}), progress=False)
    assert result.stats.written == 0 and result.stats.filtered > 0
    (shard,) = result.shards
    assert pq.read_metadata(shard).num_row_groups == 0 and pq.read_table(shard).num_rows == 0
    ds = datasets.load_dataset("parquet", data_files=str(out / "data-*.parquet"), split="train", streaming=True)
    assert list(ds) == [] and ds.features["input_ids"].feature.dtype == "int32"


def test_filtered_records_are_listed_in_the_file_and_the_report(tmp_path):
    duplicated = tmp_path / "in"
    duplicated.mkdir()
    for name in ("a.jsonl", "b.jsonl"):  # the same conversations twice: the second copies are duplicates
        (duplicated / name).write_bytes((DATA / "openai_chat.jsonl").read_bytes())
    out = tmp_path / "out"
    result = run_job(load_config(DEFAULT, {
        "input.paths": [str(DATA), str(duplicated)], "output.dir": str(out), "run.workers": 1,
        "shape.require_tool_calls": True, "shape.max_tokens": 300, "shape.trim": False}), progress=False)
    stats = json.loads((out / "stats.json").read_text())
    lines = [json.loads(line) for line in (out / "filtered.jsonl").read_text().splitlines()]
    assert len(lines) == stats["records"]["filtered"] == result.stats.filtered > 0
    assert all(set(line) - {"detail"} == {"source", "stage", "reason", "message"} and line["message"] for line in lines)
    by_stage: dict[str, dict[str, int]] = {}
    for line in lines:
        counts = by_stage.setdefault(line["stage"], {})
        counts[line["reason"]] = counts.get(line["reason"], 0) + 1
    assert by_stage == {stage: c["filtered"] for stage, c in stats["stages"].items() if c["filtered"]}
    assert {"shape", "render", "dedup"} <= by_stage.keys()
    written = {row["source"] for shard in result.shards for row in pq.read_table(shard, columns=["source"]).to_pylist()}
    duplicates = [line for line in lines if line["reason"] == "duplicate"]
    assert duplicates and all(d["source"].startswith(str(duplicated)) for d in duplicates)
    assert all(d["message"].removeprefix("same content as ") in written for d in duplicates)

    report = build_report(out)
    assert {(f.stage, f.reason): f.count for f in report.filtered} == {
        (line["stage"], line["reason"]): sum(1 for x in lines if (x["stage"], x["reason"]) == (line["stage"], line["reason"]))
        for line in lines}
    assert all(f.examples and f.examples[0].message for f in report.filtered)
    assert not report.notes
    page = (out / "qa_report.html").read_text()
    assert 'id="filtered"' in page and "same content as" in page


def test_quiet_prints_only_the_summary_line(tmp_path, capsys):
    assert main(["run", str(DEFAULT), "--input", str(DATA), "--output", str(tmp_path / "out"), "--workers", "1",
                 "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.splitlines()) == 1 and out.err.startswith("sftprep run: read 66,")


def test_the_template_brings_its_tokenizer(tmp_path):
    result = run_job(_job(tmp_path / "out", **{"render.template": "llama3"}), progress=False)
    table = pq.read_table(result.shards[0], columns=["template", "tokenizer"]).to_pylist()
    assert result.stats.written > 0 and {(r["template"], r["tokenizer"]) for r in table} == {("llama3", "llama3")}
    assert json.loads((tmp_path / "out" / "config.json").read_text())["render"]["tokenizer"] == "llama3"


@pytest.mark.parametrize("argv, message", [
    (["--template", "llama3", "--tokenizer", "qwen2.5"], "lacks <|begin_of_text|>"),
    (["--template", "harmony", "--tokenizer", "llama3"], "which template 'harmony' needs"),
    (["--template", str(ROOT / "templates" / "chatml.jinja")], "name its tokenizer"),
])
def test_a_misfit_is_a_usage_error_before_any_work(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["run", str(DEFAULT), "--input", str(DATA), "--output", str(out), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_no_config_is_the_default_job():
    assert load_config(None) == load_config(DEFAULT)


def _fields(struct: type) -> dict:
    out = {}
    for f in msgspec.structs.fields(struct):
        out[f.name] = _fields(f.type) if isinstance(f.type, type) and issubclass(f.type, msgspec.Struct) else None
    return out


def _keys(table: dict) -> dict:
    # Tables that are one key's value (a mapping), not a section of keys.
    return {k: _keys(v) if isinstance(v, dict) and k not in ("severity", "actions") else None for k, v in table.items()}


def test_default_toml_documents_every_key():
    assert _keys(tomllib.loads(DEFAULT.read_text())) == _fields(JobConfig)
    for line in DEFAULT.read_text().splitlines():
        key = re.match(r"(\w+) = ", line)
        if key and key[1] not in ("unanswered_call_at_end", "anthropic_blank_text"):
            assert "#" in line, f"configs/default.toml: '{key[1]}' has no comment"
