"""Helpers shared by the render tests: the hand-written canonical fixtures, goldens, official template hashes,
and the checks the families' tests share. Plain module, so pytest does not rewrite its asserts: the checks
fail with messages of their own (pytest.fail) that show where renders differ."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from msgspec import UNSET, structs

from pipeline.conversation import Conversation, Message, Text, ToolCall, ToolResult, from_json
from pipeline.errors import ShapeError
from pipeline.formats import parse
from pipeline.render import mask_view

FIXTURES = Path(__file__).parent / "fixtures"
GOLDENS = Path(__file__).parent / "goldens"

# sha256 of the official templates inside trl 1.16.0 (see ../shared/reference/REFERENCE.md).
OFFICIAL = {
    "qwen2_5.jinja": "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f",
    "qwen2_5_training.jinja": "0cd86fb80f520885e35040a8df321540e729d3358da41f27cf74d33103d94f62",
    "llama3_1.jinja": "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65",
    "llama3_2.jinja": "5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4",
    "gptoss.jinja": "a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146",
    "gptoss_training.jinja": "6adda7cea0f63ef14918be7f26100b324525b6185a8f06932914388ffaa52e32",
    "qwen3.jinja": "a55ee1b1660128b7098723e0abcd92caa0788061051c62d51cbe87d9cf1974d8",
    "qwen3_training.jinja": "1d944ff8f268b611abb296cdd24d0f51981eef1c8647ac321c3a0258f61eb6c9",
}


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def load_fixture(name: str) -> Conversation:
    return from_json((FIXTURES / f"{name}.json").read_bytes())


# --- comparing renders ------------------------------------------------------------------------------

def _first_difference(a, b) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def assert_same(expected_text: str, expected_ids: list[int], actual_text: str, actual_ids: list[int],
                what: str = "renders differ") -> None:
    """On failure, show both texts and both id lists from the first difference."""
    if expected_text == actual_text and expected_ids == actual_ids:
        return
    at = _first_difference(expected_ids, actual_ids)
    char = _first_difference(expected_text, actual_text)
    where_text = "texts are equal" if expected_text == actual_text else f"first text difference at char {char}"
    pytest.fail(f"{what} (first id difference at token {at}, {where_text})\n"
                f"expected ids[{at}:]: {expected_ids[at:at + 40]}\nactual ids[{at}:]:   {actual_ids[at:at + 40]}\n"
                f"expected text: {expected_text[max(0, char - 80):char + 200]!r}\n"
                f"actual text:   {actual_text[max(0, char - 80):char + 200]!r}\n"
                f"--- expected full text ---\n{expected_text}\n--- actual full text ---\n{actual_text}")


def assert_same_list(expected: list, actual: list, what: str) -> None:
    """On failure, show both lengths and both lists from the first difference."""
    if expected == actual:
        return
    at = _first_difference(expected, actual)
    pytest.fail(f"{what}: first difference at index {at} (lengths: expected {len(expected)}, actual {len(actual)})\n"
                f"expected[{at}:]: {expected[at:at + 40]}\nactual[{at}:]:   {actual[at:at + 40]}")


def transformers_render(hf, template: str, messages: list[dict], tools: list[dict] | None,
                        **kwargs) -> tuple[str, list[int]]:
    """Text and ids as transformers renders `template` (apply_chat_template, as text and tokenized)."""
    text = hf.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False, **kwargs)
    ids = hf.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True, return_dict=True,
                                 **kwargs)["input_ids"]
    return text, list(ids)


def assert_mask_matches_transformers(conv: Conversation, transformers_mask, rendered) -> None:
    """transformers' assistant mask (`return_assistant_tokens_mask=True`) equals ours under the default
    policy; with a weight-0 message (ours alone: transformers knows nothing of it) ours trains fewer tokens."""
    expected = list(transformers_mask)
    if any(m.weight == 0 for m in conv.messages):
        if not sum(rendered.loss_mask) < sum(expected):
            pytest.fail(f"a weight-0 message, yet {sum(rendered.loss_mask)} tokens trained, not fewer than the "
                        f"{sum(expected)} of transformers' assistant mask")
    else:
        assert_same_list(expected, rendered.loss_mask, "transformers' assistant mask vs ours")


def trained_pieces(rendered, tokenizer) -> list[str]:
    """The trained stretches of the mask view (between ⟦ and ⟧), in order."""
    view = mask_view(rendered, tokenizer)
    return [piece.split("⟧")[0] for piece in view.split("⟦")[1:]]


# --- goldens ----------------------------------------------------------------------------------------

def golden_text(name: str, rendered, tokenizer) -> str:
    ledger = "\n".join(f"{e.kind} {e.path}: {e.reason}" for e in rendered.ledger) or "(empty)"
    return (f"# sftprep golden: template={rendered.template} tokenizer={rendered.tokenizer} fixture={name}\n"
            f"# tokens={len(rendered.input_ids)} trained={sum(rendered.loss_mask)}\n"
            f"=== text (decoded from the ids)\n{tokenizer.decode(rendered.input_ids)}\n"
            f"=== mask (trained tokens between ⟦ and ⟧)\n{mask_view(rendered, tokenizer)}\n"
            f"=== ids\n{' '.join(map(str, rendered.input_ids))}\n"
            f"=== ledger\n{ledger}\n")


def golden_section(golden: str, title: str) -> str:
    start = golden.index("\n", golden.index(f"=== {title}")) + 1
    end = golden.find("\n=== ", start)
    return golden[start:end if end != -1 else len(golden)]


def check_golden(path: Path, name: str, rendered, tokenizer, regen: bool) -> None:
    """The render equals its golden file, rewritten first when `regen` (SFTPREP_REGEN_GOLDENS=1). On a
    difference: texts and ids from the first difference, or, where they agree, a diff of the files."""
    actual = golden_text(name, rendered, tokenizer)
    if regen:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"no golden {path}; run with SFTPREP_REGEN_GOLDENS=1 to create it, then review it")
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        expected_ids = [int(x) for x in golden_section(expected, "ids").split()]
        assert_same(golden_section(expected, "text"), expected_ids, rendered.text, rendered.input_ids)
        diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                            str(path), "this render"))
        pytest.fail(f"golden {path} differs: text and ids agree, the mask view or the ledger changed\n{diff}")


# --- spans, segments, message by message ----------------------------------------------------------

def assert_spans_partition(rendered) -> None:
    """The spans cover the whole text and all the ids, each starting where the one before ends."""
    spans = rendered.spans
    if spans[0].char_start != 0 or spans[-1].char_end != len(rendered.text):
        pytest.fail(f"spans cover chars {spans[0].char_start} to {spans[-1].char_end}, the text has "
                    f"{len(rendered.text)}\nfirst: {spans[0]!r}\nlast: {spans[-1]!r}")
    if spans[0].token_start != 0 or spans[-1].token_end != len(rendered.input_ids):
        pytest.fail(f"spans cover tokens {spans[0].token_start} to {spans[-1].token_end}, the render has "
                    f"{len(rendered.input_ids)}\nfirst: {spans[0]!r}\nlast: {spans[-1]!r}")
    for i, (a, b) in enumerate(zip(spans, spans[1:])):
        if a.char_end != b.char_start or a.token_end != b.token_start:
            pytest.fail(f"span {i + 1} does not start where span {i} ends\nspan {i}: {a!r}\nspan {i + 1}: {b!r}")


def assert_segmented_ids_equal_whole_text_ids(rendered, tokenizer) -> None:
    """The ids tokenized segment by segment are those of tokenizing the whole text at once."""
    whole = tokenizer.backend.encode(rendered.text, add_special_tokens=False).ids
    assert_same_list(whole, rendered.input_ids, "ids of the whole text vs the render's (tokenized by segments)")


def turn_starts(conv: Conversation) -> list[int]:
    """Message indexes where a new turn starts (not a tool result continuing a run of results)."""
    starts = []
    for k in range(1, len(conv.messages) + 1):
        if k == len(conv.messages):
            starts.append(k)
            continue
        continues = (any(isinstance(b, ToolResult) for b in conv.messages[k].blocks[:1])
                     and any(isinstance(b, ToolResult) for b in conv.messages[k - 1].blocks[-1:]))
        if not continues:
            starts.append(k)
    return starts


def assert_concatenates_to_whole(conv: Conversation, render_conv: Callable[[Conversation], object],
                                 cuts: list[int], *, seam: Callable | None = None, mask_prefix: bool = False) -> None:
    """Rendering `conv.messages[:k]` for each k in `cuts` and concatenating what each render adds gives
    the whole render: text, ids and mask. `seam(text, ids) -> (text, ids)` adjusts the concatenation so far
    where a longer render continues it differently by design; `mask_prefix` also requires each render's mask
    to continue the concatenation's."""
    whole = render_conv(conv)
    text, ids, mask = "", [], []
    for k in cuts:
        part = render_conv(structs.replace(conv, messages=conv.messages[:k]))
        if seam is not None:
            text, ids = seam(text, ids)
        assert_same(text, ids, part.text[:len(text)], part.input_ids[:len(ids)],
                    what=f"the render of messages[:{k}] does not start with the concatenation so far")
        if mask_prefix:
            assert_same_list(mask, part.loss_mask[:len(mask)],
                             f"the concatenation's mask vs the start of the mask of messages[:{k}]")
        text += part.text[len(text):]
        ids += part.input_ids[len(ids):]
        mask += part.loss_mask[len(mask):]
    assert_same(whole.text, whole.input_ids, text, ids, what="the concatenation differs from the whole render")
    assert_same_list(whole.loss_mask, mask, "the whole render's mask vs the concatenation's")


