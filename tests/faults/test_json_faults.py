"""Cause 1: one JSON policy in and out. Lone surrogates, integers beyond 64 bits and deep nesting,
through every command: accepted values come back exactly, refused ones are rejected at read with the
file, line and JSON path, and the records around them are processed."""

from __future__ import annotations

import gzip
import json

import pytest
from fault_support import ANTHROPIC, CHAT, clean, jsonl, run_job, run_outputs, sftprep

from pipeline import jsonpolicy

BIG = "123456789012345678901234567890"


def _with_arguments(arguments: str) -> dict:
    record = json.loads(json.dumps(CHAT))
    record["messages"][1]["tool_calls"][0]["function"]["arguments"] = arguments
    return record


def _anthropic_line(old: str, new: str) -> bytes:
    line = json.dumps(ANTHROPIC)
    assert old in line
    return line.replace(old, new).encode()


FAULTS = {  # name: (line, where the reader rejects it: code and a fragment of the JSON path) or None if accepted
    "surrogate_in_text": (json.dumps(CHAT).encode().replace(b"Weather in Oslo?", b"Weather \\ud800?"),
                          ("invalid_json", "$")),
    "deep_tool_input": (_anthropic_line('{"n": 1}', '{"n": ' + "[" * 300 + "]" * 300 + "}"),
                        ("too_deep", "$.messages[1].content[0].input.n[0][0]")),
    "deep_input_schema": (_anthropic_line('"input_schema": {"type": "object"}',
                                          '"input_schema": ' + '{"a": ' * 300 + "1" + "}" * 300),
                          ("too_deep", "$.tools[0].input_schema.a.a")),
    "deep_5000": (b"[" * 5000 + b"]" * 5000, ("too_deep", "$")),
    "number_of_5000_digits": (_anthropic_line('{"n": 1}', '{"n": ' + "7" * 5000 + "}"), ("number_too_large", "$")),
}


@pytest.fixture
def faulty(tmp_path):
    return jsonl(tmp_path / "in.jsonl", CHAT, *(line for line, _ in FAULTS.values()), ANTHROPIC)


def test_run_rejects_each_refused_value_at_read_with_its_path_and_writes_the_rest(tmp_path, faulty):
    done, out = run_job(tmp_path, faulty)
    clean(done, 0)
    stats, rejects, rows = run_outputs(out)
    by_line = {int(r["source"].rsplit(":", 1)[1]): r for r in rejects}
    for n, (name, (_, (code, path))) in enumerate(FAULTS.items(), start=2):
        assert by_line[n]["stage"] == "read" and by_line[n]["code"] == code, name
        assert by_line[n]["path"].startswith(path), (name, by_line[n]["path"][:80])
    assert [r["source"] for r in rows] == [f"{faulty}:1", f"{faulty}:{len(FAULTS) + 2}"]


@pytest.mark.parametrize("command", [("convert", "--to", "gemini"), ("validate", "--json"),
                                     ("render", "--template", "chatml", "--record", "all", "--json")])
def test_every_command_reports_the_refused_values_and_goes_on(faulty, command):
    done = sftprep(command[0], str(faulty), *command[1:])
    assert "Traceback" not in done.err
    assert done.code == (0 if command[0] == "convert" else 1)
    for n, (_, (code, _path)) in enumerate(FAULTS.items(), start=2):
        assert f"{faulty}:{n}" in done.err + done.out.decode(), code
    if command[0] == "convert":
        assert f"read {len(FAULTS) + 2}, converted 2, rejected {len(FAULTS)}" in done.err
    if command[0] == "validate":
        codes = {line["source"]: [i["code"] for i in line["issues"]] for line in done.lines()}
        assert codes[f"{faulty}:1"] == [] and codes[f"{faulty}:3"] == ["too_deep"]


