"""The scrub stage on a corpus with planted secrets and personal data in every place a model reads:
system prompt, tool description, user and assistant text, reasoning, nested tool-call arguments, tool
results, a streamed response and a session log. Recall, no leak into any output, structure intact."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus import ROOT, require_corpus
from pipeline import run_job
from pipeline.conversation import ToolCall, from_json, iter_blocks
from pipeline.errors import ConfigError
from pipeline.run.config import load_config
from pipeline.run.scrub import DETECTORS, Redactor, find

FIXTURES = ROOT / "tests" / "fixtures" / "scrub"
PLANTED = json.loads((ROOT / "tests" / "fixtures" / "scrub_planted.json").read_text())
SIGNATURE = "RXhhbXBsZVNpZ25hdHVyZUZvclNjcnViVGVzdHNPbmx5QUtJQVE3UlozSzVNMlhXVjRISkI="


def _run(tmp_path: Path, name: str = "out", **overrides):
    settings = {"input.paths": [str(FIXTURES)], "output.dir": str(tmp_path / name), "run.workers": 1,
                "convert.to": "gemini"}
    settings.update(overrides)
    return run_job(load_config(ROOT / "configs" / "default.toml", settings), progress=False)


def _rows(out: Path) -> list[dict]:
    return pq.read_table(out / "data-00000.parquet").to_pylist()


def _leaks(out: Path) -> list[tuple[str, str]]:
    """(file, detector) for every planted value found in any output file, as written or JSON-escaped."""
    found = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":  # compressed: read the values, not the bytes
            data = "\n".join(str(v) for row in pq.read_table(path).to_pylist() for v in row.values())
        else:
            data = path.read_bytes().decode("utf-8", "replace")
        for planted in PLANTED:
            if any(form in data for form in (planted["value"], json.dumps(planted["value"])[1:-1])):
                found.append((path.name, planted["detector"]))
    return found


@pytest.fixture(scope="module")
def redacted(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("scrub"))


def test_every_planted_value_is_found_and_none_reaches_an_output(redacted):
    out = redacted.output_dir
    assert _leaks(out) == []
    rows = _rows(out)
    found = {e["detector"] for row in rows for e in json.loads(row["ledger"]) if e["kind"] == "redacted"}
    assert found == {p["detector"] for p in PLANTED}
    # The QA report, stats and rejects were checked by _leaks too: the record rejected at parse
    # (a message without a role) is stored with its key replaced.
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert [r["code"] for r in rejects] == ["unknown_shape"]
    assert rejects[0]["record"]["messages"][0]["content"] == "my key is <SECRET:aws_access_key>"


def test_redactions_are_ledgered_by_place_without_the_value(redacted):
    rows = {Path(r["source"]).name: r for r in _rows(redacted.output_dir)}
    ledger = [e for e in json.loads(rows["anthropic_requests.jsonl:1"]["ledger"]) if e["kind"] == "redacted"]
    places = {(e["detector"], e["path"]) for e in ledger}
    assert ("email_address", "$.system[0]") in places
    assert ("phone_number", "$.tools[0].description") in places
    assert ("credit_card", "$.messages[0].blocks[0]") in places
    assert ("private_key", "$.messages[2].blocks[0].content[0]") in places
    assert ("secret_keyword", "$.messages[3].blocks[0].arguments.config.database.db_password") in places
    assert ("ip_address", "$.messages[3].blocks[0].arguments.hosts[0]") in places
    assert all(e["target"] == "scrub" and e["reason"].startswith(e["detector"] + " in ") for e in ledger)
    values = {p["value"] for p in PLANTED}
    assert not any(v in json.dumps(e) for e in ledger for v in values)
    stats = json.loads((redacted.output_dir / "stats.json").read_text())
    assert stats["tallies"]["redacted_in"]["tool_arguments"] >= 3
    assert stats["tallies"]["redacted"]["aws_access_key"] >= 2


def test_structure_survives_scrubbing(redacted):
    rows = {Path(r["source"]).name: r for r in _rows(redacted.output_dir)}
    conv = from_json(rows["anthropic_requests.jsonl:1"]["conversation"])
    calls = [b for _, _, b in iter_blocks(conv) if isinstance(b, ToolCall)]
    deploy = calls[1].arguments
    # Keys untouched, other values untouched, arguments still an object; the thinking signature is
    # the byte-identical replay state it was.
    assert deploy == {"config": {"database": {"db_password": "<SECRET:secret_keyword>", "port": 5432},
                                 "region": "eu-west-1"}, "hosts": ["<PII:ip_address>", "10.0.0.12"]}
    assert SIGNATURE in rows["anthropic_requests.jsonl:1"]["conversation"]
    chat = from_json(rows["openai_chat.jsonl:1"]["conversation"])
    clone = next(b for _, _, b in iter_blocks(chat) if isinstance(b, ToolCall))
    assert json.loads(clone.raw_arguments) == clone.arguments
    assert clone.arguments["auth"]["headers"]["Authorization"] == "token <SECRET:github_token>"
    # Same value, same placeholder; a second value of one detector gets its own number.
    messages = json.loads(rows["anthropic_requests.jsonl:1"]["messages"])
    assert "AWS_ACCESS_KEY_ID=<SECRET:aws_access_key>\n" in messages[3]["content"]
    assert messages[-1]["content"] == "Deployed to both hosts; the key <SECRET:aws_access_key> was used."
    assert 'aws_secret_access_key = "<SECRET:aws_access_key_2>"' in messages[3]["content"]
    # The export to another provider was built from the scrubbed conversation.
    assert "<SECRET:secret_keyword>" in rows["anthropic_requests.jsonl:1"]["export"]


def test_reject_action_per_detector(tmp_path):
    result = _run(tmp_path, **{"scrub.actions": {"slack_token": "reject"}})
    rejects = [json.loads(line) for line in (result.output_dir / "rejects.jsonl").read_text().splitlines()]
    refused = [r for r in rejects if r["code"] == "secret_found"]
    assert [(Path(r["source"]).name, r["stage"], r["path"]) for r in refused] == [
        ("anthropic_token.sse:1", "scrub", "$.messages[0].blocks[0]")]
    assert "slack token" in refused[0]["message"]
    assert _leaks(result.output_dir) == []


def test_report_action_keeps_values_and_warns(tmp_path):
    result = _run(tmp_path, **{"scrub.action": "report"})
    rows = {Path(r["source"]).name: r for r in _rows(result.output_dir)}
    issues = json.loads(rows["openai_chat.jsonl:1"]["issues"])
    assert {"possible_secret"} <= {i["code"] for i in issues}
    assert "token ghp_" in rows["openai_chat.jsonl:1"]["messages"]
    assert not any(e["kind"] == "redacted" for r in rows.values() for e in json.loads(r["ledger"]))


def test_disabled_scrub_changes_nothing(tmp_path):
    result = _run(tmp_path, **{"scrub.enabled": False})
    assert {d for _, d in _leaks(result.output_dir)} == {p["detector"] for p in PLANTED}


def test_unknown_detector_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown detector 'aws_key'.*aws_access_key"):
        load_config(None, {"scrub.actions": {"aws_key": "reject"}})


@pytest.mark.parametrize("text", [
    "Let me check the weather in Oslo.",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",
    'password: the one I told you', "self.password = password_input", 'secret_key = os.environ["SECRET_KEY"]',
    "listening on 127.0.0.1:8080 and 10.0.0.12, docs at 192.0.2.1", "user mia.li3818@example.com",
    "order 1234567890123456 shipped", "version 1.2.3 released", "id 550e8400-e29b-41d4-a716-446655440000",
])
def test_prose_code_and_reserved_values_are_not_flagged(text):
    assert find(text) == []


# Values every detector claims alone, without a keyword beside them (a password needs its key).
_SECRETS = st.sampled_from([p["value"] for p in PLANTED if [(f.start, f.end) for f in find(p["value"])]
                            == [(0, len(p["value"]))]])
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet="abc xyz-_/", max_size=12) | _SECRETS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet="abcdefgh_", min_size=1,
                                                                          max_size=8), inner, max_size=4),
    max_leaves=20)


def _keys(value):
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys(v) for v in value]
    return type(value).__name__ if not isinstance(value, str) else "str"


@settings(max_examples=150, deadline=None)
@given(_JSON)
def test_arguments_stay_json_with_their_keys_and_lose_every_secret(arguments):
    redactor = Redactor()
    out = redactor.value(arguments, "$.arguments", "tool_arguments")
    assert _keys(out) == _keys(arguments)  # same shape, same keys, same types
    text = json.dumps(out)
    assert json.loads(text) == out
    assert not any(p["value"] in text for p in PLANTED)


def test_no_secret_detector_fires_on_the_corpus():
    """Precision on real transcripts: the third-party corpus holds no credentials, so every secret
    finding there would be a false positive. (Personal-data findings are listed in the README.)"""
    import pipeline

    corpus = require_corpus()
    secret_hits = []
    for item in pipeline.iter_parsed(pipeline.expand_paths([str(corpus)])):
        if item.conversation is None:
            continue
        redactor = Redactor()
        redactor.conversation(item.conversation)
        secret_hits += [(item.conversation.meta.source, h.detector, h.path) for h in redactor.hits
                        if h.kind == "secret"]
    assert secret_hits == []
    assert len(DETECTORS) >= 25


def test_the_qa_report_has_a_safety_section(redacted, tmp_path):
    from pipeline.qa import build_report, render_html

    report = build_report(redacted.output_dir)
    stats = json.loads((redacted.output_dir / "stats.json").read_text())
    assert {c.key: c.count for c in report.safety.by_detector} == stats["tallies"]["redacted"]
    assert {c.key for c in report.safety.by_where} >= {"system", "tool_description", "user_text", "assistant_text",
                                                       "tool_arguments", "tool_result"}
    example = next(e for e in report.safety.examples if e.detector == "credit_card")
    assert "Charge card <PII:credit_card> for the plan." in example.excerpt
    page = render_html(report)
    assert 'id="safety"' in page and "&lt;PII:credit_card&gt;" in page
    refused = _run(tmp_path, **{"scrub.actions": {"private_key": "reject"}})
    safety = build_report(refused.output_dir).safety
    assert [(c.key, c.count) for c in safety.rejected] == [("secret_found", 1)]
    assert "private key" in safety.rejected_examples[0].excerpt
