"""`sftprep templates`: every built-in family with its tokenizer and every capability said."""

from __future__ import annotations

import json

from pipeline.cli.main import main
from pipeline.render import FAMILIES
from pipeline.render.templates import CAPABILITIES


def test_json_lists_every_family_and_capability(capsys):
    assert main(["templates", "--json", "--check"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in entries] == list(FAMILIES)
    for entry in entries:
        assert entry["tokenizer"] == FAMILIES[entry["name"]].default_tokenizer
        assert set(entry["carries"]) == set(CAPABILITIES), entry["name"]
        assert all(entry["carries"].values())
        assert entry["tokenizer_status"] == "loads" and entry["parse_back"]
    by_name = {e["name"]: e for e in entries}
    assert "past_reasoning" in by_name["qwen3"]["carries"]["reasoning"]
    assert by_name["chatml"]["carries"]["reasoning"].startswith("dropped")


def test_tables_name_each_family(capsys):
    assert main(["templates"]) == 0
    out = capsys.readouterr().out
    for name, family in FAMILIES.items():
        assert f"{name}  (tokenizer: {family.default_tokenizer})" in out
    assert out.count("parallel calls") == len(FAMILIES)
