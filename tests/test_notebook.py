"""notebooks/walkthrough.ipynb runs top to bottom in a fresh kernel (the venv's python3) and does what
its markdown says; it is stored without outputs."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"


def _text(cell) -> str:
    return "".join(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


def test_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_walkthrough_runs_top_to_bottom(tmp_path, monkeypatch):
    out = tmp_path / "walkthrough"
    monkeypatch.setenv("SFTPREP_WALKTHROUGH_OUT", str(out))  # the kernel inherits it
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "notebooks")}})
    try:
        client.execute()
    except CellExecutionError as exc:  # names the cell and the traceback
        pytest.fail(f"notebook cell failed:\n{exc}")
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors

    printed = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    assert "⟦" in printed and "⟧" in printed  # the token view marked trained tokens
    assert "parallel-call rate" in printed
    stats = json.loads((out / "stats.json").read_text())
    assert stats["records"]["balanced"] and stats["records"]["written"] > 0
    assert f"read {stats['records']['read']}, written {stats['records']['written']}" in printed
    assert (out / "qa_report.html").is_file() and list(out.glob("data-*.parquet"))
