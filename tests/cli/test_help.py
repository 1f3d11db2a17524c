"""Help a person learns from: the top-level help and each command's purpose, inputs, examples and exit
codes; --version; the template families listed from the registry; and a 'did you mean' for a mistyped
command, choice, template, config key or validation code (exit 2, nothing run)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import pipeline
from pipeline.cli.main import COMMANDS, build_parser, main
from pipeline.render import registry
from pipeline.suggest import did_you_mean, nearest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"


def _exit(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_top_level_help_teaches_instead_of_quoting_the_code(capsys):
    code, out, _ = _exit(capsys, "--help")
    assert code == 0
    assert "parse arguments, call the library" not in out
    names = [module.__name__.rsplit(".", 1)[1] for module in COMMANDS]
    for name in names:  # each command on its own line with its one-line purpose
        assert any(line.split()[:1] == [name] and len(line.split()) > 2 for line in out.splitlines()), name
    assert "COMMAND\n" not in out  # argparse's bare metavar line is gone
    assert "exit codes: 0" in out and "sftprep validate data/" in out


def test_version(capsys):
    code, out, _ = _exit(capsys, "--version")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert code == 0 and out.strip() == f"sftprep {version}" == f"sftprep {pipeline.__version__}"


@pytest.mark.parametrize("command", [m.__name__.rsplit(".", 1)[1] for m in COMMANDS])
def test_every_command_has_purpose_inputs_examples_and_exit_codes(command, capsys):
    code, out, _ = _exit(capsys, command, "--help")
    assert code == 0
    description = out.split("\n\n")[1]  # after the usage: the one-line purpose
    assert len(description.splitlines()) <= 2 and description[0].isupper()
    assert "Exit 0" in out
    examples = out.split("examples:\n", 1)[1].split("\n\n")[0].splitlines()
    assert examples and all(line.startswith(f"  sftprep {command}") for line in examples)


def test_render_help_lists_the_families_from_the_registry(capsys, monkeypatch):
    out = build_parser()._subparsers._group_actions[0].choices["render"].format_help()
    for name, family in registry.FAMILIES.items():
        assert f"  {name}" in out and family.default_tokenizer in out
    # A family added to the registry is listed without touching the help text.
    monkeypatch.setitem(registry.FAMILIES, "made-up-family", registry.FAMILIES["chatml"])
    _, out, _ = _exit(capsys, "render", "--help")
    assert "  made-up-family" in out
    assert ("sftprep templates" in out) == any(m.__name__.endswith(".templates") for m in COMMANDS)


def test_nearest_names():
    assert nearest("rnder", ["run", "convert", "validate", "render", "qa"]) == ["render"]
    assert nearest("CHATML", ["chatml", "llama3"]) == ["chatml"]
    assert did_you_mean("zzz", ["chatml", "llama3"]) == ""
    assert did_you_mean("templat", ["template", "tokenizer"], prefix="render.") == " (did you mean 'render.template'?)"


@pytest.mark.parametrize("argv, message", [
    (["rnder", "data/"], "invalid choice: 'rnder' (did you mean 'render'?); choose from run, convert"),
    (["convert", "data/", "--to", "openai"], "invalid choice: 'openai' (did you mean 'openai-chat'?)"),
    (["render", "data/openai_chat.jsonl", "--template", "chatm"], "unknown template 'chatm' (did you mean 'chatml'?)"),
    (["render", "data/openai_chat.jsonl", "--template", "lama3"], "(did you mean 'llama3'?)"),
    (["validate", "data/", "--severity", "unknwn_tool=off"],
     "unknown validation code 'unknwn_tool' (did you mean 'unknown_tool'?)"),
])
def test_near_misses_get_a_suggestion_and_exit_2(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = _exit(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err


@pytest.mark.parametrize("toml, message", [
    ("[render]\ntemplat = 'chatml'\n", "unknown key 'render.templat' (did you mean 'render.template'?)"),
    ("[rendr]\ntemplate = 'chatml'\n", "unknown section 'rendr' (did you mean 'render'?)"),
    ("[output]\nformats = 'jsonl'\n", "unknown key 'output.formats' (did you mean 'output.format'?)"),
])
def test_config_keys_get_a_suggestion(toml, message, tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_text(toml)
    code, _, err = _exit(capsys, "run", str(job), "--output", str(tmp_path / "out"))
    assert code == 2 and message in err
    assert not (tmp_path / "out").exists()
