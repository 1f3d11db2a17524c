"""The terminal token view lines templates up: on a record whose templates write different amounts
(llama3 writes tool schemas indented and splits a turn of parallel calls; chatml does neither), every
span both write starts on the same line in both columns, each message is headed by its token count and
trained share, and a terminal too narrow for the columns says they are stacked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.ingest import expand_paths, iter_parsed
from pipeline.render import load_template, load_tokenizer, render, tokenview

DATA = Path(__file__).resolve().parents[2] / "data"
ROLES = {"system", "developer", "user", "assistant", "tool"}


@pytest.fixture(scope="module")
def record():
    """anthropic_requests.jsonl:1: two tools, two parallel calls, their results, an answer."""
    item = next(iter(iter_parsed(expand_paths([str(DATA / "anthropic_requests.jsonl")]))))
    views = []
    for name in ("chatml", "llama3"):
        template = load_template(name)
        tokenizer = load_tokenizer(template.family.default_tokenizer)
        views.append(tokenview.build_view(render(item.conversation, template, tokenizer), tokenizer, item.conversation))
    return tokenview.RecordView(item.source, item.conversation, tuple(views))


def _plain(record, width: int) -> list[str]:
    console = Console(width=width, color_system=None, record=True, file=open("/dev/null", "w"))
    console.print(tokenview.terminal_view(record, colors="plain", width=width))
    return console.export_text().splitlines()


def _columns(lines: list[str]) -> list[tuple[int, int]]:
    """The label columns' character ranges, from the table's header rule (`---+---+---+---`)."""
    rule = next(line for line in lines if re.fullmatch(r"[-+]+", line.strip()) and "+" in line)
    bars = [m.start() for m in re.finditer(r"\+", rule)]
    return [(0, bars[0])] + [(bars[k] + 1, bars[k + 1]) for k in range(1, len(bars) - 1, 2)]


def _starts(lines: list[str], column: tuple[int, int]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(line, label) where a row starts in one label column: span rows and message headings apart."""
    rule = next(n for n, line in enumerate(lines) if re.fullmatch(r"[-+]+", line.strip()) and "+" in line)
    rows, heads = [], []
    for n, line in enumerate(lines[rule + 1:], start=rule + 1):
        if line.startswith("ledger "):
            break
        label = line[column[0]:column[1]].strip()
        if label:
            (heads if label.split()[-1] in ROLES and "." not in label else rows).append((n, label))
    return rows, heads


def test_spans_both_templates_write_start_on_the_same_line(record):
    chatml, llama3 = record.results
    lines = _plain(record, 240)
    left, right = _columns(lines)
    (rows_l, heads_l), (rows_r, heads_r) = _starts(lines, left), _starts(lines, right)
    # Each column shows every row of its template once, in the template's order.
    assert [label for _, label in rows_l] == [row.label for row in chatml.rows]
    assert [label for _, label in rows_r] == [row.label for row in llama3.rows]
    line_of = [{id(row): n for row, (n, _) in zip(view.rows, rows)} for view, rows in ((chatml, rows_l), (llama3, rows_r))]
    paired = padded = 0
    for _, (a, b) in tokenview.aligned_rows([chatml, llama3]):
        if a is not None and b is not None:
            assert line_of[0][id(a)] == line_of[1][id(b)], (a.label, b.label)
            paired += 1
        else:
            padded += 1
    assert paired >= 12 and padded >= 3  # tools, messages and blocks paired; llama3's extra turns padded
    # llama3's indented tool schema takes more lines than chatml's one-line one; the next tool still lines up.
    n_l = dict((label, n) for n, label in rows_l)
    n_r = dict((label, n) for n, label in rows_r)
    assert n_l["tools[1]"] == n_r["tools[1]"] and n_l["m3.b0 text"] == n_r["m3.b0 text"]
    assert n_l["tools[1]"] - n_l["tools[0]"] > 20 and any(line[left[0]:left[1]].strip() == "" and
                                                          line[right[0]:].strip() for line in lines)
    assert [n for n, _ in heads_l] == [n for n, _ in heads_r] and [h for _, h in heads_l] == [h for _, h in heads_r]


def test_each_message_is_headed_by_its_tokens_and_trained_share(record):
    lines = _plain(record, 240)
    for view, column in zip(record.results, _columns(lines)):
        rendered = view.rendered
        _, heads = _starts(lines, column)
        assert [label for _, label in heads] == [f"m{k} {m.role}" for k, m in enumerate(record.conversation.messages)]
        for n, label in heads:
            message = int(label.split()[0][1:])
            tokens = [i for s in rendered.spans if s.message == message for i in range(s.token_start, s.token_end)]
            trained = sum(rendered.loss_mask[i] for i in tokens)
            share = f"{trained / len(tokens):.0%}" if trained else "none"
            assert f"{len(tokens)} tokens, {trained} trained ({share})" in lines[n][column[1]:], (view.template, label)


def test_a_narrow_terminal_says_the_views_are_stacked(record):
    narrow = "\n".join(_plain(record, 80))
    assert "stacked: side by side needs 96 columns, the terminal has 80" in narrow
    assert not any(line.count(" tokens, ") == 2 and "trained" in line for line in narrow.splitlines())
    wide = "\n".join(_plain(record, 160))
    assert "stacked" not in wide
