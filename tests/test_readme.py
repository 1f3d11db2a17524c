"""The README's library example runs as written, on a copy of the bundled samples and default job."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _library_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## As a library", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"\n\n((?:    .*\n|\n)+)", section)
    assert block, "no indented code block under '## As a library'"
    return textwrap.dedent(block[1])


def test_library_example_runs(tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "data", tmp_path / "data")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_library_example(), "README.md", "exec"), namespace)

    result = namespace["result"]
    assert result.stats.read == 66 and result.stats.written == 38  # 4 batch requests fold into their results
    assert (tmp_path / "out" / "qa_report.html").is_file() and result.report is not None
    assert namespace["rendered"].input_ids and namespace["body"]["contents"]
    unreadable = capsys.readouterr().out.splitlines()
    assert len(unreadable) == 24 and all(line.startswith("data/") for line in unreadable)
