"""The Ray engine gives the local engine's outputs byte for byte, and fails fast and clearly when Ray is
missing or its address is wrong. Tests marked `ray` start a local Ray instance; every Ray process they
start must be gone when they end."""

from __future__ import annotations

import glob
import http.server
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from corpus import ROOT, require_corpus
from pipeline.run import ray_engine
from pipeline.run.config import load_config
from pipeline.errors import ConfigError
from pipeline.ingest import expand_paths, iter_raw
from pipeline.run.ray_engine import execute_ray
from pipeline import run_job

DATA = ROOT / "data"
COMPARED = ("rejects.jsonl", "stats.json")


def _ray():
    """The ray module; ray is in the dev extra, so under CI its absence fails instead of skipping."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("ray is not installed, but the dev extra includes it (pip install -e '.[dev]')")
        pytest.skip("ray is not installed: pip install sftprep[ray]")
    return ray


def _job(out: Path, paths: list[str], **overrides):
    settings = {"input.paths": paths, "output.dir": str(out), "run.workers": 1}
    settings.update(overrides)
    return load_config(ROOT / "configs" / "default.toml", settings)


def _assert_same_outputs(local: Path, ray_out: Path) -> None:
    shards = sorted(p.name for p in local.glob("data-*"))
    assert shards and shards == sorted(p.name for p in ray_out.glob("data-*"))
    for name in (*shards, *COMPARED):
        assert (ray_out / name).read_bytes() == (local / name).read_bytes(), name


def _default_toml(ray_address: str) -> str:
    """configs/default.toml with its `[run] ray_address` set."""
    text = (ROOT / "configs" / "default.toml").read_text()
    changed, count = re.subn(r'(?m)^ray_address = "[^"]*"', f'ray_address = "{ray_address}"', text)
    assert count == 1
    return changed


def _ray_descendants(name: str = "ray") -> list[str]:
    """Live processes started (directly or not) by this one whose program or script names `name`."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    parents: dict[int, int] = {}
    states: dict[int, str] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        states[pid], parents[pid] = fields[0], int(fields[1])
    mine, found = {os.getpid()}, True
    while found:
        found = False
        for pid, ppid in parents.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                found = True
    out = []
    for pid in sorted(mine - {os.getpid()}):
        if states.get(pid) == "Z":
            continue
        try:
            argv = (proc / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        # gcs_server, raylet, "ray::<actor>" workers, python .../ray/.../agent.py: Ray in the program or
        # script name (a multiprocessing helper may carry ray's paths further down its command line).
        if any(name in arg for arg in argv[:2]):
            out.append(f"{pid}: {' '.join(argv)[:120]}")
    return out


def _assert_no_ray_processes_left(timeout: float = 20.0, name: str = "ray") -> None:
    deadline = time.monotonic() + timeout
    while (left := _ray_descendants(name)) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not left, f"Ray processes still running: {left}"


def corpus_slice(per_folder: int = 6) -> list[str]:
    """A few recordings of every provider, single responses, and a Claude Code session."""
    root = require_corpus()
    paths = []
    for folder in ("pydantic_ai_anthropic", "pydantic_ai_openai_chat", "pydantic_ai_openai_responses",
                   "pydantic_ai_google", "vercel_ai_anthropic", "vercel_ai_google", "vercel_ai_openai_responses",
                   "vercel_ai_openai_chat"):
        # Names like "...[anthropic].json" are taken literally, not as glob patterns.
        paths += [glob.escape(str(p)) for p in sorted((root / folder).glob("*.json"))[:per_folder]]
    paths.append(glob.escape(str(root / "claude_code_spotter_sessions" / "short.jsonl")))
    return paths


# --- same outputs as the local engine ------------------------------------------------------------

@pytest.mark.ray
def test_data_same_bytes_as_local_and_own_instance_shut_down(tmp_path):
    ray = _ray()
    assert not ray.is_initialized()
    local = run_job(_job(tmp_path / "local", [str(DATA)]), progress=False)
    # Batches of 3 over two actors: results come back out of order unless the engine reorders them.
    remote = run_job(_job(tmp_path / "ray", [str(DATA)], **{"run.engine": "ray", "run.workers": 2,
                                                             "run.batch_size": 3}), progress=False)
    assert remote.stats.read == local.stats.read > 0 and remote.stats.rejected > 0
    _assert_same_outputs(local.output_dir, remote.output_dir)
    assert not ray.is_initialized(), "execute_ray shuts down the instance it started"
    _assert_no_ray_processes_left()


@pytest.fixture
def running_ray():
    """A local instance started by the caller, as a notebook or a Ray job would; stopped afterwards."""
    ray = _ray()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
    _assert_no_ray_processes_left()


@pytest.mark.ray
def test_corpus_slice_same_bytes_on_a_running_instance_left_running(tmp_path, running_ray):
    paths = corpus_slice()
    local = run_job(_job(tmp_path / "local", paths), progress=False)
    remote = run_job(_job(tmp_path / "ray", paths, **{"run.engine": "ray", "run.workers": 2,
                                                      "run.batch_size": 4}), progress=False)
    assert running_ray.is_initialized(), "an instance the caller started is the caller's to shut down"
    assert remote.stats.read == local.stats.read > 40
    assert remote.stats.written > 0 and remote.stats.balanced()
    _assert_same_outputs(local.output_dir, remote.output_dir)

    # Connecting by address from another process: the CLI, with ray_address in its config.
    gcs = running_ray.get_runtime_context().gcs_address
    config = tmp_path / "cluster.toml"
    config.write_text(_default_toml(gcs))
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config), "--quiet", "--engine", "ray",
                           "--workers", "1", "--input", str(DATA / "gemini.jsonl"), "--output",
                           str(tmp_path / "cli")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    local_gemini = run_job(_job(tmp_path / "local-gemini", [str(DATA / "gemini.jsonl")]), progress=False)
    _assert_same_outputs(local_gemini.output_dir, tmp_path / "cli")

    # The input is pulled lazily, never more than two batches per actor ahead of what was handed back,
    # and a consumer that stops early (Ctrl-C, a write error) leaves no actor behind.
    raws = [raw for raw in iter_raw(expand_paths([str(DATA)])) if raw.error is None]
    batches = [raws[i:i + 2] for i in range(0, len(raws), 2)]
    assert len(batches) > 6
    pulled = 0

    def source():
        nonlocal pulled
        for batch in batches:
            pulled += 1
            yield batch

    config = _job(tmp_path / "unused", [str(DATA)], **{"run.engine": "ray", "run.workers": 1})
    results = execute_ray(source(), config)
    returned = []
    for items, _ in results:
        assert pulled - len(returned) <= 2
        returned.append([item.source for item in items])
        if len(returned) == 3:
            break
    assert _ray_descendants(name="_StageActor")
    results.close()
    assert returned == [[raw.source for raw in batch] for batch in batches[:3]]
    assert pulled <= 3 + 2
    _assert_no_ray_processes_left(name="_StageActor")


