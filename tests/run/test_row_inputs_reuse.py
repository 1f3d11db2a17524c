"""A row's `messages` and `tools` columns come from the template inputs its own render built (not built a
second time): on the samples, this suite's export fixture and the corpus, for every built-in family and a
user template, they equal, byte for byte, what a fresh build of the inputs gives, and so do the per-message
trained flags the exports weight turns by."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import export_runs
from pipeline import jsonpolicy
from pipeline.errors import SftprepError
from pipeline.ingest.shapes import expand_paths, iter_raw
from pipeline.run.config import load_config
from pipeline.render.marks import BlockRef, Marks
from pipeline.run.exports import rendered_chat
from pipeline.run.exports.chat import _strip
from pipeline.run.stages import WORKER_STAGES, Context, _items
from trl_templates import trl_template

FAMILIES = [("chatml", "qwen2.5"), ("qwen3", "qwen3"), ("llama3", "llama3"), ("mistral", "mistral"),
            ("harmony", "gpt-oss"), ("user", "qwen2.5")]


def _conversations(ctx: Context, paths: list[str]):
    """Every conversation that reaches the render stage: read, parsed, validated and shaped as a run does."""
    for raw in iter_raw(expand_paths(paths), defer=True):
        for item in _items(raw):
            for _, steps in WORKER_STAGES[:-1]:
                for step in steps:
                    step(item, ctx)
                    if item.outcome is not None:
                        break
                if item.outcome is not None:
                    break
            else:
                yield item.conversation


@pytest.mark.parametrize("family, tokenizer", FAMILIES, ids=[f for f, _ in FAMILIES])
def test_the_columns_from_the_render_inputs_equal_a_fresh_build(family, tokenizer, tmp_path):
    template = family
    if family == "user":  # a user template (sandboxed, whitespace outside its sentinels, mark verification)
        template = str(tmp_path / "qwen2_5_training.jinja")
        (tmp_path / "qwen2_5_training.jinja").write_text(trl_template("qwen2_5_training.jinja"), encoding="utf-8")
    paths = export_runs.inputs(corpus=export_runs.corpus_available())
    config = load_config(export_runs.ROOT / "configs" / "default.toml",
                         {"input.paths": paths, "render.template": template, "render.tokenizer": tokenizer,
                          "scrub.enabled": False})
    ctx = Context(config)
    renderer = ctx.renderer
    compared = 0
    for conv in _conversations(ctx, paths):
        try:
            rendered, ids, mask, marked = renderer.render_buffers(conv)
        except SftprepError:  # what a family cannot render has no row to compare
            continue
        reused = rendered_chat(conv, renderer, rendered, mask, marked)
        fresh = rendered_chat(conv, renderer, rendered, mask)
        assert jsonpolicy.dumps(reused.messages) == jsonpolicy.dumps(fresh.messages), conv.meta.source
        assert jsonpolicy.dumps(reused.tools) == jsonpolicy.dumps(fresh.tools), conv.meta.source
        assert reused.trained == fresh.trained, conv.meta.source
        compared += 1
    assert compared >= (100 if export_runs.corpus_available() else 5)


_KEYS = st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0xEFFFF), max_size=8)
_SCALARS = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.floats(allow_nan=False)
            | st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0xEFFFF), max_size=12))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                       | st.dictionaries(_KEYS | st.integers(0, 9), inner, max_size=4), max_leaves=20)


@given(st.dictionaries(_KEYS, _VALUES, max_size=5), st.lists(_SCALARS.filter(lambda v: isinstance(v, str)), max_size=3),
       st.booleans())
def test_stripping_a_marked_value_gives_the_plain_value(value, texts, edges_outside):
    """Marked dicts (copied in C when msgpack can hold them: big ints, int keys and tuples included),
    marked texts alone (a slice) and joined (a scan) come back as the plain values, noting the message
    of every pair they held."""
    marks = Marks(edges_outside=edges_outside)
    pieces = [marks.text(t, BlockRef("text", 5 + i, i, "$")) for i, t in enumerate(texts)]
    marked = {"arguments": marks.json(value, BlockRef("tool_call", 3, 0, "$")), "texts": pieces,
              "joined": "\n".join(pieces), "anchor": marks.text("", BlockRef("text", 9, None, "$"), anchor=True)}
    sources: set[int] = set()
    plain = _strip(marked, marks, sources)
    assert plain == {"arguments": _listed(value), "texts": texts, "joined": "\n".join(texts), "anchor": ""}
    assert type(plain["arguments"]) is dict
    assert sources == {3, 9} | {5 + i for i, t in enumerate(texts) if t}
    assert _strip(marked, marks, None) == plain
    for i, (piece, text) in enumerate(zip(pieces, texts)):
        one: set[int] = set()
        assert _strip(piece, marks, one) == text
        assert one == ({5 + i} if text else set())


def _listed(value):
    if isinstance(value, dict):
        return {k: _listed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_listed(v) for v in value]
    return value
