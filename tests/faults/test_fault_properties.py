"""Property: a real record from the corpus, mutated at any one place (a lone surrogate, a big integer,
deep nesting, a wrong type, a missing key) or truncated, between two intact records, goes through
convert, validate, render and run without a traceback or an internal error: each command exits 0 or
1, the mutated record is written or rejected at its own `FILE:LINE` with a JSON path, the accounting
balances, and the intact records come out as they do alone."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from fault_support import ANTHROPIC, CHAT, jsonl, run_job, run_outputs, sftprep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import corpus_available, request_bodies, response_bodies

MAX_RECORD = 100_000  # bytes: mutating is cheap, rendering megabytes is not


def _pool() -> list[Any]:
    if not corpus_available():
        return []
    bodies = [body for _, body in request_bodies() + response_bodies()]
    return [b for b in bodies if len(json.dumps(b)) <= MAX_RECORD]


POOL = _pool()


def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in the value: the paths of all its nodes."""
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_places(child, (*path, key)))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out.extend(_places(child, (*path, i)))
    return out


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for i in range(levels):
        value = [value] if i % 2 else {"d": value}
    return value


REPLACEMENTS = {
    "surrogate": "\ud800 lone",
    "big_int": 123456789012345678901234567890,
    "negative_big_int": -(1 << 70),
    "deep_150": _deep(150),
    "deep_60": _deep(60),
    "list": [1, "two", None],
    "object": {"unexpected": True},
    "number": 3.5,
    "null": None,
    "bool": False,
    "string": "surprise",
    "empty_string": "",
    "escape_text": "\x1b[2J\x00\u202e",
}


def _replace(record: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    parent = record
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return record


def _delete(record: Any, path: tuple) -> Any:
    if not path:
        return record
    parent = record
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return record


@st.composite
def mutated_lines(draw) -> bytes:
    record = json.loads(json.dumps(draw(st.sampled_from(POOL))))
    kind = draw(st.sampled_from([*REPLACEMENTS, "delete", "truncate"]))
    if kind == "truncate":
        data = json.dumps(record).encode()
        # At least one byte: an empty line is no record (readers skip blank lines), so "read" would not count it.
        return data[: draw(st.integers(1, len(data) - 1))]
    place = draw(st.sampled_from(_places(record)))
    record = _delete(record, place) if kind == "delete" else _replace(record, place, copy.deepcopy(REPLACEMENTS[kind]))
    # ensure_ascii writes a lone surrogate as the \ud800 escape a log would hold.
    return json.dumps(record, ensure_ascii=True).encode()


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """What each command makes of the intact records on their own."""
    base = tmp_path_factory.mktemp("alone")
    src = jsonl(base / "in.jsonl", CHAT, ANTHROPIC)
    return _outputs(base, src)


def _outputs(base: Path, src: Path) -> dict[str, Any]:
    converted = sftprep("convert", str(src), "--to", "gemini", "--rejects", str(base / "rejects.jsonl"))
    validated = sftprep("validate", str(src), "--json")
    rendered = sftprep("render", str(src), "--template", "chatml", "--record", "all", "--json")
    ran, out = run_job(base, src)
    for done in (converted, validated, rendered, ran):
        assert "Traceback" not in done.err and done.code in (0, 1), (done.code, done.err)
        assert "internal error" not in done.err + done.out.decode("utf-8", "replace"), done.err
    stats, rejects, rows = run_outputs(out)
    return {"convert": converted.lines(), "validate": validated.lines(), "render": rendered.lines(),
            "rejects": rejects, "rows": rows, "stats": stats}


def _by_line(items: list[dict], line: int) -> list[dict]:
    return [item for item in items if item["source"].split(":")[-1].split("#")[0] == str(line)]


def _strip_source(items: list[dict]) -> list[dict]:
    return [{k: v for k, v in item.items() if k not in ("source", "id")} for item in items]


@pytest.mark.skipif(not POOL and __import__("os").environ.get("CI") != "true", reason="no corpus")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(line=mutated_lines())
def test_a_mutated_record_never_breaks_a_command_nor_its_neighbours(tmp_path_factory, alone, line):
    base = tmp_path_factory.mktemp("mutated")
    src = jsonl(base / "in.jsonl", CHAT, line, ANTHROPIC)
    got = _outputs(base, src)
    assert got["stats"]["records"]["read"] == 3
    for command in ("convert", "validate", "render"):
        assert {item["source"].rsplit(":", 1)[1].split("#")[0] for item in got[command]} <= {"1", "2", "3"}
        for intact, alone_line in ((1, 1), (3, 2)):
            assert _strip_source(_by_line(got[command], intact)) == _strip_source(_by_line(alone[command], alone_line))
    mutated_rejects = _by_line(got["rejects"], 2)
    assert all(r["path"].startswith("$") and r["code"] for r in mutated_rejects)
    written = {r["source"] for r in got["rows"]}
    assert {f"{src}:1", f"{src}:3"} <= written | {r["source"] for r in got["rejects"]}
    assert len(_by_line(got["rows"], 1)) == len(_by_line(alone["rows"], 1))
