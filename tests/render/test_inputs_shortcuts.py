"""The template inputs' shortcuts give what the general code gives: a whole tool list from its cache equals
the list built tool by tool (contents, sentinels, JSON texts, refs, ledger, errors); a one-text join is the
join; the built-in templates compiled with inline item reads render what the plain compilation renders."""

from __future__ import annotations

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corpus import params, request_bodies, tau_bench_trajectories
from pipeline.conversation import Conversation, Message, Text, Tool
from pipeline.errors import SftprepError
from pipeline.formats import parse
from pipeline.ledger import Ledger
from pipeline.render import _inputs, load_template
from pipeline.render._tool_inputs import _join
from pipeline.render.marks import Marks
from pipeline.render.registry import FAMILIES
from pipeline.render.rendered import RenderOptions
from pipeline.render.templates import Template, _configured, _InlineGeneration, _TrustedEnvironment


def _dump(value):
    """A value with the marks a template's `tojson` reads from it, for exact comparison."""
    if isinstance(value, dict):
        return (type(value).__name__, getattr(value, "sftprep_marks", None), getattr(value, "sftprep_json", None),
                [(key, _dump(item)) for key, item in value.items()])
    if isinstance(value, (list, tuple)):
        return [_dump(item) for item in value]
    return value


def _built(conv: Conversation, family_name: str = "chatml"):
    family = FAMILIES[family_name]
    marks, ledger = Marks(), Ledger("test")
    try:
        inputs = family.inputs(conv, marks, ledger, RenderOptions())
    except SftprepError as exc:
        return "error", str(exc), exc.path, ledger.entries
    return _dump(inputs.messages), _dump(inputs.tools), inputs.origins, marks.refs, marks.repeatable, ledger.entries


def _tool_by_tool(conv: Conversation, family_name: str, monkeypatch):
    with monkeypatch.context() as patched:
        patched.setattr(_inputs, "_cached_tools", lambda tools: None)
        return _built(conv, family_name)


def _corpus_conversations() -> list[tuple[str, Conversation]]:
    out = [(key, parse(traj, "openai-chat")) for key, traj in tau_bench_trajectories()[:30]]
    for key, body in request_bodies():
        try:
            out.append((key, parse(body)))
        except SftprepError:
            continue
    return out


@pytest.mark.parametrize("family", ["chatml", "qwen3", "llama3"])
@pytest.mark.parametrize("conv", params(_corpus_conversations()))
def test_cached_tool_lists_equal_the_tool_by_tool_build_on_the_corpus(conv, family, monkeypatch):
    expected = _tool_by_tool(conv, family, monkeypatch)
    assert _built(conv, family) == expected  # fills the cache (or takes the general path)
    assert _built(conv, family) == expected  # from the cache


_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                     | st.text(max_size=6), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)
_tools = st.lists(st.builds(Tool, name=st.sampled_from(["f", "g", "lookup"]),
                            description=st.none() | st.sampled_from(["", "Find ü", "see \U000F0003 here"]),
                            parameters=st.dictionaries(st.sampled_from(["type", "default"]), _json, max_size=2),
                            kind=st.sampled_from(["function", "function", "hosted", "custom"])), max_size=4)


@settings(max_examples=300, deadline=None)
@given(_tools)
def test_cached_tool_lists_equal_the_tool_by_tool_build(tools):
    conv = Conversation(tools=tuple(tools), messages=(Message(role="user", blocks=(Text("hi"),)),
                                                      Message(role="assistant", blocks=(Text("ok"),))))
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = _tool_by_tool(conv, "chatml", monkeypatch)
    assert _built(conv) == expected
    assert _built(conv) == expected


@given(st.lists(st.text(max_size=3), max_size=3), st.sampled_from(["\n", "\n\n", ""]))
def test_one_text_join_is_the_join(texts, joiner):
    assert _join(joiner, texts) == joiner.join(t for t in texts if t)


# --- the built-in templates compiled with inline item reads ---------------------------------------------

class _PlainCompiled(_TrustedEnvironment):
    code_generator_class = jinja2.compiler.CodeGenerator


_PLAIN_ENV = _configured(_PlainCompiled, _InlineGeneration)


def _render_both(name: str, conv: Conversation):
    template = load_template(name)
    plain = Template(name=name, source=template.source, family=template.family, builtin=True,
                     compiled=_PLAIN_ENV.from_string(template.source))
    out = []
    for each in (template, plain):
        try:
            inputs = each.family.inputs(conv, Marks(), Ledger(name), RenderOptions())
            out.append(each.render_raw(inputs, None, RenderOptions()))
        except SftprepError as exc:
            out.append(("error", str(exc)))
    return out


@pytest.mark.parametrize("family", ["chatml", "qwen3", "llama3", "mistral", "harmony"])
@pytest.mark.parametrize("conv", params(_corpus_conversations()[:60]))
def test_inline_item_reads_render_as_the_plain_compilation(conv, family):
    ours, plain = _render_both(family, conv)
    assert ours == plain


@given(st.lists(st.text(max_size=4), min_size=1, max_size=3), st.sampled_from(["\n", "\n\n"]))
def test_a_result_with_one_text_part_is_that_text(texts, joiner):
    from pipeline.conversation import ToolResult
    from pipeline.render._tool_inputs import result_text

    result = ToolResult(call_id="c1", content=tuple(Text(t) for t in texts))
    assert result_text(result, Ledger("test"), "$.r", "test", joiner) == joiner.join(t for t in texts if t)