# --- inputs -----------------------------------------------------------------------------------------

def parse_chat(record, fmt: str | None = None) -> Conversation:
    """A corpus record as a conversation (its format detected unless given); the test is skipped when the
    record is not a conversation request (embeddings, count_tokens...): the codecs' call."""
    try:
        return parse(record, fmt) if fmt else parse(record)
    except ShapeError as exc:
        pytest.skip(f"not a chat request: {exc.message[:80]}")


def call_arguments(call: ToolCall) -> dict:
    """A call's arguments as an object, parsed from the raw string when only that is set."""
    return call.arguments if call.arguments is not UNSET else json.loads(call.raw_arguments or "{}")


def with_call(**fields) -> Conversation:
    """A user turn, then an assistant turn holding one call (name "lookup" unless given) with `fields`."""
    call = ToolCall(id="call_1", name=fields.pop("name", "lookup"), **fields)
    return Conversation(messages=(Message(role="user", blocks=(Text("go"),)),
                                  Message(role="assistant", blocks=(call,))))


def corpus_tools(tools: list[dict] | None) -> list[dict] | None:
    """Recorded OpenAI tools in the documented layout (type, then function name, description, parameters):
    the recordings have keys in other orders and API-only flags such as `strict`, which are not content."""
    if not tools:
        return None
    keys = ("name", "description", "parameters")
    return [{"type": "function", "function": {key: tool["function"][key] for key in keys if key in tool["function"]}}
            for tool in tools]
