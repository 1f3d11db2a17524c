"""`sftprep render` and the token view: JSON equal to the render API on the bundled samples, the view's
cells tied to the real token stream (texts, mask, spans, ids), the terminal and HTML views showing
labels and marks, escaping of hostile transcript text, record selection and exit codes."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from corpus import params, tau_bench_trajectories
from rich.console import Console

from pipeline.render import tokenview
from pipeline.cli.main import main
from pipeline.conversation import tool_calls
from pipeline.cli.render import same_source, select
from pipeline.formats import parse
from pipeline.ingest import expand_paths, iter_parsed
from pipeline.render import FAMILIES, load_template, load_tokenizer, render

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
SAMPLES = sorted(p.name for p in DATA.glob("*.json*"))


@pytest.fixture(scope="module")
def qwen():
    return load_tokenizer("qwen2.5")


@pytest.fixture(scope="module")
def chatml():
    return load_template("chatml")


def run_cli(capsys, monkeypatch, *argv: str, columns: int = 200) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    code = main(["render", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def chat_record(user_text: str, arguments: str, result: str) -> dict:
    """An OpenAI Chat Completions request body as the API documents it: a call, its result, an answer."""
    return {"model": "gpt-4o-mini",
            "tools": [{"type": "function", "function": {
                "name": "lookup", "description": "Look a thing up.",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}],
            "messages": [{"role": "user", "content": user_text},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}]},
                         {"role": "tool", "tool_call_id": "call_1", "content": result},
                         {"role": "assistant", "content": "Done."}]}


# --- JSON: what the render API returns, one line per record and template ---------------------------

@pytest.mark.parametrize("sample", SAMPLES)
def test_json_equals_render_api(sample, qwen, chatml, capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, str(DATA / sample), "--template", "chatml", "--json", "--record", "all")
    lines = [json.loads(line) for line in out.splitlines()]
    parsed = list(iter_parsed(expand_paths([str(DATA / sample)])))
    assert [line["source"] for line in lines] == [item.source for item in parsed]
    assert code == (1 if any(item.conversation is None for item in parsed) else 0)
    for line, item in zip(lines, parsed):
        if item.conversation is None:
            assert line["template"] is None and line["error"]["code"] == item.error.code
            assert line["error"]["path"] == item.error.path
            continue
        expected = render(item.conversation, chatml, qwen)
        assert line["template"] == "chatml" and line["tokenizer"] == "qwen2.5"
        assert line["text"] == expected.text
        assert line["input_ids"] == expected.input_ids
        assert line["loss_mask"] == expected.loss_mask
        assert [(s["start"], s["end"], s["message"], s["block"], s["kind"]) for s in line["spans"]] == \
            [(s.token_start, s.token_end, s.message, s.block, s.kind) for s in expected.spans]
        assert [(e["kind"], e["path"], e["reason"]) for e in line["ledger"]] == \
            [(e.kind, e.path, e.reason) for e in expected.ledger]
        # Independently of the API: the ids spell the text, and the token ranges tile the ids.
        assert qwen.decode(line["input_ids"]) == line["text"]
        ends = [0] + [s["end"] for s in line["spans"]]
        assert [s["start"] for s in line["spans"]] == ends[:-1] and ends[-1] == len(line["input_ids"])


def test_json_parallel_calls_are_trained_results_masked(capsys, monkeypatch, qwen):
    """The first OpenAI sample: two parallel get_weather calls, two results, an answer."""
    _, out, _ = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--template", "chatml", "--json")
    (line,) = [json.loads(x) for x in out.splitlines()]
    assert line["source"].endswith("openai_chat.jsonl:1")
    ids, mask = line["input_ids"], line["loss_mask"]
    by_kind: dict[str, list[str]] = {}
    for s in line["spans"]:
        piece = qwen.decode(ids[s["start"]:s["end"]])
        by_kind.setdefault(s["kind"], []).append(piece)
        trained = set(mask[s["start"]:s["end"]])
        if s["kind"] in ("tool_call", "eot") or (s["kind"] == "text" and s["message"] == 4):
            assert trained == {1}, (s, piece)
        if s["kind"] in ("tool_result", "scaffold", "system", "tools") or (s["kind"] == "text" and s["message"] == 0):
            assert trained <= {0}, (s, piece)
    assert len(by_kind["tool_call"]) == 2
    assert "Tokyo" in by_kind["tool_call"][0] and "Kyoto" in by_kind["tool_call"][1]
    assert '"sky": "cloudy"' in by_kind["tool_result"][0]


# --- the view's cells are the real token stream ----------------------------------------------------

def _assert_cells_match(view: tokenview.View, rendered, tokenizer) -> None:
    cells = [cell for row in view.rows for cell in row.cells]
    assert [c.index for c in cells] == list(range(len(rendered.input_ids)))
    assert "".join(c.text for c in cells) == rendered.text
    assert [c.id for c in cells] == rendered.input_ids
    assert [int(c.trained) for c in cells] == rendered.loss_mask
    added = set(tokenizer.added_tokens.values())
    assert [c.special for c in cells] == [i in added for i in rendered.input_ids]
    for row, span in zip(view.rows, rendered.spans):
        assert row.span == span and [c.index for c in row.cells] == list(range(span.token_start, span.token_end))
    # Each token's own text re-encodes to itself unless it is part of a split character.
    for c in cells:
        if c.text and not (c.index + 1 < len(cells) and not cells[c.index + 1].text):
            assert tokenizer.decode([c.id]) == c.text


@pytest.mark.parametrize("sample", SAMPLES)
def test_cells_tile_the_render(sample, qwen, chatml):
    for item in iter_parsed(expand_paths([str(DATA / sample)])):
        if item.conversation is None:
            continue
        rendered = render(item.conversation, chatml, qwen)
        _assert_cells_match(tokenview.build_view(rendered, qwen, item.conversation), rendered, qwen)


@pytest.mark.parametrize("traj", params(tau_bench_trajectories()[:40]))
def test_cells_tile_long_corpus_sessions(traj, qwen, chatml):
    conv = parse(traj, "openai-chat", "messages")
    rendered = render(conv, chatml, qwen)
    view = tokenview.build_view(rendered, qwen, conv)
    _assert_cells_match(view, rendered, qwen)
    calls = [row for row in view.rows if row.span.kind == "tool_call"]
    assert len(calls) == len(tool_calls(conv))
    assert all(row.role == "assistant" and row.cells and all(c.trained for c in row.cells) for row in calls)


def test_split_characters_and_control_characters(qwen, chatml):
    conv = parse(chat_record("party 🎉 at 日本 \x1b[31mred\x1b[0m\tend", '{"q": "🎉"}', "ok"), "openai-chat")
    rendered = render(conv, chatml, qwen)
    view = tokenview.build_view(rendered, qwen, conv)
    _assert_cells_match(view, rendered, qwen)
    cells = [c for row in view.rows for c in row.cells]
    # qwen splits the emoji over three byte-level tokens: the text sits on the first, the others continue it.
    continued = [c for c in cells if not c.text]
    assert continued and all(cells[c.index - 1].text.endswith("🎉") or not cells[c.index - 1].text for c in continued)
    console = Console(record=True, width=200, color_system=None, file=open("/dev/null", "w"))
    console.print(tokenview.terminal_view(tokenview.RecordView("x:1", conv, (view,)), colors="plain"))
    text = console.export_text()
    assert "\x1b" not in text and "␛[│3│1│m│red" in text and "⇥" in text
    assert tokenview.CONTINUATION in text


# --- terminal --------------------------------------------------------------------------------------

def _record_view(path: str, index: int, setups) -> tokenview.RecordView:
    item = list(iter_parsed(expand_paths([path])))[index]
    results = []
    for template, tokenizer in setups:
        rendered = render(item.conversation, template, tokenizer)
        results.append(tokenview.build_view(rendered, tokenizer, item.conversation))
    return tokenview.RecordView(item.source, item.conversation, tuple(results))


def test_colour_row_styles_follow_the_mask(qwen, chatml):
    record = _record_view(str(DATA / "openai_chat.jsonl"), 0, [(chatml, qwen)])
    palette = tokenview.PALETTES["256"]
    for row in record.results[0].rows:
        text = tokenview.row_text(row, colors="256")
        styled = [str(span.style) for span in text.spans]  # one styled piece per token, in order
        assert len(styled) == len(row.cells)
        for cell, style in zip(row.cells, styled):
            shade = (palette.trained_bg if cell.trained else palette.masked_bg)[cell.index % 2]
            assert style.endswith(f" on {shade}"), (row.label, cell, style)
            assert style.startswith(palette.special_fg if cell.special else
                                    palette.trained_fg if cell.trained else palette.masked_fg), (row.label, cell, style)


def test_terminal_plain_labels_and_marks(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--template", "chatml")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("⟦trained⟧")
    assert "openai_chat.jsonl:1" in lines[1] and "openai-chat" in lines[1]
    labelled = {line.split("|")[0].strip(): line.split("|", 1)[1] for line in lines if "|" in line[:20]}
    assert "⟦get│_weather" in labelled["m1.b0 tool_call"] and "Tok│yo" in labelled["m1.b0 tool_call"]
    assert labelled["m1 eot"].strip() == "⟦<|im_end|>⟧"
    assert "⟦" not in labelled["m2.b0 tool_result"] and "cloud│y" in labelled["m2.b0 tool_result"]
    assert labelled["m0.b0 text"].strip() == "Weather│ in│ Tokyo│ and│ Kyoto│?"
    assert "⟦Tok│yo│:" in labelled["m4.b0 text"]
    assert labelled["tools[0]"].lstrip().startswith('{"│type│":')
    assert lines[-1] == "ledger chatml: nothing lost"


def test_terminal_plain_rows_bracket_exactly_the_trained_tokens(qwen, chatml):
    record = _record_view(str(DATA / "anthropic_requests.jsonl"), 1, [(chatml, qwen)])
    for row in record.results[0].rows:
        plain = tokenview.row_text(row, colors="plain", ids=True).plain
        inside = "".join(re.findall(r"⟦(.*?)⟧", plain, flags=re.S))
        trained = [c for c in row.cells if c.trained]
        strip_ids = re.sub(r"‹\d+›", "", inside).replace("│", "").replace("\n", "")
        assert strip_ids == "".join(tokenview.visible(c.text) for c in trained).replace("\n", "")
        assert re.findall(r"‹(\d+)›", plain) == [str(c.id) for c in row.cells]


def test_ids_in_colour_are_subscripts(qwen, chatml):
    record = _record_view(str(DATA / "openai_chat.jsonl"), 3, [(chatml, qwen)])
    row = record.results[0].rows[0]
    text = tokenview.row_text(row, ids=True, colors="256").plain
    assert "<|im_start|>₁₅₁₆₄₄system₈₉₄₈" in text


def test_terminal_ledger_and_side_by_side(qwen, chatml, capsys, monkeypatch):
    template_file = str(ROOT / "templates" / "chatml.jinja")
    code, out, _ = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--record", "3",
                           "--template", f"chatml,{template_file}", "--tokenizer", "qwen2.5", columns=220)
    assert code == 0
    header = next(line for line in out.splitlines() if "239 tokens" in line)
    assert re.search(r"chatml · qwen2\.5 · 239 tokens, 38 trained.*chatml\.jinja · qwen2\.5 · 239 tokens", header)
    assert "ledger chatml: 1 entry" in out and "synthesized" in out and "$.system" in out
    # Too narrow for two columns: one under the other.
    _, narrow, _ = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--record", "3",
                           "--template", f"chatml,{template_file}", "--tokenizer", "qwen2.5", columns=80)
    assert not any(line.count("239 tokens") == 2 for line in narrow.splitlines())
    assert narrow.count("239 tokens") == 2


@pytest.mark.skipif("llama3" not in FAMILIES, reason="the llama3 family is not registered yet")
def test_side_by_side_chatml_and_llama3(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--template", "chatml,llama3",
                           columns=240)
    assert code == 0
    assert any("chatml · qwen2.5" in line and f"llama3 · {FAMILIES['llama3'].default_tokenizer}" in line
               for line in out.splitlines())
    _, out, _ = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--template", "chatml,llama3", "--json")
    lines = [json.loads(x) for x in out.splitlines()]
    assert [(x["template"], x["tokenizer"]) for x in lines] == \
        [("chatml", "qwen2.5"), ("llama3", FAMILIES["llama3"].default_tokenizer)]
    llama = load_tokenizer(FAMILIES["llama3"].default_tokenizer)
    assert llama.decode(lines[1]["input_ids"]) == lines[1]["text"]


# --- HTML --------------------------------------------------------------------------------------------

class _PageText(HTMLParser):
    """The page's elements and the text of each token span, as a browser would see them."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.tokens: list[dict] = []
        self._in_token = self._in_sub = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "span" and "t" in (attrs.get("class") or "").split() and "title" in attrs:
            self.tokens.append({"class": attrs["class"].split(), "title": attrs["title"], "text": ""})
            self._in_token = 1
        elif tag == "sub":
            self._in_sub = 1

    def handle_endtag(self, tag):
        if tag == "sub":
            self._in_sub = 0
        elif tag == "span":
            self._in_token = 0

    def handle_data(self, data):
        if self._in_token and not self._in_sub:
            self.tokens[-1]["text"] += data


