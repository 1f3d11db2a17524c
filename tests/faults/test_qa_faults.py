"""`sftprep qa` on damaged run outputs: a report that names what is broken and shows the rest, never a
traceback; and transcript text that reaches the terminal cannot drive it."""

from __future__ import annotations

import json
import shutil

import pytest
from fault_support import ANTHROPIC, CHAT, chat_variant, clean, jsonl, sftprep

ESCAPES = "clear \x1b[2J then a title \x1b]0;pwned\x07 and a bell \x07"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("qa")
    evil = json.loads(json.dumps(CHAT))
    evil["messages"][0]["content"] = ESCAPES
    evil["messages"][1]["tool_calls"][0]["function"]["name"] = "get\x1b[31mweather"
    src = jsonl(base / "in.jsonl", CHAT, evil, ANTHROPIC, b"{broken \x1b[2J", *(chat_variant(i) for i in range(40)))
    config = base / "job.toml"
    config.write_text(f'[input]\npaths = ["{src}"]\n[output]\ndir = "{base / "out"}"\nqa_report = false\n'
                      "shard_size = 20\n[run]\nworkers = 1\n")
    clean(sftprep("run", str(config), "--quiet"), 0)
    return base / "out"


@pytest.fixture(scope="module")
def rows(run_dir) -> int:
    """Rows of the undamaged run, as the report counts them."""
    return json.loads(clean(sftprep("qa", str(run_dir), "--json"), 0).out)["totals"]["rows"]


@pytest.fixture
def damaged(run_dir, tmp_path):
    copy = tmp_path / "out"
    shutil.copytree(run_dir, copy)
    return copy


def _qa(path) -> tuple[str, dict]:
    text = clean(sftprep("qa", str(path)), 0).out.decode()
    report = json.loads(clean(sftprep("qa", str(path), "--json"), 0).out)
    return text, report


def test_transcript_escapes_are_shown_as_symbols_in_the_terminal_report(run_dir):
    text, _ = _qa(run_dir)
    assert "\x1b" not in text and "\x07" not in text
    assert "␛[2J" in text and "get␛[31mweather" in text


def test_a_truncated_stats_json_is_named_and_the_files_still_counted(damaged, rows):
    stats = damaged / "stats.json"
    stats.write_bytes(stats.read_bytes()[:100])
    text, report = _qa(damaged)
    assert any(str(stats) in note and "line" in note for note in report["notes"])
    assert report["totals"]["read"] is None and report["totals"]["rows"] == rows
    assert str(stats) in text


def test_stats_json_of_the_wrong_shape_is_named(damaged):
    (damaged / "stats.json").write_text(json.dumps({"records": {"read": "many"}, "stages": []}))
    _, report = _qa(damaged)
    assert any("stats.json" in note and "$.records" in note for note in report["notes"])


def test_a_corrupt_rejects_line_is_named_and_the_other_lines_shown(damaged):
    rejects = damaged / "rejects.jsonl"
    lines = rejects.read_bytes().splitlines()
    assert len(lines) >= 2
    rejects.write_bytes(b"\n".join([lines[0], b'{"source": "cut', b"[1, 2]", *lines[1:]]) + b"\n")
    _, report = _qa(damaged)
    assert any(f"{rejects}:2" in note for note in report["notes"])
    assert any(f"{rejects}:3" in note and "not an object" in note for note in report["notes"])
    assert report["totals"]["reject_lines"] == len(lines)


def test_a_truncated_parquet_shard_is_named_and_the_others_counted(damaged, rows):
    shards = sorted(damaged.glob("data-*.parquet"))
    assert len(shards) == 3
    shards[1].write_bytes(shards[1].read_bytes()[: shards[1].stat().st_size // 2])
    _, report = _qa(damaged)
    assert any(str(shards[1]) in note for note in report["notes"])
    assert report["totals"]["rows"] == rows - 20  # shard_size 20: the middle shard is full


def test_a_foreign_jsonl_beside_the_outputs_is_left_out_by_name(damaged, rows):
    foreign = damaged / "notes.jsonl"
    foreign.write_text(json.dumps({"hello": "world"}) + "\n")
    _, report = _qa(damaged)
    assert any(str(foreign) in note and "not a data shard" in note for note in report["notes"])
    assert report["totals"]["rows"] == rows
