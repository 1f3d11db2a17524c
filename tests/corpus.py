"""Finding the third-party corpus and walking its records, for tests.

The corpus lives outside the project (`SFTPREP_CORPUS`, default `../shared/corpus` from the repo root).
Tests that need it skip when it is absent, except under CI=true, where its absence fails them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("SFTPREP_CORPUS", ROOT.parent / "shared" / "corpus")).resolve()
CASSETTE_FOLDERS = ("pydantic_ai_anthropic", "pydantic_ai_openai_chat", "pydantic_ai_openai_responses",
                    "pydantic_ai_google")


def corpus_available() -> bool:
    # An empty or unrelated folder is no corpus: its manifest says it is one.
    return (CORPUS / "MANIFEST.md").is_file()


def require_corpus() -> Path:
    if not corpus_available():
        if os.environ.get("CI") == "true":
            pytest.fail(f"corpus not found at {CORPUS} (set SFTPREP_CORPUS)")
        pytest.skip(f"corpus not found at {CORPUS} (set SFTPREP_CORPUS)")
    return CORPUS


def iter_interactions(folders: tuple[str, ...] = CASSETTE_FOLDERS) -> Iterator[tuple[str, dict]]:
    """(id, interaction) for every HTTP exchange recorded in the cassette folders."""
    for folder in folders:
        for path in sorted((CORPUS / folder).glob("*.json")):
            data = json.loads(path.read_text())
            for i, interaction in enumerate(data.get("interactions", [])):
                yield f"{folder}/{path.name}#{i}", interaction


def request_bodies() -> list[tuple[str, Any]]:
    """Every request body in the cassettes that is a JSON object (some are multipart uploads or text)."""
    if not corpus_available():
        return []
    return [(key, it["request"]["body"]) for key, it in iter_interactions()
            if isinstance(it["request"].get("body"), dict)]


def response_bodies() -> list[tuple[str, Any]]:
    """Every parsed (non-streamed) JSON response body in the cassettes and the vercel response files."""
    if not corpus_available():
        return []
    out = [(key, it["response"]["body"]) for key, it in iter_interactions()
           if isinstance(it["response"].get("body"), dict)]
    for folder in ("vercel_ai_anthropic", "vercel_ai_google", "vercel_ai_openai_chat", "vercel_ai_openai_responses"):
        for path in sorted((CORPUS / folder).glob("*.json")):
            body = json.loads(path.read_text())
            if isinstance(body, dict):
                out.append((f"{folder}/{path.name}", body))
    return out


def tau_bench_trajectories() -> list[tuple[str, list]]:
    if not corpus_available():
        return []
    data = json.loads((CORPUS / "tau_bench_gpt4o_airline" / "gpt-4o-airline.json").read_text())
    return [(f"tau_bench#{i}", item["traj"]) for i, item in enumerate(data)]


def params(items: list[tuple[str, Any]]) -> list:
    """pytest parameters with readable ids; a single skipping (or, in CI, failing) one when empty.

    The placeholder carries the `corpus` marker, which conftest's setup hook turns into require_corpus():
    pytest >= 9 refuses fixtures (usefixtures) as marks of a single parameter."""
    if items:
        return [pytest.param(value, id=key) for key, value in items]
    return [pytest.param(None, id="no-corpus", marks=pytest.mark.corpus)]