def test_html_escapes_an_injected_script(tmp_path, capsys, monkeypatch, qwen, chatml):
    hostile = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'
    record = chat_record(hostile, json.dumps({"q": '"><script>alert(2)</script>'}), "</span></div><b>bold</b>")
    source = tmp_path / "hostile.jsonl"
    source.write_text(json.dumps(record) + "\n")
    page_path = tmp_path / "out" / "view.html"
    code, _, err = run_cli(capsys, monkeypatch, str(source), "--template", "chatml", "--html", str(page_path), "--ids")
    assert code == 0 and "wrote" in err
    page = page_path.read_text()
    assert "<script" not in page.lower() and "<img" not in page.lower() and "<b>bold" not in page
    assert not re.search(r"https?://|src=|@import", page), "the page must not load anything"
    parser = _PageText()
    parser.feed(page)
    assert set(parser.tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "div", "span",
                                "sub", "code", "table", "caption", "tr", "td", "b", "br"}
    conv = next(iter_parsed([source])).conversation
    rendered = render(conv, chatml, qwen)
    shown = [tokenview.visible(t) if t else tokenview.CONTINUATION
             for t in (c.text for row in tokenview.build_view(rendered, qwen, conv).rows for c in row.cells)]
    assert [t["text"] for t in parser.tokens] == shown  # legend swatches have no title, so they are not counted
    assert "".join(t["text"] for t in parser.tokens).replace("↵", "") == rendered.text
    first_call = next(s for s in rendered.spans if s.kind == "tool_call")
    title = parser.tokens[first_call.token_start]["title"]
    assert f"#{first_call.token_start} id {rendered.input_ids[first_call.token_start]}" in title
    assert "m1.b0 tool_call (assistant) · trained" in title
    assert "tr" in parser.tokens[first_call.token_start]["class"]
    assert "legend" in page and "trained" in page


