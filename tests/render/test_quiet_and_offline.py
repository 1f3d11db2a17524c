"""No noise a user cannot act on: building a built-in tokenizer where PyTorch is absent prints nothing
(transformers' advice about PyTorch reads as a failure; only its tokenizer code is used), and a hub id
while the hub cannot be reached fails at once with the clear error, or loads from the hub cache,
without one network attempt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import constants
from huggingface_hub.errors import LocalEntryNotFoundError

from pipeline.errors import ConfigError
from pipeline.render import load_tokenizer
from pipeline.render.builtin_tokenizers import builtin_json

ROOT = Path(__file__).resolve().parents[2]
ADVICE = "PyTorch was not found"
NO_TORCH = "import sys; sys.modules['torch'] = None  # as on a machine without PyTorch\n"


def _python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "TRANSFORMERS_NO_ADVISORY_WARNINGS"}
    environ.update(SFTPREP_CACHE=str(tmp_path / "cache"), **env)  # an empty cache: the tokenizer is built
    return subprocess.run([sys.executable, "-c", NO_TORCH + code], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=300)


def test_building_a_builtin_tokenizer_without_pytorch_is_silent(tmp_path):
    done = _python("from pipeline.render import load_tokenizer\n"
                   "print(len(load_tokenizer('qwen2.5').encode('hello world')))", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2" and done.stderr == ""
    # The same machine prints the advice when transformers is imported without the setting (the check can fail).
    loud = _python("import transformers.convert_slow_tokenizer", tmp_path)
    assert ADVICE in loud.stderr
    # A user who asks for the advice still gets it.
    asked = _python("from pipeline.render.builtin_tokenizers import quiet_transformers; quiet_transformers()\n"
                    "import transformers.convert_slow_tokenizer", tmp_path, TRANSFORMERS_NO_ADVISORY_WARNINGS="")
    assert ADVICE in asked.stderr


@pytest.fixture
def unreachable_hub(monkeypatch):
    """The hub's address refuses connections; every hf_hub_download call is recorded."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    calls: list[dict] = []
    cached: dict[str, Path] = {}

    def download(repo_id, filename, **kwargs):
        calls.append({"repo_id": repo_id, "filename": filename, **kwargs})
        if kwargs.get("local_files_only") and (repo_id, filename) in cached:
            return str(cached[(repo_id, filename)])
        raise LocalEntryNotFoundError("not in the cache and not allowed to look online")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return calls, cached


def test_hub_id_unreachable_fails_at_once_with_the_clear_error(unreachable_hub):
    calls, _ = unreachable_hub
    with pytest.raises(ConfigError) as exc:
        load_tokenizer("someone/not-cached-tokenizer")
    assert exc.value.code == "unknown_tokenizer"
    assert "is a hub id, the hub cannot be reached (127.0.0.1: Connection refused)" in exc.value.message
    assert "valid offline: qwen2.5" in exc.value.message
    assert calls and all(call["local_files_only"] for call in calls)  # never an online attempt, so no retries


def test_hub_id_unreachable_uses_the_hub_cache(unreachable_hub):
    calls, cached = unreachable_hub
    _, path = builtin_json("qwen2.5")
    cached[("someone/cached-tokenizer", "tokenizer.json")] = path
    tokenizer = load_tokenizer("someone/cached-tokenizer")
    assert tokenizer.name == "someone/cached-tokenizer"
    assert tokenizer.encode("hello world") == load_tokenizer("qwen2.5").encode("hello world")
    assert all(call["local_files_only"] for call in calls)
