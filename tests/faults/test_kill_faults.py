"""Cause 3: no process outlives its run. SIGKILL or SIGTERM the parent of a multi-worker run mid-way:
within a second no worker is alive and nothing holds the caller's pipe open (`sftprep run | tail` ends);
SIGTERM is handled as Ctrl-C (exit 143, no `.partial` left); a rerun into the same directory is
byte-identical to an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_support import ANTHROPIC, CHAT

from corpus import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A job of a few seconds on two workers, and the bytes of its uninterrupted outputs."""
    base = tmp_path_factory.mktemp("kill")
    records = []
    for i in range(1500):
        record = json.loads(json.dumps(CHAT if i % 2 else ANTHROPIC))
        record["messages"][0]["content"] = f"question {i}: " + "words " * (i % 40)
        records.append(json.dumps(record))
    records[7] = "{broken"  # rejects too, so every output file is compared
    (base / "in.jsonl").write_text("\n".join(records) + "\n")
    config = base / "job.toml"
    config.write_text(f'[input]\npaths = ["{base / "in.jsonl"}"]\n[output]\ndir = "{base / "out"}"\n'
                      'shard_size = 500\nqa_report = false\n[run]\nworkers = 2\nbatch_size = 16\n')
    subprocess.run([sys.executable, "-m", "pipeline", "run", str(config), "--quiet"], cwd=ROOT, check=True,
                   capture_output=True, timeout=300)
    return config, base / "out", _snapshot(base / "out")


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's wait is missing


def _start_and_wait_for_workers(config: Path) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--quiet"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.05)
        workers = [pid for pid in _children(proc.pid) if _alive(pid)]
    assert len(workers) >= 2, "the workers never started"
    time.sleep(0.5)  # well into the run
    assert proc.poll() is None, "the run ended before it could be interrupted: give it more input"
    return proc, workers


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_interrupted_parent_takes_its_workers_and_a_rerun_is_byte_identical(job, sig):
    config, out, expected = job
    proc, workers = _start_and_wait_for_workers(config)
    os.kill(proc.pid, sig)
    # The pipe closes once every process holding it is gone: the parent and all its workers.
    stdout, stderr = proc.communicate(timeout=30)
    time.sleep(1.0)
    assert [pid for pid in workers if _alive(pid)] == []
    if sig == signal.SIGTERM:
        assert proc.returncode == 143 and b"Traceback" not in stderr, stderr.decode()
        assert b"terminated" in stderr
        assert not list(out.glob(".*.partial"))
    else:
        assert proc.returncode == -signal.SIGKILL
    rerun = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config), "--quiet"], cwd=ROOT,
                           capture_output=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr.decode()
    got = _snapshot(out)
    assert sorted(got) == sorted(expected)
    assert [name for name in expected if got[name] != expected[name]] == []