def test_big_integers_come_back_exactly_through_convert_and_run(tmp_path):
    arguments_big = _anthropic_line('{"n": 1}', '{"n": ' + BIG + "}")
    seed_big = json.dumps(CHAT)[:-1].encode() + b', "seed": 18446744073709551617}'
    src = jsonl(tmp_path / "in.jsonl", arguments_big, seed_big)
    same = clean(sftprep("convert", str(src), "--to", "anthropic", "--bodies-only"), 0)
    assert (BIG.encode() in same.out.splitlines()[0]) and b"18446744073709551617" not in same.out  # seed: no place
    chat = clean(sftprep("convert", str(src), "--to", "openai-chat", "--bodies-only"), 0).out.splitlines()
    assert json.loads(chat[0])["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"n":' + BIG + "}"
    assert json.loads(chat[1])["seed"] == 18446744073709551617  # exact, not 1.8446744073709552e+19
    done, out = run_job(tmp_path, src)
    clean(done, 0)
    _, _, rows = run_outputs(out)
    assert BIG in rows[0]["conversation"] and BIG in rows[0]["messages"]


def test_lone_surrogate_in_arguments_keeps_the_raw_string_and_validate_flags_it(tmp_path):
    src = jsonl(tmp_path / "in.jsonl", _with_arguments('{"city": "\\ud800"}'), CHAT)
    report = clean(sftprep("validate", str(src), "--json"), 1).lines()
    assert [i["code"] for i in report[0]["issues"]] == ["arguments_not_object"] and report[1]["issues"] == []
    assert report[0]["issues"][0]["path"] == "$.messages[1].blocks[0]"
    converted = clean(sftprep("convert", str(src), "--to", "openai-chat", "--bodies-only"), 0).lines()
    assert converted[0]["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"city": "\\ud800"}'
    done, out = run_job(tmp_path, src)
    _, rejects, rows = run_outputs(out)
    assert [r["code"] for r in rejects] == ["arguments_not_object"] and len(rows) == 1


def test_surrogates_in_a_session_line_and_a_stream_event_are_located(tmp_path):
    event = {"type": "user", "sessionId": "s", "uuid": "u1", "message": {"role": "user", "content": "hi"}}
    session = tmp_path / "session.jsonl"
    session.write_bytes(json.dumps(event).encode() + b"\n"
                        + json.dumps(event).encode().replace(b'"hi"', b'"\\udc00"').replace(b"u1", b"u2") + b"\n"
                        + json.dumps(event).encode().replace(b"u1", b"u3") + b"\n")
    stream = tmp_path / "chat.sse"
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": "x"}}]}
    stream.write_bytes(b"data: " + json.dumps(chunk).encode().replace(b'"x"', b'"\\ud800"') + b"\n\ndata: [DONE]\n\n")
    done = clean(sftprep("validate", str(session), str(stream), "--json"), 1)
    issues = {line["source"]: line["issues"] for line in done.lines()}
    # The session is one record: its broken line rejects it, naming that line.
    assert [(i["code"], "surrogate" in i["message"]) for i in issues[f"{session}:2"]] == [("invalid_line", True)]
    assert [(i["code"], i["path"]) for i in issues[f"{stream}:1"]] == [("invalid_stream", "$.events[0]")]


def test_policy_round_trips_what_it_accepts_and_names_what_it_refuses():
    value = jsonpolicy.loads(b'{"n": ' + BIG.encode() + b', "f": 1.5, "s": "\\ud83d\\ude00"}')
    assert value["n"] == int(BIG) and value["s"] == "\U0001F600"
    assert jsonpolicy.loads(jsonpolicy.dumps(value)) == value
    nested = "[" * jsonpolicy.MAX_DEPTH + "]" * jsonpolicy.MAX_DEPTH
    assert jsonpolicy.loads(nested) is not None  # the limit itself is accepted
    with pytest.raises(jsonpolicy.JsonPolicyError) as refused:
        jsonpolicy.loads("[" + nested + "]")
    assert refused.value.code == "too_deep" and refused.value.path.startswith("$[0][0]")
    with pytest.raises(ValueError):  # callers that caught the libraries' errors still catch the policy's
        jsonpolicy.loads('"\\ud800"')


def test_truncated_gzip_and_truncated_array_keep_what_came_before(tmp_path):
    array = tmp_path / "cut.json"
    array.write_text(json.dumps([CHAT, ANTHROPIC])[:-40])
    packed = tmp_path / "cut.jsonl.gz"
    packed.write_bytes(gzip.compress(((json.dumps(CHAT) + "\n") * 50).encode())[:-30])
    done, out = run_job(tmp_path, array, packed)
    clean(done, 0)
    stats, rejects, rows = run_outputs(out)
    assert {r["code"] for r in rejects} == {"invalid_json", "unreadable_file"}
    assert any(r["source"].startswith(f"{array}:") for r in rows)
