"""Faults of files and streams: an array element over the size limit, strings cut at every chunk
boundary, a file gone since it was listed, names that are not UTF-8, outputs that are directories or
under files, stdout closed or full, the disk full mid-run."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
from fault_support import ANTHROPIC, CHAT, chat_variant, clean, jsonl, run_job, run_outputs, sftprep, sftprep_process
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline.run.job
from pipeline.ingest import json_array, read_records
from pipeline.run.lock import OutputLock
from pipeline.run.writers import ShardWriter

from corpus import ROOT


def test_an_array_element_over_the_limit_is_counted_and_the_rest_is_read(tmp_path):
    big = json.loads(json.dumps(CHAT))
    big["messages"][0]["content"] = "x" * (1024 * 1024 + 10)
    src = tmp_path / "five.json"
    src.write_text(json.dumps([CHAT, big, ANTHROPIC, big, {"n": 1}], indent=1))
    done, out = run_job(tmp_path, src, input_extra="max_record_mb = 1\n")
    clean(done, 0)
    stats, rejects, rows = run_outputs(out)
    assert stats["records"]["read"] == 5
    assert [r["code"] for r in rejects].count("record_too_large") == 2
    assert "1,048,576" in next(r["message"] for r in rejects if r["code"] == "record_too_large")
    assert len(rows) == 2  # CHAT and ANTHROPIC; {"n": 1} is rejected as no conversation


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\\n[]{}é', max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text('k"\\', max_size=3), children, max_size=3),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(json_values, max_size=6), st.integers(1, 9), st.booleans())
def test_the_array_splitter_agrees_with_a_json_parser_at_any_chunk_size(tmp_path_factory, elements, chunk, indent):
    path = tmp_path_factory.mktemp("arr") / "a.json"
    path.write_text(json.dumps(elements, indent=1 if indent else None, ensure_ascii=False), encoding="utf-8")
    old = json_array.CHUNK
    json_array.CHUNK = chunk  # every string and escape cut somewhere
    try:
        got = list(read_records(path))
    finally:
        json_array.CHUNK = old
    assert [r.value for r in got] == elements and all(r.error is None for r in got)


def test_a_long_string_split_over_many_chunks_reads_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(json_array, "CHUNK", 4096)
    text = 'quote " and backslash \\ ' * 20_000  # ~500 KB of escapes crossing chunk ends
    src = tmp_path / "long.json"
    src.write_text(json.dumps([{"s": text}, {"t": 1}]))
    assert [r.value for r in read_records(src)] == [{"s": text}, {"t": 1}]


def test_a_file_gone_since_it_was_listed_is_one_reject(tmp_path, monkeypatch):
    good = jsonl(tmp_path / "good.jsonl", CHAT)
    gone = jsonl(tmp_path / "gone.jsonl", ANTHROPIC)
    listed = pipeline.run.job.expand_paths([str(gone), str(good)])
    gone.unlink()
    monkeypatch.setattr(pipeline.run.job, "expand_paths", lambda inputs: listed)
    done, out = run_job(tmp_path, good)
    clean(done, 0)
    _, rejects, rows = run_outputs(out)
    assert [(r["code"], r["source"].split(":")[0]) for r in rejects] == [("unreadable_file", str(gone))]
    assert [r["source"] for r in rows] == [f"{good}:1"]


def test_a_name_that_is_not_utf8_is_escaped_in_every_output(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    raw = os.fsencode(folder) + b"/caf\xe9.jsonl"
    with open(raw, "wb") as handle:
        handle.write(json.dumps(CHAT).encode() + b"\n{broken\n")
    done, out = run_job(tmp_path, folder)
    clean(done, 0)
    _, rejects, rows = run_outputs(out)
    assert rows[0]["source"] == f"{folder}/caf\\xe9.jsonl:1" and rejects[0]["source"] == f"{folder}/caf\\xe9.jsonl:2"
    converted = clean(sftprep("convert", str(folder), "--to", "gemini"), 0)
    assert converted.lines()[0]["source"] == f"{folder}/caf\\xe9.jsonl:1"


def test_outputs_that_cannot_be_files_are_usage_errors_before_work(tmp_path):
    src = jsonl(tmp_path / "in.jsonl", CHAT)
    done = clean(sftprep("convert", str(src), "--to", "gemini", "-o", str(tmp_path)), 2)
    assert "is a directory" in done.err
    done = clean(sftprep("render", str(src), "--template", "chatml", "--html", str(src / "page.html")), 2)
    assert f"'{src}' is not a directory" in done.err and not list(tmp_path.glob(".*partial"))
    done = clean(sftprep("run", "--input", str(src), "--output", str(src / "out"), "--quiet"), 2)
    assert "cannot write to output directory" in done.err


@pytest.mark.parametrize("command", [("convert", "--to", "gemini"), ("validate",), ("render", "--template", "chatml")])
def test_stdout_full_or_closed_is_a_clean_error(tmp_path, command):
    src = jsonl(tmp_path / "in.jsonl", CHAT)
    with open("/dev/full", "wb") as full:
        done = clean(sftprep_process(command[0], str(src), *command[1:], stdout=full), 1)
    assert "No space left on device" in done.err
    closed = subprocess.run([sys.executable, "-m", "pipeline", command[0], str(src), *command[1:]], cwd=ROOT,
                            capture_output=False, stderr=subprocess.PIPE, stdout=None, timeout=120,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 1 and b"Traceback" not in closed.stderr, closed.stderr.decode()
    assert b"stdout is closed" in closed.stderr


def test_the_disk_full_mid_run_is_a_clean_error_without_half_files(tmp_path, monkeypatch):
    src = jsonl(tmp_path / "in.jsonl", *(chat_variant(i) for i in range(5)))
    real = ShardWriter.write
    written = []

    def full_after_two(self, row):
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(row)
        real(self, row)

    monkeypatch.setattr(ShardWriter, "write", full_after_two)
    done, out = run_job(tmp_path, src)
    clean(done, 1)
    assert "No space left on device" in done.err
    assert [p.name for p in out.iterdir() if p.name.endswith(".partial")] == []
    full = clean(sftprep("convert", str(src), "--to", "gemini", "-o", "/dev/full"), 1)
    assert "No space left on device" in full.err


def test_empty_blank_and_bom_files_are_accounted(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.json"
    blank.write_bytes(b"  \n\n ")
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(CHAT).encode() + b"\n" + json.dumps(ANTHROPIC).encode() + b"\n")
    done, out = run_job(tmp_path, empty, blank, bom)
    clean(done, 0)
    stats, rejects, rows = run_outputs(out)
    # The byte order mark is the file's, not its first record's: both records are read.
    assert sorted(r["source"] for r in rows) == [f"{bom}:1", f"{bom}:2"]
    assert {r["source"] for r in rejects} == {f"{blank}:1"}


def test_a_second_run_into_a_directory_in_use_refuses_at_start_and_touches_nothing(tmp_path):
    src = jsonl(tmp_path / "in.jsonl", CHAT)
    done, out = run_job(tmp_path, src)
    clean(done, 0)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with OutputLock(out):  # as a run in progress holds it (another process, or this one)
        second = clean(sftprep("run", str(tmp_path / "job.toml"), "--quiet"), 2)
    assert "in use by another run" in second.err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    clean(sftprep("run", str(tmp_path / "job.toml"), "--quiet"), 0)  # free again once it ends