def test_html_two_templates_and_a_failure(tmp_path, capsys, monkeypatch):
    page_path = tmp_path / "view.html"
    failing = tmp_path / "raises.jinja"
    failing.write_text('{{ raise_exception("this template refuses <everything>") }}')
    code, _, err = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--template", "chatml",
                           "--template", str(failing), "--tokenizer", "qwen2.5", "--html", str(page_path))
    assert code == 1
    assert "template_error" in err
    page = page_path.read_text()
    assert "grid-template-columns: repeat(2, minmax(0, 1fr))" in page
    assert "could not render" in page and "refuses &lt;everything&gt;" in page
    assert not list(tmp_path.glob(".*partial"))


# --- record selection and exit codes -----------------------------------------------------------------

def test_record_by_number_and_by_source(capsys, monkeypatch):
    path = str(DATA / "openai_chat.jsonl")
    sources = [item.source for item in iter_parsed([path])]
    assert [i.source for i in select(iter_parsed([path]), "3")] == [sources[2]]
    assert [i.source for i in select(iter_parsed([path]), "all")] == sources
    assert [i.source for i in select(iter_parsed([path]), sources[1])] == [sources[1]]
    relative = f"{Path(path).relative_to(ROOT)}:2"
    monkeypatch.chdir(ROOT)
    assert [i.source for i in select(iter_parsed([path]), relative)] == [sources[1]]
    assert same_source(f"./{relative}", f"{relative}#interactions[0]")
    assert not same_source(f"{relative}#interactions[1]", f"{relative}#interactions[0]")
    assert not same_source("data/openai_chat.jsonl:2", "data/openai_chat.jsonl:21")
    _, out, _ = run_cli(capsys, monkeypatch, path, "--template", "chatml", "--json", "--record", relative)
    assert [json.loads(x)["source"] for x in out.splitlines()] == [sources[1]]


