"""The `conversation` column is the conversation that was rendered: read back as canonical input, it
renders (through `sftprep render --config` of the same job) to the row's `input_ids` and `loss_mask`,
token for token; trimmed rows included. Argument and schema key order survives the trip."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from corpus import CORPUS, ROOT, require_corpus
from pipeline import Conversation, run_job
from pipeline.cli.main import main
from pipeline.run.config import load_config


def _write_job(tmp_path: Path, inputs: list[str], render: dict) -> Path:
    lines = ["[input]", f"paths = {json.dumps(inputs)}", "[output]", f'dir = "{tmp_path / "out"}"',
             "qa_report = false", "[run]", "workers = 1", "[render]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in render.items()]
    job = tmp_path / "job.toml"
    job.write_text("\n".join(lines) + "\n")
    return job


def _rerender(tmp_path: Path, job: Path, rows: list[dict], capsys) -> list[dict]:
    stored = tmp_path / "stored.jsonl"
    stored.write_bytes(b"".join(row["conversation"].encode() + b"\n" for row in rows))
    capsys.readouterr()
    code = main(["render", str(stored), "--config", str(job), "--record", "all", "--json"])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    return [json.loads(line) for line in out.splitlines()]


def _check_rows_rerender(tmp_path: Path, inputs: list[str], render: dict, capsys) -> list[dict]:
    job = _write_job(tmp_path, inputs, render)
    result = run_job(load_config(job), progress=False)
    rows = [row for shard in result.shards for row in pq.read_table(shard).to_pylist()]
    assert rows
    views = _rerender(tmp_path, job, rows, capsys)
    assert len(views) == len(rows)
    for row, view in zip(rows, views):
        assert "error" not in view, (row["source"], view.get("error"))
        assert view["input_ids"] == row["input_ids"], row["source"]
        assert view["loss_mask"] == row["loss_mask"], row["source"]
    return rows


@pytest.mark.parametrize("render", [
    {"template": "chatml"},
    {"template": "llama3", "mask": "last,no-eot", "calls": "drop-text"},
    {"template": "harmony", "date": "2025-03-04", "mask": "all,no-reasoning"},
], ids=["chatml", "llama3-last-drop-text", "harmony-dated"])
def test_bundled_rows_rerender_from_their_conversation(tmp_path, render, capsys):
    _check_rows_rerender(tmp_path, [str(ROOT / "data")], render, capsys)


@pytest.mark.parametrize("template", ["chatml", "llama3"])
def test_corpus_rows_rerender_from_their_conversation(tmp_path, template, capsys):
    corpus = require_corpus()
    rows = _check_rows_rerender(tmp_path, [str(corpus / "tau_bench_gpt4o_airline")], {"template": template}, capsys)
    assert len(rows) == 120 and any(row["trimmed"] for row in rows)  # max_tokens 8192 trims some


def test_argument_key_order_is_kept(tmp_path):
    """Keys as the provider sent them, in arguments and in schemas; the canonical struct's own fields
    come in declaration order."""
    body = {"model": "gpt-4o", "tools": [{"type": "function", "function": {
        "name": "book", "parameters": {"type": "object", "properties": {"zeta": {"type": "string"},
                                                                        "alpha": {"type": "integer"}}}}}],
            "messages": [{"role": "user", "content": "Book it."},
                         {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                          "function": {"name": "book", "arguments": '{"zeta": "x", "alpha": 2}'}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": '{"z": 1, "a": 2}'},
                         {"role": "assistant", "content": "Booked."}]}
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps(body) + b"\n")
    job = _write_job(tmp_path, [str(source)], {"template": "chatml"})
    result = run_job(load_config(job), progress=False)
    (row,) = pq.read_table(result.shards[0]).to_pylist()
    conv = json.loads(row["conversation"])
    assert list(conv["messages"][1]["blocks"][0]["arguments"]) == ["zeta", "alpha"]
    assert list(conv["tools"][0]["parameters"]["properties"]) == ["zeta", "alpha"]
    assert list(conv) == [k for k in Conversation.__struct_fields__ if k in conv]


@pytest.mark.parametrize("name", ["openai_chat.jsonl", "anthropic_requests.jsonl", "gemini.jsonl",
                                  "openai_responses.json"])
def test_convert_to_canonical_reads_back_into_every_command(tmp_path, name, capsys):
    source = ROOT / "data" / name
    lines = tmp_path / "canonical.jsonl"
    assert main(["convert", str(source), "--to", "canonical", "--no-original", "-o", str(lines)]) == 0
    bodies = tmp_path / "bodies.jsonl"
    assert main(["convert", str(source), "--to", "canonical", "--bodies-only", "-o", str(bodies)]) == 0
    provider = json.loads(lines.read_text().splitlines()[0])["from"]
    capsys.readouterr()

    def converted(path: Path, *extra: str) -> list:
        out = tmp_path / "out.jsonl"
        assert main(["convert", str(path), "--to", provider, "--bodies-only", "-o", str(out), *extra]) == 0
        return [json.loads(line) for line in out.read_text().splitlines()]

    direct = converted(source)
    assert converted(lines) == direct and converted(bodies, "--from", "canonical") == direct
    for command in (["validate", str(lines)], ["render", str(bodies), "--template", "chatml", "--record", "all",
                                                "--json"]):
        capsys.readouterr()
        original = main([*command[:1], str(source), *command[2:]])
        first = capsys.readouterr().out
        assert main(command) == original
        again = capsys.readouterr().out
        if command[0] == "render":
            strip = lambda text: [{k: v for k, v in json.loads(l).items() if k != "source"}  # noqa: E731
                                  for l in text.splitlines()]
            ok = [v for v in strip(first) if "error" not in v]
            assert ok and [v for v in strip(again) if "error" not in v] == ok


def test_a_broken_canonical_record_names_the_path(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "blocks": [{"type": "text", "text": 3}]}]}) + "\n")
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr()
    assert "$.messages[0].blocks[0].text" in out.out + out.err
