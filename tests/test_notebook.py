"""notebooks/walkthrough.ipynb runs top to bottom in a fresh kernel (the venv's python3) and does what
its markdown says; it is stored without outputs, and no output holds a terminal escape code (rich output
is shown as HTML with a plain-text twin)."""

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

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    for output in outputs:  # every representation, as a reader's notebook would show it
        for kind, value in [("text", output.get("text", ""))] + list(output.get("data", {}).items()):
            assert "\x1b" not in str(value), f"escape code in a {output.output_type} output ({kind})"
    assert any("text/html" in o.get("data", {}) for o in outputs)  # the QA summary, as HTML
    printed = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    assert "⟦" in printed and "⟧" in printed  # the token view marked trained tokens
    assert "parallel-call rate" in printed
    # The convert cell shows what its markdown says: two structured calls with the provider's ids, each
    # answered by a tool message carrying that id, and a ledger about the model alone.
    convert = next(_text(c) for c in nb.cells if c.cell_type == "code" and "serialize(conv" in c.source)
    assert convert.count('"type": "function"') == 2 and '"tool_calls"' in convert
    assert "tool toolu_01LisbonA -> 21C" in convert and "tool toolu_01PortoB -> 17C" in convert
    assert '"id": "toolu_01LisbonA"' in convert
    ledger = [line for line in convert.splitlines() if line.startswith("ledger:")]
    assert ledger and all(" $.meta.model - " in line for line in ledger)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["records"]["balanced"] and stats["records"]["written"] > 0
    assert f"read {stats['records']['read']}, written {stats['records']['written']}" in printed
    assert (out / "qa_report.html").is_file() and list(out.glob("data-*.parquet"))