@pytest.mark.parametrize("argv, message", [
    (["--template", "nope"], "unknown template 'nope'; valid: chatml"),
    (["--template", "chatml", "--record", "99"], "--record 99: the input holds 4 records"),
    (["--template", "chatml", "--record", "0"], "counts from 1"),
    (["--template", "chatml", "--record", "elsewhere.jsonl:1"], "no record with that source"),
    (["--template", "chatml", "--mask", "some"], "unknown mask policy"),
    (["--template", "chatml", "--tokenizer", "llama3"], "lacks <|im_start|>"),
    (["--template", str(ROOT / "templates" / "chatml.jinja")], "name its tokenizer with --tokenizer"),
])
def test_usage_errors_exit_2(argv, message, capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), *argv)
    assert code == 2
    assert message in err and out == ""


def test_argparse_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["render", str(DATA / "openai_chat.jsonl"), "--calls", "sideways"])
    assert exc.value.code == 2 and "--calls" in capsys.readouterr().err


def test_unreadable_and_unrenderable_records_exit_1(tmp_path, capsys, monkeypatch):
    code, out, err = run_cli(capsys, monkeypatch, str(DATA / "broken.jsonl"), "--template", "chatml", "--record", "3")
    assert code == 1
    assert "broken.jsonl:3" in err and "$.messages[0].content[0]" in err and "invalid_record" in err
    assert "could not read this record" in out
    twice = tmp_path / "twice.jinja"  # writes every message twice: spans cannot be told apart
    twice.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{{ m.content }}<|im_end|>\n"
                     "{% endfor %}")
    code, out, err = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--template", f"chatml,{twice}",
                             "--tokenizer", "qwen2.5", "--json")
    assert code == 1
    ok, failed = [json.loads(x) for x in out.splitlines()]
    assert ok["template"] == "chatml" and "input_ids" in ok
    assert failed["template"] == str(twice) and failed["error"]["code"] == "render_duplicated"
    assert failed["error"]["path"] == "$.system[0]"  # the record's system prompt, written first
    assert f"template {twice}: at {failed['error']['path']}" in err
    dropping = tmp_path / "drops.jinja"  # skips assistant turns: what it loses is ledgered, not hidden
    dropping.write_text("{% for m in messages %}{% if m.role != 'assistant' %}<|im_start|>{{ m.role }}\n"
                        "{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}")
    code, out, err = run_cli(capsys, monkeypatch, str(DATA / "openai_chat.jsonl"), "--template", str(dropping),
                             "--tokenizer", "qwen2.5", "--json")
    (view,) = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and not any(view["loss_mask"])
    assert {e["path"] for e in view["ledger"] if e["kind"] == "dropped"} >= {"$.messages[1].blocks[0]",
                                                                             "$.messages[1].blocks[1]"}
