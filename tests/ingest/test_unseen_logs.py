"""Logs shaped as real sources write them, outside the corpus: file names holding glob characters,
Gemini chunk arrays inside exchanges, bare message lists in one `.json` file, `--shape` everywhere."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.conversation import Text, ToolCall, ToolResult
from pipeline.errors import ConfigError
from pipeline.ingest import expand_paths, iter_parsed, read_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "unseen_logs"
ROOT = Path(__file__).resolve().parents[2]


def _sftprep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=ROOT, capture_output=True, text=True)


def test_an_existing_path_is_read_whatever_its_name_holds(tmp_path):
    cassette = FIXTURES / "cassette[vercel].json"
    assert expand_paths([str(cassette)]) == [cassette]
    # A pattern that is no existing path is still a glob: `[v]` is a character class here.
    (tmp_path / "av.json").write_text("{}")
    assert expand_paths([str(tmp_path / "a[v].json")]) == [tmp_path / "av.json"]
    with pytest.raises(ConfigError, match="no input files match"):
        expand_paths([str(tmp_path / "b[v].json")])


def test_a_bracketed_file_name_on_the_command_line_converts():
    done = _sftprep("convert", str(FIXTURES / "cassette[vercel].json"), "--to", "canonical", "--no-original")
    assert done.returncode == 0, done.stderr
    assert "read 2, converted 2, rejected 0" in done.stderr


@pytest.mark.parametrize("index", [0, 1], ids=["parsed-array", "array-text"])
def test_gemini_chunk_array_body_is_reassembled_like_sse(index):
    parsed = [p for p in iter_parsed([FIXTURES / "cassette[vercel].json"])]
    item = parsed[index]
    assert item.error is None, item.error
    conv = item.conversation
    answer = conv.messages[-1]
    assert answer.role == "assistant"
    texts = [b.text for b in answer.blocks if isinstance(b, Text)]
    calls = [b for b in answer.blocks if isinstance(b, ToolCall)]
    assert "".join(texts) == "Let me look that up."
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"city": "Oslo", "unit": "celsius"})]
    assert conv.meta.stop_reason == "STOP" and conv.meta.response_id == "Xq1rZ-abc"
    assert conv.meta.usage["candidatesTokenCount"] == 14  # the last chunk's usage, as for SSE


def test_a_cut_chunk_array_is_rejected_at_its_chunk():
    record = json.loads((FIXTURES / "cassette[vercel].json").read_text())["interactions"][0]
    record["response"]["body"] = record["response"]["body"][:2]  # no finishReason: cut short
    from pipeline.ingest import parse_record
    with pytest.raises(Exception) as caught:
        parse_record(record, "x:1")
    assert caught.value.code == "truncated_stream"
    assert caught.value.path.startswith("$.response.body")


@pytest.mark.parametrize("name, provider, roles", [
    ("chat_messages_list.json", "openai-chat", ["user", "assistant", "tool", "assistant"]),
    ("responses_items_list.json", "openai-responses", ["user", "assistant", "tool", "assistant"]),
    ("gemini_contents_list.json", "gemini", ["user", "assistant", "user", "assistant"]),
])
def test_a_bare_message_list_file_is_one_conversation(name, provider, roles, tmp_path):
    for path in (FIXTURES / name, _gzipped(FIXTURES / name, tmp_path)):
        parsed = list(iter_parsed([path]))
        assert len(parsed) == 1 and parsed[0].error is None, parsed[0].error
        conv = parsed[0].conversation
        assert (conv.meta.provider, conv.meta.shape) == (provider, "messages")
        assert [m.role for m in conv.messages] == roles
        calls = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)]
        results = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolResult)]
        assert len(calls) == 1 and results[0].call_id == calls[0].id


def test_a_list_of_records_is_still_split():
    parsed = list(iter_parsed([FIXTURES / "chat_requests_list.json"]))
    assert [p.conversation.meta.shape for p in parsed] == ["request", "request"]
    assert [p.source.rsplit(":", 1)[1] for p in parsed] == ["2", "15"]


def test_the_reader_alone_keeps_splitting_without_a_rule():
    # `whole_if` is the caller's decision; the reader's default stays one record per element.
    assert len(list(read_records(FIXTURES / "chat_messages_list.json"))) == 5
    whole = list(read_records(FIXTURES / "chat_messages_list.json", whole_if=lambda first: True, defer=True))
    assert len(whole) == 1 and len(whole[0].decoded().value) == 5


def test_shape_messages_makes_any_array_one_record_and_request_keeps_it_split():
    forced = list(iter_parsed([FIXTURES / "chat_requests_list.json"], shape="messages"))
    assert len(forced) == 1 and forced[0].error is not None  # request bodies are no messages: said, located
    assert forced[0].source.endswith("chat_requests_list.json:1")
    split = list(iter_parsed([FIXTURES / "chat_messages_list.json"], shape="request"))
    assert len(split) == 5


@pytest.mark.parametrize("command", [
    ["validate", "--json"],
    ["convert", "--to", "canonical", "--no-original"],
    ["render", "--template", "chatml", "--json"],
])
def test_shape_is_accepted_by_every_reading_command(command):
    done = _sftprep(*command, str(FIXTURES / "chat_messages_list.json"), "--shape", "messages", "--from", "openai-chat")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0]["source"].endswith("chat_messages_list.json:1")


def test_run_takes_shape_and_from(tmp_path):
    done = _sftprep("run", "--input", str(FIXTURES / "chat_messages_list.json"), "--shape", "messages",
                    "--from", "openai-chat", "--output", str(tmp_path / "out"), "--format", "jsonl", "--quiet",
                    "--workers", "1")
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (config["input"]["shape"], config["input"]["format"]) == ("messages", "openai-chat")
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["records"]["read"] == stats["records"]["written"] == 1


def _gzipped(path: Path, tmp_path: Path) -> Path:
    out = tmp_path / (path.name + ".gz")
    with open(path, "rb") as src, gzip.open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out
