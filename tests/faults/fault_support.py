"""What the fault tests share: the command run in this process (fast) or as a subprocess (signals,
closed stdout), well-formed records to surround each fault with, and the checks every fault must pass."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from corpus import ROOT

from pipeline.cli.main import main

CHAT = {"model": "gpt-4o-mini", "messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4C"},
    {"role": "assistant", "content": "4C in Oslo."}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]}

ANTHROPIC = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"n": 1}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "done"}]}],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}]}

# A user template (ChatML-shaped, without generation markers) and a record it renders.


def chat_variant(i: int) -> dict:
    """CHAT asking about another day: distinct content, so neither dedup nor session folding merges them."""
    messages = [dict(CHAT["messages"][0], content=f"Weather in Oslo on day {i}?"), *CHAT["messages"][1:]]
    return dict(CHAT, messages=messages)


CHATML_LIKE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
               "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PLAIN = {"messages": [{"role": "user", "content": "yo"}, {"role": "assistant", "content": "hey"}]}


@dataclass
class Done:
    code: int
    out: bytes
    err: str

    def lines(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def sftprep(*args: str) -> Done:
    """The command, in this process: exit status, stdout bytes, stderr text."""
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
    stdout.flush()
    return Done(code, out.getvalue(), err.getvalue())


def sftprep_process(*args: str, stdout=subprocess.PIPE, timeout: float = 120) -> Done:
    done = subprocess.run([sys.executable, "-m", "pipeline", *args], stdout=stdout, stderr=subprocess.PIPE,
                          cwd=ROOT, timeout=timeout)
    return Done(done.returncode, done.stdout or b"", done.stderr.decode("utf-8", "replace"))


def clean(done: Done, code: int) -> Done:
    """No traceback, the expected exit status."""
    assert "Traceback" not in done.err, done.err
    assert done.code == code, (done.code, done.err)
    return done


def jsonl(path: Path, *records: object) -> Path:
    """Records one per line; a `bytes` item is written as that line, as is (the fault itself)."""
    with open(path, "wb") as handle:
        for record in records:
            handle.write(record if isinstance(record, bytes) else json.dumps(record).encode())
            handle.write(b"\n")
    return path


def run_job(tmp_path: Path, *inputs: Path, extra: str = "", input_extra: str = "") -> tuple[Done, Path]:
    """`sftprep run` on `inputs` with one worker (in this process) and JSONL data; `extra` adds
    sections after [run], `input_extra` keys to [input]."""
    out = tmp_path / "out"
    config = tmp_path / "job.toml"
    config.write_text(f"[input]\npaths = {json.dumps([str(p) for p in inputs])}\n{input_extra}"
                      f"[output]\ndir = {json.dumps(str(out))}\nformat = \"jsonl\"\nqa_report = false\n"
                      f"[run]\nworkers = 1\n{extra}")
    return sftprep("run", str(config), "--quiet"), out


def run_outputs(out: Path) -> tuple[dict, list[dict], list[dict]]:
    """stats.json, the rejects and the written rows of a JSONL run; the accounting must balance."""
    stats = json.loads((out / "stats.json").read_text())
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for shard in sorted(out.glob("data-*.jsonl")) for line in shard.read_text().splitlines()]
    records = stats["records"]
    assert records["balanced"] and records["read"] == records["written"] + records["rejected"] + records["filtered"]
    assert len(rejects) == records["rejected"] and len(rows) == records["written"]
    assert not list(out.glob(".*.partial"))
    return stats, rejects, rows
