"""A row without exports takes its `messages` and `tools` columns from the template inputs' JSON with the
sentinels cut out (`chat_json`), not from the plain copy `rendered_chat` makes: wherever `chat_json`
answers, its bytes equal the copy's JSON, for every built-in family and a user template on the samples and
the corpus, and on generated conversations whose ids, names, texts and arguments hold private-use
characters (sentinels among them); where the shortcut would not be exact, it declines."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import export_runs
from pipeline import jsonpolicy
from pipeline.conversation import Conversation, Message, Text, Tool, ToolCall, ToolResult
from pipeline.errors import SftprepError
from pipeline.render.marks import MARK_RE
from pipeline.run.config import load_config
from pipeline.run.exports import rendered_chat
from pipeline.run.exports.chat import _cut_sentinels, chat_json
from pipeline.run.item import conversation_json
from pipeline.run.stages import Context
from test_row_inputs_reuse import FAMILIES, _conversations
from trl_templates import trl_template


def _renderer(template: str, tokenizer: str, paths: list[str], tmp_path):
    if template == "user":
        (tmp_path / "qwen2_5_training.jinja").write_text(trl_template("qwen2_5_training.jinja"), encoding="utf-8")
        template = str(tmp_path / "qwen2_5_training.jinja")
    config = load_config(export_runs.ROOT / "configs" / "default.toml",
                         {"input.paths": paths, "render.template": template, "render.tokenizer": tokenizer,
                          "scrub.enabled": False})
    ctx = Context(config)
    return ctx, ctx.renderer


def _compare(conv: Conversation, renderer) -> str:
    """'fast' when chat_json answered (and agreed, from the render's inputs and from a fresh build),
    'general' when it declined, 'refused' when the family cannot render the conversation."""
    try:
        rendered, ids, mask, marked = renderer.render_buffers(conv)
    except SftprepError:
        return "refused"
    chat = rendered_chat(conv, renderer, rendered, mask, marked)
    expected = (jsonpolicy.dumps(chat.messages), jsonpolicy.dumps(chat.tools))
    conversation = conversation_json(conv)
    fast = chat_json(conv, conversation, renderer, marked)
    assert chat_json(conv, conversation, renderer) == fast  # inputs built again: the same answer
    if fast is None:
        return "general"
    assert fast == expected, conv.meta.source
    return "fast"


@pytest.mark.parametrize("family, tokenizer", FAMILIES, ids=[f for f, _ in FAMILIES])
def test_on_the_samples_and_the_corpus(family, tokenizer, tmp_path):
    paths = export_runs.inputs(corpus=export_runs.corpus_available())
    ctx, renderer = _renderer(family, tokenizer, paths, tmp_path)
    outcomes = [_compare(conv, renderer) for conv in _conversations(ctx, paths)]
    assert outcomes.count("fast") >= (100 if export_runs.corpus_available() else 5)


# Characters at and around the sentinels' planes: sentinels themselves (both planes), the planes'
# noncharacters, U+C0000-U+EFFFF (same lead byte as the first plane), and ordinary text.
_ODD = st.sampled_from(["\U000F0002", "\U000F0003", "\U000F0004", "\U000F0005", "\U000FFFFD", "\U000FFFFE",
                        "\U000FFFFF", "\U00100000", "\U0010FFFD", "\U0010FFFF", "\U000C0000", "\U000EFFFF",
                        "\U000E0001", "é", "中", "😀", "a", "\n"])
_PLAIN = st.text(st.characters(blacklist_categories=("Cs",), max_codepoint=0xBFFFF), max_size=8)
# Most fields plain (so most conversations render), some with the odd characters.
_TEXT = _PLAIN | _PLAIN | _PLAIN | _PLAIN | _PLAIN | _PLAIN | st.lists(_ODD | _PLAIN, max_size=5).map("".join)


@st.composite
def _odd_conversations(draw) -> Conversation:
    """A call and its result whose ids, names, texts and arguments hold those characters; with one
    unmarked id shaped like a marked piece (a pair around a third sentinel) now and then."""
    call_id = draw(_TEXT | st.just("\U000F0002\U000F0010\U000F0003"))
    provider_id = draw(st.none() | _TEXT)
    name = draw(st.sampled_from(["lookup"] * 4 + ["find\U000F0002", "x\U000C0000"]))
    key = draw(st.sampled_from(["q"] * 4 + ["q\U000F0006", "k\U000E0001"]))
    arguments = {key: draw(_TEXT)}
    raw = None
    if draw(st.booleans()):  # arguments kept as their raw string, characters escaped in it
        raw, arguments = json.dumps(arguments), None
    call = ToolCall(id=call_id, name=name, provider_id=provider_id,
                    **({"arguments": arguments} if arguments is not None else {"raw_arguments": raw}))
    result = ToolResult(call_id=call_id, provider_id=provider_id, name=draw(st.none() | _TEXT),
                        content=(Text(draw(_TEXT)),))
    messages = (Message(role="user", blocks=(Text(draw(_TEXT) or "hi"),)),
                Message(role="assistant", blocks=(Text(draw(_TEXT)), call)),
                Message(role="tool", blocks=(result,)),
                Message(role="assistant", blocks=(Text(draw(_TEXT) or "done"),)))
    tools = (Tool(name=name, description=draw(_TEXT), parameters={"type": "object", "properties": {}}),)
    return Conversation(messages=messages, system=(Text(draw(_TEXT) or "sys"),), tools=tools)


@pytest.fixture(scope="module")
def chatml(tmp_path_factory):
    return _renderer("chatml", "qwen2.5", [str(export_runs.ROOT / "data")], tmp_path_factory.mktemp("t"))[1]


@settings(max_examples=300, deadline=None)
@given(_odd_conversations())
def test_private_use_characters_anywhere(chatml, conv):
    _compare(conv, chatml)


def test_an_unmarked_id_shaped_like_a_marked_piece_takes_the_general_path(chatml):
    """`_strip` slices such an id (keeping the sentinel inside), where cutting every sentinel would not."""
    call_id = "\U000F0002\U000F0010\U000F0003"
    call = ToolCall(id=call_id, name="lookup", provider_id=call_id, arguments={"q": "x"})
    conv = Conversation(messages=(Message(role="user", blocks=(Text("hi"),)),
                                  Message(role="assistant", blocks=(call,)),
                                  Message(role="tool", blocks=(ToolResult(call_id=call_id, provider_id=call_id,
                                                                          content=(Text("ok"),)),)),
                                  Message(role="assistant", blocks=(Text("done"),))))
    assert _compare(conv, chatml) == "general"


@given(st.lists(_ODD | st.text(max_size=4) | st.sampled_from(['"', "\\", "\x01"]), max_size=12).map("".join))
def test_cutting_sentinels_from_json(text):
    """The cut removes exactly MARK_RE's characters, or declines: on a character of the second plane and
    on any other character with the lead byte F3."""
    data = jsonpolicy.dumps({"k": text})
    cut = _cut_sentinels(data)
    declines = any(0xC0000 <= ord(c) and not (MARK_RE.fullmatch(c) and ord(c) < 0x100000) for c in text)
    assert (cut is None) == declines
    if cut is not None:
        assert cut == jsonpolicy.dumps({"k": MARK_RE.sub("", text)})
