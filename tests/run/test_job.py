"""The batch job end to end on the bundled data: outputs, accounting, determinism, bad configuration."""

from __future__ import annotations

import json
import subprocess
import zipfile
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corpus import ROOT
from pipeline.run.config import load_config
from pipeline.errors import ConfigError
from pipeline import run_job
from pipeline.run.writers import SCHEMA

DATA = ROOT / "data"


def _job(tmp_path: Path, **overrides):
    settings = {"input.paths": [str(DATA)], "output.dir": str(tmp_path / "out"), "run.workers": 1}
    settings.update(overrides)
    return load_config(ROOT / "configs" / "default.toml", settings)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    return run_job(_job(tmp), progress=False)


def _trace_records(export: dict) -> int:
    """Spans of an OTLP export, observations of a Langfuse trace, runs of a LangSmith run tree."""
    if "resourceSpans" in export:
        return sum(len(ss["spans"]) for rs in export["resourceSpans"] for ss in rs["scopeSpans"])
    if "observations" in export:
        return len(export["observations"])
    if "resourceLogs" in export:  # one record per span's GenAI events, one for all the other log records
        logs = [log for rl in export["resourceLogs"] for sl in rl["scopeLogs"] for log in sl["logRecords"]]
        named = [log for log in logs if log.get("eventName", "").startswith("gen_ai.")
                 or any(a["key"] == "event.name" for a in log.get("attributes", []))]
        return len({(log["traceId"], log["spanId"]) for log in named}) + (len(named) < len(logs))
    return 1 + sum(_trace_records(child) for child in export.get("child_runs") or [])


