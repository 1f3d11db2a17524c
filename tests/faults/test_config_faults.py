"""Config values a run cannot honour are usage errors (exit 2) that name the key, before any work: the
output directory is not even created."""

from __future__ import annotations

import json

import pytest
from fault_support import CHAT, clean, jsonl, sftprep

BAD = {  # name: (section, the bad line, what the message must name)
    "batch_size_1e20": ("run", "batch_size = 100000000000000000000", "run.batch_size"),
    "workers_100000": ("run", "workers = 100000", "run.workers"),
    "negative_workers": ("run", "workers = -1", "run.workers"),
    "negative_record_size": ("input", "max_record_mb = -5", "input.max_record_mb"),
    "zero_batch": ("run", "batch_size = 0", "run.batch_size"),
    "negative_max_tokens": ("shape", "max_tokens = -1", "shape.max_tokens"),
    "negative_shard_size": ("output", "shard_size = -10", "output.shard_size"),
    "negative_cache": ("render", "segment_cache_tokens = -1", "segment_cache_tokens"),
    "klingon_format": ("input", 'format = "klingon"', "input.format"),
    "unknown_shape": ("input", 'shape = "scroll"', "input.shape"),
    "unknown_drop_code": ("shape", 'drop_codes = ["no_such_code"]', "shape.drop_codes"),
    "unknown_export": ("convert", 'to = "klingon"', "convert.to"),
    "unknown_severity_code": ("validate.severity", 'no_such_code = "off"', "no_such_code"),
    "unknown_template": ("render", 'template = "no-such-template"', "no-such-template"),
    "wrong_type": ("run", 'workers = "many"', "workers"),
    "unknown_key": ("run", "workerz = 2", "run.workerz"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_value_is_a_usage_error_naming_it_before_any_work(tmp_path, name):
    section, line, named = BAD[name]
    src = jsonl(tmp_path / "in.jsonl", CHAT)
    out = tmp_path / "out"
    sections = {"input": [f'paths = ["{src}"]'], "output": [f'dir = "{out}"']}
    sections.setdefault(section, []).append(line)
    config = tmp_path / "job.toml"
    config.write_text("".join(f"[{name}]\n" + "\n".join(lines) + "\n" for name, lines in sections.items()))
    done = clean(sftprep("run", str(config), "--quiet"), 2)
    assert named in done.err, done.err
    assert not out.exists()


def test_a_config_that_is_not_toml_is_a_usage_error(tmp_path):
    config = tmp_path / "job.toml"
    config.write_text("[run\n")
    assert "not valid TOML" in clean(sftprep("run", str(config), "--quiet"), 2).err


def test_a_config_path_that_is_a_directory_or_binary_is_a_usage_error(tmp_path):
    done = clean(sftprep("run", str(tmp_path), "--quiet"), 2)
    assert "cannot be read" in done.err and str(tmp_path) in done.err
    binary = tmp_path / "job.toml"
    binary.write_bytes(bytes(range(256)) * 4)
    done = clean(sftprep("run", str(binary), "--quiet"), 2)
    assert "cannot be read" in done.err or "not valid TOML" in done.err
    nul = tmp_path / "nul.toml"
    nul.write_bytes(b"[run]\x00\nworkers = 1\n")
    clean(sftprep("run", str(nul), "--quiet"), 2)


def test_command_line_values_are_checked_like_the_file(tmp_path):
    src = jsonl(tmp_path / "in.jsonl", CHAT)
    done = clean(sftprep("run", "--input", str(src), "--output", str(tmp_path / "o"), "--workers", "100000"), 2)
    assert "run.workers" in done.err
    done = clean(sftprep("validate", str(src), "--severity", "no_such_code=off"), 2)
    assert "no_such_code" in done.err
    assert json.loads(clean(sftprep("validate", str(src), "--json"), 0).out)["issues"] == []
