"""Shared fixtures for render tests: the built-in tokenizers, the ChatML template, the official chat
templates (from the trl 1.16.0 wheel, fetched with pip once into pytest's cache), the goldens switch.
Plain helpers live in render_support.py (importable by name; conftest modules are not)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from render_support import OFFICIAL


@pytest.fixture(scope="session")
def qwen():
    from pipeline.render import load_tokenizer

    return load_tokenizer("qwen2.5")


@pytest.fixture(scope="session")
def qwen_hf(qwen):
    """A transformers PreTrainedTokenizerFast over the same tokenizer, for apply_chat_template."""
    return qwen.to_transformers()


@pytest.fixture(scope="session")
def chatml():
    from pipeline.render import load_template

    return load_template("chatml")


def _trl_wheel(cache: Path) -> Path:
    found = sorted(cache.glob("trl-1.16.0-*.whl"))
    if found:
        return found[0]
    result = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "trl==1.16.0",
                             "-d", str(cache)], capture_output=True, text=True, timeout=300)
    found = sorted(cache.glob("trl-1.16.0-*.whl"))
    if result.returncode != 0 or not found:
        message = f"could not download trl==1.16.0 for the official templates: {result.stderr.strip()[-300:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found[0]


@pytest.fixture(scope="session")
def official(request):
    """official("qwen2_5.jinja") -> the template text, sha256-checked."""
    pytest_cache = getattr(request.config, "cache", None)
    if pytest_cache is not None:
        cache = Path(pytest_cache.mkdir("sftprep-trl-1.16.0"))
    else:  # cacheprovider disabled
        from pipeline.render.builtin_tokenizers import cache_dir

        cache = cache_dir() / "test-downloads"
        cache.mkdir(parents=True, exist_ok=True)

    def get(name: str) -> str:
        with zipfile.ZipFile(_trl_wheel(cache)) as wheel:
            data = wheel.read(f"trl/chat_templates/{name}")
        digest = hashlib.sha256(data).hexdigest()
        assert digest == OFFICIAL[name], f"{name}: sha256 {digest}, expected {OFFICIAL[name]}"
        return data.decode("utf-8")

    return get


@pytest.fixture(scope="session")
def regen_goldens() -> bool:
    """Goldens are rewritten only when asked explicitly: SFTPREP_REGEN_GOLDENS=1."""
    return os.environ.get("SFTPREP_REGEN_GOLDENS") == "1"