# --- failing fast -------------------------------------------------------------------------------

def test_ray_missing_is_a_config_error_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install sftprep\[ray\]") as caught:
        run_job(_job(tmp_path / "out", [str(DATA)], **{"run.engine": "ray"}), progress=False)
    assert caught.value.code == "ray_missing"
    assert list((tmp_path / "out").iterdir()) == []  # not even a rejects file


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_server():
    """A loopback port that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.fixture
def http_server():
    """A loopback HTTP/1 server, like the Ray dashboard port a user might name by mistake."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _connect_error(tmp_path: Path, address: str) -> ConfigError:
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        next(execute_ray(iter([]), _job(tmp_path, [str(DATA)], **{"run.engine": "ray",
                                                                   "run.ray_address": address})))
    # Behaviour, not speed: Ray itself would keep retrying for a minute or more.
    assert time.monotonic() - started < 15, "a bad address fails in seconds, not after Ray's retries"
    assert caught.value.code == "ray_connect"
    return caught.value


def test_nothing_listening_at_ray_address(tmp_path):
    _ray()
    address = f"127.0.0.1:{_free_port()}"
    error = _connect_error(tmp_path, address)
    assert f"cannot connect to the Ray cluster at '{address}'" in error.message and "refused" in error.message


def test_silent_ray_address_times_out(tmp_path, silent_server, monkeypatch):
    _ray()
    monkeypatch.setattr(ray_engine, "CONNECT_TIMEOUT_S", 0.5)
    error = _connect_error(tmp_path, silent_server)
    assert "no answer within 0.5 s" in error.message


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_ray_address_of_something_else(tmp_path, http_server, scheme):
    _ray()
    error = _connect_error(tmp_path, scheme + http_server)
    assert "not as a Ray cluster" in error.message


@pytest.mark.parametrize("address", ["nonsense", "host:", ":6379", "host:port"])
def test_malformed_ray_address(tmp_path, address):
    _ray()
    assert "is not HOST:PORT" in _connect_error(tmp_path, address).message


def test_bad_address_from_the_cli_exits_2_without_outputs(tmp_path):
    _ray()
    config = tmp_path / "job.toml"
    config.write_text(_default_toml(f"127.0.0.1:{_free_port()}"))
    done = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config), "--quiet", "--engine", "ray",
                           "--output", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "cannot connect to the Ray cluster" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "stats.json").exists()