def _records_in_data() -> int:
    """Records in data/, counted without the project's readers: lines of .jsonl files, elements of
    .json arrays, one per session log, one per exchange in a stream log, one per span of a trace export,
    one per batch result (the batch requests files are their index)."""
    total = 0
    for path in sorted(DATA.rglob("*")):
        if path.suffix == ".binpb":  # length-prefixed OTLP protobuf messages
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

            data, offset = path.read_bytes(), 0
            while offset < len(data):
                size = int.from_bytes(data[offset:offset + 4], "big")
                message = ExportTraceServiceRequest.FromString(data[offset + 4:offset + 4 + size])
                total += sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)
                offset += 4 + size
        elif path.parent.name == "batch":
            if path.suffix == ".jsonl":
                lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
                total += sum(1 for line in lines if "result" in line or "response" in line)
        elif path.parent.name == "traces":
            text = path.read_text()
            exports = ([json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl"
                       else [json.loads(text)])
            total += sum(_trace_records(export) for export in exports)
        elif path.suffix == ".jsonl":
            lines = [line for line in path.read_text().splitlines() if line.strip()]
            if path.parent.name != "sessions":
                total += len(lines)
            else:  # one conversation per session file, or per window between Codex compactions
                total += 1 + sum(json.loads(line).get("type") == "compacted" for line in lines)
        elif path.suffix == ".json":
            value = json.loads(path.read_text())
            total += len(value) if isinstance(value, list) else 1
        elif path.suffix == ".eval":  # an inspect_ai log: one record per sample entry of the zip
            with zipfile.ZipFile(path) as archive:
                total += sum(n.startswith("samples/") for n in archive.namelist())
        elif path.suffix == ".sse":
            total += path.read_text().count("event: message_start")  # one response per exchange
    return total


def test_outputs_and_accounting(default_run):
    out = default_run.output_dir
    assert {p.name for p in out.iterdir()} >= {"data-00000.parquet", "rejects.jsonl", "stats.json", "config.json"}
    stats = json.loads((out / "stats.json").read_text())
    records = stats["records"]
    assert records["read"] == _records_in_data()
    assert records["read"] == records["written"] + records["rejected"] + records["filtered"]
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == records["rejected"] > 0
    assert {r["code"] for r in rejects} >= {"invalid_json", "unknown_shape", "failed_exchange", "truncated_stream"}
    assert all(r["source"].startswith(str(DATA)) and r["stage"] and r["message"] for r in rejects)
    for stage, counts in stats["stages"].items():
        assert counts["in"] == counts["passed"] + sum(counts["rejected"].values()) + sum(counts["filtered"].values()), stage


def test_parquet_schema_and_rows(default_run):
    table = pq.read_table(default_run.shards[0])
    assert table.schema.equals(SCHEMA)
    rows = table.to_pylist()
    assert len(rows) == json.loads((default_run.output_dir / "stats.json").read_text())["records"]["written"]
    for row in rows:
        assert len(row["input_ids"]) == len(row["labels"]) == len(row["loss_mask"]) == row["num_tokens"]
        assert [t if m else -100 for t, m in zip(row["input_ids"], row["loss_mask"])] == row["labels"]
        assert row["num_trained_tokens"] == sum(row["loss_mask"]) > 0
        messages = json.loads(row["messages"])
        calls = [c for m in messages for c in m.get("tool_calls", [])]
        assert len(calls) == row["num_tool_calls"]
        assert all(isinstance(c["function"]["arguments"], (dict, str)) for c in calls)
        export = json.loads(row["export"])
        assert "messages" in export  # [convert] to = "openai-chat"


def test_loads_with_datasets(default_run):
    import datasets

    ds = datasets.load_dataset("parquet", data_files=[str(p) for p in default_run.shards], split="train")
    assert ds.features["input_ids"].feature.dtype == "int32"
    assert ds.features["loss_mask"].feature.dtype == "int8"
    assert len(ds) == pq.read_metadata(default_run.shards[0]).num_rows


def test_same_input_same_bytes_whatever_the_worker_count(tmp_path, default_run):
    other = run_job(_job(tmp_path, **{"run.workers": 2, "run.batch_size": 3}), progress=False)
    for name in ("data-00000.parquet", "rejects.jsonl", "stats.json"):
        assert (other.output_dir / name).read_bytes() == (default_run.output_dir / name).read_bytes(), name


def test_segment_cache_off_writes_the_same_tokens(tmp_path, default_run):
    off = run_job(_job(tmp_path, **{"render.segment_cache_tokens": 0}), progress=False)
    columns = ["source", "input_ids", "labels", "loss_mask"]
    assert pq.read_table(off.shards[0], columns=columns) == pq.read_table(default_run.shards[0], columns=columns)


def test_jsonl_output_and_shards(tmp_path):
    result = run_job(_job(tmp_path, **{"output.format": "jsonl", "output.shard_size": 4}), progress=False)
    written = result.stats.written
    assert len(result.shards) == -(-written // 4)
    rows = [json.loads(line) for shard in result.shards for line in shard.read_text().splitlines()]
    assert len(rows) == written and all("input_ids" in r for r in rows)


def test_filters_count_their_reasons(tmp_path):
    result = run_job(_job(tmp_path, **{"shape.require_tool_calls": True, "shape.max_tokens": 300,
                                       "shape.trim": False}), progress=False)
    stats = result.stats.to_dict()
    assert stats["stages"]["shape"]["filtered"].get("no_tool_calls", 0) > 0
    assert stats["stages"]["render"]["filtered"].get("too_long", 0) > 0
    assert stats["records"]["balanced"]


def test_trimming_keeps_calls_with_their_results(tmp_path):
    result = run_job(_job(tmp_path, **{"shape.max_tokens": 300, "shape.trim": True}), progress=False)
    rows = pq.read_table(result.shards[0]).to_pylist()
    trimmed = [r for r in rows if r["trimmed"]]
    assert trimmed, "a multi-turn sample exceeds 300 tokens"
    for row in trimmed:
        assert row["num_tokens"] <= 300
        conv = json.loads(row["conversation"])
        calls = {b["id"] for m in conv["messages"] for b in m["blocks"] if b["type"] == "tool_call"}
        answered = {b.get("call_id") for m in conv["messages"] for b in m["blocks"] if b["type"] == "tool_result"}
        assert calls <= answered and conv["messages"][-1]["role"] == "assistant"


def test_duplicates_are_filtered(tmp_path):
    src = DATA / "anthropic_requests.jsonl"
    twice = tmp_path / "twice.jsonl"
    twice.write_text(src.read_text() * 2)
    result = run_job(_job(tmp_path, **{"input.paths": [str(twice)]}), progress=False)
    lines = len(src.read_text().splitlines())
    assert result.stats.stages["dedup"].filtered["duplicate"] == lines
    assert result.stats.written == lines


@pytest.mark.parametrize("settings,message", [
    ({"input.paths": ["/nonexistent/file.jsonl"]}, "does not exist"),
    ({"render.template": "chatmel"}, "unknown template 'chatmel'; valid: chatml"),
    ({"render.tokenizer": "qwen9"}, "qwen2.5"),
    ({"render.mask": "sometimes"}, "unknown mask policy"),
    ({"render.segment_cache_tokens": -1}, r"Expected `int` >= 0 - at `\$.render.segment_cache_tokens`"),
])
def test_bad_configuration_fails_before_work(tmp_path, settings, message):
    with pytest.raises(ConfigError, match=message):
        run_job(_job(tmp_path, **settings), progress=False)
    assert not (tmp_path / "out" / "stats.json").exists()


def test_config_typos_name_the_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[render]\ntempalte = "chatml"\n')
    with pytest.raises(ConfigError, match="unknown key 'render.tempalte'"):
        load_config(bad)


def test_cli_exit_codes(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "pipeline", "run", *args], capture_output=True, text=True,
                              cwd=ROOT)

    done = run("configs/default.toml", "--output", str(tmp_path / "o"), "--workers", "1", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "read" in done.stderr and "written" in done.stderr and "rejected" in done.stderr
    missing = run("configs/nope.toml")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    locked = tmp_path / "locked"
    locked.write_text("a file, not a directory")
    unwritable = run("configs/default.toml", "--output", str(locked / "sub"), "--quiet")
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr


def test_ctrl_c_stops_cleanly_without_half_files(tmp_path):
    """Ctrl-C reaches the whole process group: the run stops, exits 130, and leaves no partial file."""
    import os
    import signal
    import time

    big = tmp_path / "big.jsonl"
    lines = (DATA / "anthropic_requests.jsonl").read_text().splitlines()
    with open(big, "w") as handle:
        for i in range(40000):  # distinct records (nothing is deduplicated away), more than 6 s of work
            record = json.loads(lines[i % len(lines)])
            record["metadata"] = {"user_id": f"u{i}"}
            handle.write(json.dumps(record) + "\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", "configs/default.toml", "--input", str(big),
                             "--output", str(out), "--workers", "2"], cwd=ROOT, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(6)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert b"interrupted" in err
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert not [name for name in left if name.endswith(".partial")], left
    assert "stats.json" not in left and "rejects.jsonl" not in left
