"""Claude Code session logs: every corpus session file, checked against counts computed here from the
raw lines, independently of the reader; plus a hand-written session with the tricky orders."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from corpus import CORPUS, corpus_available, params
from pipeline.conversation import ToolCall, ToolResult
from pipeline.errors import InputError, ParseError
from pipeline.ingest import iter_raw
from pipeline.ingest.sessions.claude_code import (detect_session, read_session, read_session_file, session_files,
                                          to_conversation)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude_code"
FOLDER = "claude_code_spotter_sessions"


def _session_paths() -> list[tuple[str, Path]]:
    if not corpus_available():
        return []
    return [(str(p.relative_to(CORPUS / FOLDER)), p) for p in sorted((CORPUS / FOLDER).rglob("*.jsonl"))]


SESSIONS = _session_paths()


def _raw(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _blocks(event: dict) -> list[dict]:
    content = event["message"]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


@pytest.mark.parametrize("path", params(SESSIONS))
def test_corpus_session(path):
    events = _raw(path)
    result = read_session_file(path)
    messages = result.body["messages"]
    assert result.notes == []

    # Skipped events by kind, counted here from the raw lines.
    expected_skips = Counter(e["type"] for e in events if e["type"] not in ("user", "assistant"))
    assert result.skipped == dict(expected_skips)

    # Messages: one assistant message per API message id, user events in between merged, so the
    # roles alternate; every content block of the log is in the body exactly once, in its role.
    assistant_events = [e for e in events if e["type"] == "assistant"]
    assert sum(m["role"] == "assistant" for m in messages) == len({e["message"]["id"] for e in assistant_events})
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in zip(roles, roles[1:]))

    def count(role: str) -> int:
        return sum(1 if isinstance(m["content"], str) else len(m["content"]) for m in messages if m["role"] == role)

    assert count("assistant") == sum(len(_blocks(e)) for e in assistant_events)
    assert count("user") == sum(len(_blocks(e)) for e in events if e["type"] == "user")
    assert [b for m in messages if m["role"] == "assistant" for b in m["content"]] == \
        [b for e in assistant_events for b in _blocks(e)]

    # Every tool_use whose result the log holds is answered in the very next (user) message.
    logged_results = {b["tool_use_id"] for e in events if e["type"] == "user" for b in _blocks(e)
                      if b["type"] == "tool_result"}
    calls = 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        for block in message["content"]:
            if block["type"] == "tool_use" and block["id"] in logged_results:
                calls += 1
                following = messages[i + 1]["content"]
                assert any(b.get("tool_use_id") == block["id"] for b in following if isinstance(b, dict))
    assert calls == len(logged_results)

    # Sidecar tool output kept per call; session metadata from the lines.
    sidecars = {b["tool_use_id"] for e in events if e["type"] == "user" and "toolUseResult" in e
                for b in _blocks(e) if b["type"] == "tool_result"}
    assert set(result.tool_use_results) == sidecars
    message_events = [e for e in events if e["type"] in ("user", "assistant")]
    assert result.session_id == message_events[0]["sessionId"]
    assert result.cwd == message_events[0]["cwd"]
    assert result.is_sidechain == ("/subagents/" in str(path))
    stamps = [e["timestamp"] for e in events if "timestamp" in e]
    assert (result.first_timestamp, result.last_timestamp) == (min(stamps), max(stamps))
    assert result.body["model"] == [e["message"]["model"] for e in assistant_events][-1]
    compact = [e for e in events if e.get("isCompactSummary")]
    assert len(result.compactions) == len(compact)
    for index in result.compactions:
        text = messages[index]["content"]
        text = text if isinstance(text, str) else text[0]["text"]
        assert text.startswith("This session is being continued from a previous conversation")

    assert detect_session(path.read_text().splitlines()[:5])


@pytest.mark.parametrize("path", params(SESSIONS))
def test_corpus_session_to_conversation(path):
    result = read_session_file(path)
    try:
        conv = to_conversation(result)
    except NotImplementedError:
        pytest.skip("the anthropic codec has not landed yet")
    assert len(conv.messages) == len(result.body["messages"])
    calls = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)]
    assert len(calls) == sum(b["type"] == "tool_use" for m in result.body["messages"] if m["role"] == "assistant"
                             for b in m["content"])
    results = [b for m in conv.messages for b in m.blocks if isinstance(b, ToolResult)]
    assert all(r.call_id is not None for r in results)  # every result found its call
    assert conv.meta.shape == "session" and conv.meta.source == str(path)
    assert conv.extras["claude-code"]["session_id"] == result.session_id
    assert all("lines" in m.extras["claude-code"] for m in conv.messages)
    kept = {r.provider_id for r in results if "claude-code" in r.extras}
    assert kept == set(result.tool_use_results)


@pytest.mark.usefixtures("corpus")
def test_session_files_pairs_a_session_with_its_subagents():
    main = CORPUS / FOLDER / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    names = [p.name for p in session_files(main)]
    assert names == [main.name, "agent-aac57f5.jsonl", "agent-acompact-946d2b.jsonl"]


@pytest.mark.usefixtures("corpus")
def test_interrupted_last_line_is_a_warning_and_the_rest_is_kept():
    path = CORPUS / FOLDER / "tool_heavy.jsonl"
    lines = path.read_text().splitlines()
    whole = read_session_file(path)
    cut = lines[:-1] + [lines[-1][: len(lines[-1]) // 2]]
    result = read_session(enumerate(cut, 1), "tool_heavy.jsonl")
    (note,) = result.notes
    assert note.level == "warning" and note.code == "truncated_line"
    assert note.source == f"tool_heavy.jsonl:{len(lines)}"
    before = read_session(enumerate(lines[:-1], 1), "x")
    assert result.body == before.body and result.skipped == before.skipped
    assert whole.body != before.body or whole.skipped != before.skipped


@pytest.mark.usefixtures("corpus")
def test_malformed_line_in_the_middle_names_file_and_line():
    lines = (CORPUS / FOLDER / "short.jsonl").read_text().splitlines()
    lines[6] = lines[6][:40]
    with pytest.raises(InputError) as err:
        read_session(enumerate(lines, 1), "short.jsonl")
    assert err.value.source == "short.jsonl:7" and err.value.code == "invalid_line"


def test_sample_session():
    path = FIXTURES / "interleaved.jsonl"
    result = read_session_file(path)
    assert result.body == json.loads((FIXTURES / "interleaved.expected.json").read_text())
    assert result.skipped == {"file-history-snapshot": 1, "progress": 1, "sidechain": 1, "system": 1}
    # The results written between the two tool_use lines of msg_sample_A answer them after it.
    assert result.sources[1].lines == [3, 4, 7] and result.sources[2].lines == [6, 8]
    assert result.sources[4].flags == {"isMeta": [0]}
    assert result.sources[5].flags == {"synthetic": [0], "isApiErrorMessage": [0]}
    assert result.models == ["claude-opus-4-6"]  # the synthetic error turn names no real model
    assert result.tool_use_results == {"toolu_sample_ls": {"stdout": "README.md\nsrc", "stderr": "",
                                                           "interrupted": False},
                                       "toolu_sample_read": "Error: No such file"}
    assert (result.session_id, result.git_branch, result.version) == ("sess-sample-1", "main", "2.1.40")
    assert (result.first_timestamp, result.last_timestamp) == ("2026-03-01T10:00:01.000Z", "2026-03-01T10:01:02.000Z")


def test_reading_streams_lines_without_the_whole_file():
    seen = []

    def lines():
        for number, text in enumerate((FIXTURES / "interleaved.jsonl").read_text().splitlines(), 1):
            seen.append(number)
            yield number, text

    gen = lines()
    result = read_session(gen, "interleaved.jsonl")
    assert len(result.body["messages"]) == 6 and seen == list(range(1, 15))


def test_message_event_without_message_is_an_error():
    line = json.dumps({"type": "assistant", "sessionId": "s", "uuid": "a"})
    with pytest.raises(ParseError) as err:
        read_session([(3, line), (4, "{}")], "f.jsonl")
    assert err.value.source == "f.jsonl:3" and err.value.path == "$.message"


@pytest.mark.parametrize("lines, expected", [
    ([(FIXTURES / "interleaved.jsonl").read_text().splitlines()[0]], True),
    (['{"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}'], False),
    (['{"role": "user", "content": "hi"}', '{"role": "assistant", "content": "hello"}'], False),
    (['{"type": "user", "message": {"role": "user", "content": "no session markers"}}'], False),
    (["not json", "[1, 2]"], False),
    ([], False),
])
def test_detect_session(lines, expected):
    assert detect_session(lines) is expected


def test_bytes_that_are_not_utf8_break_their_line_not_silently(tmp_path):
    """A line with bytes that are not UTF-8 is rejected by file and line, never read with U+FFFD in
    place of them; cut off in the last line (a multi-byte character written halfway), it is a note."""
    lines = (FIXTURES / "interleaved.jsonl").read_bytes().splitlines(keepends=True)
    middle = lines[1].replace(b"List the files", b"List the \xff files")
    assert middle != lines[1]
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join([lines[0], middle, *lines[2:]]))
    (raw,) = iter_raw([path])
    assert raw.value is None and raw.error.code == "invalid_line" and raw.error.source == f"{path}:2"
    cut = lines[-1].rstrip(b"\n") + "é".encode()[:1]  # the last line ends mid-character
    path.write_bytes(b"".join([*lines[:-1], cut]))
    (raw,) = iter_raw([path])
    (note,) = raw.value.notes
    assert note.code == "truncated_line" and note.source == f"{path}:{len(lines)}"


def _rewound() -> list[dict]:
    return _raw(FIXTURES / "rewound.jsonl")


def test_rewound_session_is_its_live_branch():
    """A prompt rewound to (line 11 restarts at the turn of line 6) leaves the old branch in the file:
    the conversation is the branch the last line ends, with the split calls and results beside it."""
    result = read_session_file(FIXTURES / "rewound.jsonl")
    texts = [m["content"] if isinstance(m["content"], str) else [b.get("text") or b.get("id") or b.get("tool_use_id")
                                                                for b in m["content"]]
             for m in result.body["messages"]]
    assert texts == ["Rename the notes folder to journal.", ["Renaming it.", "toolu_rw1"], ["toolu_rw1"],
                     ["Done: the folder is now journal/."], "Now list what is in it instead.",
                     ["toolu_rw3", "toolu_rw4"], ["toolu_rw3", "toolu_rw4"], ["One note, 8 KB in all."]]
    assert result.skipped == {"abandoned_branch": 4, "file-history-snapshot": 1, "progress": 1}
    (note,) = result.notes
    assert note.code == "abandoned_branch" and note.source.endswith("rewound.jsonl:7") and "lines 7, 8, 9, 10" in note.message
    conv = to_conversation(result)
    assert [m.role for m in conv.messages] == ["user", "assistant"] * 4
    assert all(r.call_id is not None for m in conv.messages for r in m.blocks if isinstance(r, ToolResult))


@pytest.mark.parametrize("change", ["parent outside the file", "repeated uuid", "no uuid"])
def test_a_tree_that_cannot_tell_the_live_branch_keeps_every_line(change):
    events = _rewound()
    if change == "parent outside the file":
        events[1]["parentUuid"] = "resumed-from-elsewhere"  # the live chain's root is not in this file
    elif change == "repeated uuid":
        events[3]["uuid"] = events[2]["uuid"]
    else:
        del events[8]["uuid"]
    result = read_session([(i, json.dumps(e)) for i, e in enumerate(events, 1)], "s.jsonl")
    assert "abandoned_branch" not in result.skipped and result.notes == []
    assert sum(len(m["content"]) if isinstance(m["content"], list) else 1 for m in result.body["messages"]) == 15
