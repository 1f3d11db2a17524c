"""The QA report in a real browser: Debian's chromium, headless. The page of a run over data/ plus
hand-written records (tests/fixtures/qa/injected.jsonl: a transcript that is a `<script>` setting
document.title, a flattened call carrying one, markup in user text) must show every section, draw its
charts at a real size, and show the script as text without running it.

Skips when chromium is absent, fails then under CI=true (.ci/run installs it)."""

from __future__ import annotations

import json
import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipeline.run.config import load_config
from pipeline import run_job

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--window-size=1366,900"]  # a laptop screen
TITLE = "sftprep QA report"
SCRIPT = "<script>document.title='pwned'</script>"
SECTIONS = ("accounting", "sources", "tools", "issues", "flattened", "tokens", "duplicates", "ledger", "reasoning",
            "extremes")

# Appended to a copy of the page (never to the report itself): measures what the browser laid out.
MEASURE = """<script>
const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
const shown = e => { const s = getComputedStyle(e); const [w, h] = box(e);
  return w > 0 && h > 0 && s.visibility !== "hidden" && s.display !== "none"; };
const charts = [...document.querySelectorAll("figure.chart svg")].map(svg => ({
  label: svg.getAttribute("aria-label"), size: box(svg),
  marks: [...svg.querySelectorAll("rect")].filter(r => { const [w, h] = box(r); return w > 0 && h > 0; }).length,
  labels: [...svg.querySelectorAll("text")].filter(t => t.getBBox().width > 0).length }));
const holders = [...document.querySelectorAll("pre, td")].filter(e => e.textContent.includes(%s));
const out = document.createElement("pre");
out.id = "measure";
out.textContent = JSON.stringify({charts, holders: holders.length, visible: holders.filter(shown).length,
  page_width: document.documentElement.scrollWidth});
document.body.appendChild(out);
</script>"""


class Dom(HTMLParser):
    """The dumped DOM, as what a reader gets: element tags with ids, and the text."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.title = ""
        self.text: list[str] = []
        self._in_title = False
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title" and not self.title  # the page's own: the first one, in <head>

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        self.text.append(data)


@pytest.fixture(scope="module")
def browser() -> Path:
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium not found at /usr/bin/chromium (apt-get install -y chromium)")
        pytest.skip("chromium not installed")
    return CHROMIUM


def chromium(profile: Path, *args: str) -> str:
    done = subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("qa-browser")
    config = load_config(ROOT / "configs" / "default.toml", {
        "input.paths": [str(ROOT / "data"), str(ROOT / "tests" / "fixtures" / "qa" / "injected.jsonl")],
        "output.dir": str(out / "run"), "run.workers": 1})
    run_job(config, progress=False)
    return out / "run" / "qa_report.html"


def test_sections_present_and_script_shown_as_text(page, tmp_path):
    dom = Dom(chromium(tmp_path / "profile", "--dump-dom", page.as_uri()))
    assert dom.title == TITLE  # the transcript's script did not run
    assert not [t for t, _ in dom.tags if t == "script"]
    ids = {attrs.get("id") for _, attrs in dom.tags}
    assert set(SECTIONS) <= ids
    text = "".join(dom.text)
    assert SCRIPT in text  # the transcript is there, as text
    assert '<i>Bergen</i>' in text  # markup from a flattened call, as text
    assert not [t for t, _ in dom.tags if t in ("img", "i", "b", "iframe")]
    assert len([t for t, _ in dom.tags if t == "svg"]) >= 8


def test_charts_drawn_and_script_text_visible(page, tmp_path):
    copy = tmp_path / "measured.html"
    copy.write_text(page.read_text().replace("</body>", MEASURE % json.dumps("<script>") + "</body>"))
    dom = Dom(chromium(tmp_path / "profile", "--dump-dom", copy.as_uri()))
    measure = json.loads(next(t for t in dom.text if t.startswith('{"charts"')))
    charts = {c["label"]: c for c in measure["charts"]}
    for name in ("Records per stage: passed, rejected, filtered", "Written conversations by provider format",
                 "Tool calls per conversation", "Validation issues by code", "Token lengths, chatml with qwen2.5",
                 "Ledger entries by kind"):
        chart = charts[name]
        width, height = chart["size"]
        assert 300 <= width <= 1200 and height >= 40, (name, chart)
        assert chart["marks"] > 0 and chart["labels"] > 0, (name, chart)
    # The script text sits in the flattened-call section and in the shortest conversations, visible.
    assert measure["holders"] >= 2 and measure["visible"] == measure["holders"]
    assert measure["page_width"] <= 1366  # no sideways scrolling on a laptop screen


def test_a_script_in_the_page_would_have_run(page, tmp_path):
    """The check above can fail: the same page with the transcript left unescaped loses its title."""
    raw = page.read_text().replace("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;", SCRIPT)
    assert raw != page.read_text()
    copy = tmp_path / "unescaped.html"
    copy.write_text(raw)
    assert Dom(chromium(tmp_path / "profile", "--dump-dom", copy.as_uri())).title == "pwned"


def test_screenshot(page, tmp_path):
    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1366, 900) and len(data) > 20_000  # not a blank page
