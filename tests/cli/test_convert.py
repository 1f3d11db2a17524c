"""`sftprep convert` as a user runs it: outputs, rejects, the summary line, exit codes, bad input."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from corpus import ROOT

CHAT = {"model": "gpt-4o-mini", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4C"},
    {"role": "assistant", "content": "4C in Oslo."}]}
ANTHROPIC_ERROR_RESULT = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": "boom"}]}]}


def sftprep(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, cwd=cwd)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_converts_in_input_order_with_ledger_and_summary(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(CHAT) + "\n" + json.dumps(ANTHROPIC_ERROR_RESULT) + "\n")
    out = tmp_path / "out.jsonl"
    done = sftprep("convert", str(src), "--to", "openai-chat", "-o", str(out))
    assert done.returncode == 0, done.stderr
    got = lines(out)
    assert [g["source"] for g in got] == [f"{src}:1", f"{src}:2"]
    assert got[0]["from"] == "openai-chat" and got[0]["body"] == CHAT and got[0]["ledger"] == []
    assert got[1]["from"] == "anthropic"
    assert any(e["kind"] == "folded" and "is_error" in e["reason"] for e in got[1]["ledger"])
    assert b"read 2, converted 2, rejected 0" in done.stderr


def test_strict_rejects_lossy_records_and_exits_1(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(CHAT) + "\n" + json.dumps(ANTHROPIC_ERROR_RESULT) + "\n")
    out, rejects = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    done = sftprep("convert", str(src), "--to", "openai-chat", "--strict", "-o", str(out), "--rejects", str(rejects))
    assert done.returncode == 1
    assert [g["source"] for g in lines(out)] == [f"{src}:1"]
    (reject,) = lines(rejects)
    assert reject["code"] == "strict_ledger" and reject["source"] == f"{src}:2"
    assert reject["record"] == ANTHROPIC_ERROR_RESULT and reject["path"].startswith("$.messages[2]")


def test_bad_input_is_rejected_with_file_line_and_path_and_the_rest_continues(tmp_path):
    unknown_block = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "Be brief.", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "hologram", "data": "x"}]}]}
    missing_field = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "content": "no id"}]}]}
    src = tmp_path / "mixed.jsonl"
    with open(src, "wb") as handle:
        handle.write(json.dumps(CHAT).encode() + b"\n")
        handle.write(b'{"messages": [ broken\n')
        handle.write(json.dumps({"transcript": "?"}).encode() + b"\n")
        handle.write(json.dumps(unknown_block).encode() + b"\n")
        handle.write(json.dumps(missing_field).encode() + b"\n")
        handle.write(b'{"model": "m", "messages": [{"role": "user", "content": "caf\xe9"}]}\n')
        handle.write(b'{"pad": "' + b"x" * (50 * 1024 * 1024) + b'"}\n')
        handle.write(json.dumps(CHAT).encode() + b"\n")
    out, rejects = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    done = sftprep("convert", str(src), "--to", "anthropic", "-o", str(out), "--rejects", str(rejects))
    assert done.returncode == 0, done.stderr
    assert [g["source"] for g in lines(out)] == [f"{src}:1", f"{src}:4", f"{src}:8"]
    got = {r["source"].rsplit(":", 1)[1]: r for r in lines(rejects)}
    assert got["2"]["code"] == "invalid_json"
    assert got["3"]["code"] == "unknown_shape"
    assert got["5"]["code"] == "invalid_record" and got["5"]["path"] == "$.messages[0].content[0]"
    assert "tool_use_id" in got["5"]["error"]
    assert got["6"]["code"] == "invalid_utf8"
    assert got["7"]["code"] == "record_too_large"
    assert b"read 8, converted 3, rejected 5" in done.stderr
    # The unknown block type is kept (as an opaque block) without --strict, refused with it.
    strict = sftprep("convert", str(src), "--to", "anthropic", "--strict", "-o", str(out), "--rejects", str(rejects))
    assert strict.returncode == 1
    assert {r["code"] for r in lines(rejects) if r["source"].endswith(":4")} == {"unknown_block"}


def test_json_arrays_gzip_bodies_only_and_canonical(tmp_path):
    src = tmp_path / "many.json.gz"
    with gzip.open(src, "wt") as handle:
        json.dump([CHAT, CHAT["messages"]], handle, indent=1)
    out = tmp_path / "bodies.jsonl"
    done = sftprep("convert", str(src), "--to", "gemini", "--bodies-only", "-o", str(out))
    assert done.returncode == 0, done.stderr
    bodies = lines(out)
    assert len(bodies) == 2 and all("contents" in b for b in bodies)
    canonical = sftprep("convert", str(src), "--to", "canonical")
    first = json.loads(canonical.stdout.splitlines()[0])
    assert first["body"]["original"] == CHAT  # the original record rides along by default
    assert first["body"]["meta"]["provider"] == "openai-chat"


@pytest.mark.parametrize("args,message", [
    (["convert", "data/", "--to", "klingon"], b"invalid choice"),
    (["convert", "nope.jsonl", "--to", "anthropic"], b"does not exist"),
    (["convert", "data/", "--to", "anthropic", "--from", "mystery"], b"invalid choice"),
])
def test_usage_errors_exit_2(args, message):
    done = sftprep(*args)
    assert done.returncode == 2 and message in done.stderr


def test_output_file_appears_only_when_complete(tmp_path):
    out = tmp_path / "out.jsonl"
    done = sftprep("convert", "data/", "--to", "anthropic", "-o", str(out))
    assert done.returncode == 0
    assert out.exists() and not list(tmp_path.glob(".*partial"))
