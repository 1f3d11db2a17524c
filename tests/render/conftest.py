"""Shared fixtures for render tests: the built-in tokenizers, the hand-written canonical conversations,
and the official chat templates (from the trl 1.16.0 wheel, fetched with pip once into pytest's cache)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pipeline.conversation import Conversation, from_json

FIXTURES = Path(__file__).parent / "fixtures"
GOLDENS = Path(__file__).parent / "goldens"

# sha256 of the official templates inside trl 1.16.0 (see ../shared/reference/REFERENCE.md).
OFFICIAL = {
    "qwen2_5.jinja": "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f",
    "qwen2_5_training.jinja": "0cd86fb80f520885e35040a8df321540e729d3358da41f27cf74d33103d94f62",
    "llama3_1.jinja": "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65",
    "llama3_2.jinja": "5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4",
    "gptoss.jinja": "a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146",
    "gptoss_training.jinja": "6adda7cea0f63ef14918be7f26100b324525b6185a8f06932914388ffaa52e32",
}


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def load_fixture(name: str) -> Conversation:
    return from_json((FIXTURES / f"{name}.json").read_bytes())


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
        from pipeline.render.tokenizers import cache_dir

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
