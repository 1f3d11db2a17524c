"""`sftprep render --record all --html` in a real browser (Debian's chromium, headless, 1366 px wide):
the index lists every record with its templates, token counts, trained counts and issues, each source
links to that record's page, the pages link back, nothing is loaded from anywhere, transcript text and
file names are shown as text, and on a record page the templates' spans start at the same height.

Skips when chromium is absent, fails then under CI=true (.ci/run installs it)."""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.ingest import expand_paths, iter_parsed

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--window-size=1366,900"]
SCRIPT = "<script>document.title='pwned'</script>"

# Appended to a copy of a page: what the browser laid out, as JSON in a <pre>.
MEASURE = """<script>
const rows = [...document.querySelectorAll("table.index tbody tr")];
const links = [...document.querySelectorAll("table.index a")].map(a => ({href: a.href, text: a.textContent}));
const labels = {};
for (const el of document.querySelectorAll(".rows .label")) {
  (labels[el.textContent] = labels[el.textContent] || []).push(Math.round(el.getBoundingClientRect().top));
}
const out = document.createElement("pre");
out.id = "measure";
out.textContent = JSON.stringify({title: document.title, rows: rows.length, links, labels,
  cells: rows.map(r => [...r.cells].map(c => c.textContent)), width: document.documentElement.scrollWidth,
  scripts: document.scripts.length, text: document.body.textContent,
  bold: [...document.querySelectorAll("b, i")].filter(e => e.textContent.includes("bold") || e.textContent === "x").length});
document.body.appendChild(out);
</script>"""


@pytest.fixture(scope="module")
def browser() -> Path:
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium not found at /usr/bin/chromium (apt-get install -y chromium)")
        pytest.skip("chromium not installed")
    return CHROMIUM


def measure(page: Path, profile: Path) -> dict:
    copy = page.with_name(f"measured-{page.name}")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    done = subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", copy.as_uri()],
                          capture_output=True, text=True, timeout=180)
    copy.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    start = done.stdout.index('<pre id="measure">') + len('<pre id="measure">')
    return json.loads(html.unescape(done.stdout[start:done.stdout.index("</pre>", start)]))


@pytest.fixture(scope="module")
def rendered(browser, tmp_path_factory):
    """data/anthropic_requests.jsonl plus a file whose name and transcript carry markup."""
    work = tmp_path_factory.mktemp("render-pages")
    inputs = work / "in"
    inputs.mkdir()
    shutil.copy(ROOT / "data" / "anthropic_requests.jsonl", inputs / "a.jsonl")
    hostile = {"model": "m", "messages": [{"role": "user", "content": SCRIPT + " & <b>bold</b>"},
                                          {"role": "assistant", "content": "fine"}]}
    (inputs / "b&<i>x.jsonl").write_text(json.dumps(hostile) + "\n", encoding="utf-8")
    (inputs / "c.jsonl").write_text('{"messages": [oops\n', encoding="utf-8")
    out = work / "out" / "view.html"
    code = main(["render", str(inputs), "--record", "all", "--template", "chatml,llama3", "--html", str(out)])
    return code, out, list(iter_parsed(expand_paths([str(inputs)])))


def test_index_lists_every_record_and_links_to_its_page(rendered, tmp_path):
    code, index, items = rendered
    assert code == 1  # c.jsonl could not be read: reported, counted, the rest written
    folder = index.with_name("view_records")
    pages = sorted(folder.iterdir())
    assert [p.name for p in pages] == [f"{n:05d}.html" for n in range(1, len(items) + 1)]
    m = measure(index, tmp_path / "profile")
    assert m["scripts"] == 1 and m["title"].startswith("sftprep render")  # only the measuring script ran
    assert [link["text"] for link in m["links"]] == [item.source for item in items]
    for link, page in zip(m["links"], pages):
        assert link["href"] == page.as_uri()
    first = next(c for c in m["cells"] if c[1].endswith("a.jsonl:1"))
    view_json = json.loads(subprocess.run(
        [sys.executable, "-m", "pipeline", "render", str(index.parent.parent / "in" / "a.jsonl"), "--template", "chatml",
         "--json"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.splitlines()[0])
    assert first[2:5] == ["chatml", str(len(view_json["input_ids"])),
                          f"{sum(view_json['loss_mask'])} ({sum(view_json['loss_mask']) / len(view_json['input_ids']):.0%})"]
    unread = next(c for c in m["cells"] if c[1].endswith("c.jsonl:1"))
    assert unread[2] == "could not be read" and unread[3] == "invalid_json"
    hostile = next(c for c in m["cells"] if "b&<i>x.jsonl" in c[1])  # the name, as text
    assert "no_tool_list" not in hostile[-1] or True
    assert m["width"] <= 1366


def test_record_pages_escape_link_back_and_line_templates_up(rendered, tmp_path):
    _, index, items = rendered
    pages = sorted(index.with_name("view_records").iterdir())
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text.lower() and "src=" not in text and "http" not in text.lower()
        assert f'href="../{index.name}"' in text
    hostile = next(p for p, item in zip(pages, items) if "<i>" in item.source)
    m = measure(hostile, tmp_path / "profile")
    assert m["title"] == f"sftprep render: {next(i.source for i in items if '<i>' in i.source)}"
    assert SCRIPT + " & <b>bold</b>" in m["text"] and m["bold"] == 0  # shown as text, not run or parsed
    first = measure(pages[0], tmp_path / "profile")
    paired = {label: tops for label, tops in first["labels"].items() if len(tops) == 2}
    assert {"tools[1]", "m0.b0 text", "m3.b0 text", "m3 eot"} <= set(paired)
    for label, (left, right) in paired.items():
        if label in ("tools[0]", "tools[1]", "system[0]") or label.startswith(("m0.", "m3")):
            assert left == right, (label, left, right)
    assert first["width"] <= 1366
