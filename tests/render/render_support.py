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

from pipeline.conversation import Conversation, Media, Message, Text, ToolCall, ToolResult, from_json
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
    # every other template of the collection that renders tool calls
    "deepseek_r1_distill.jinja": "56a1447ad31926fdc21fb07e56e5642bd9c850c4f52d8c8af7bbe5f079a84f5f",
    "deepseek_r1_distill_training.jinja": "439ca50e037bdf26b9e654e3eaa559fdd19d41e602307bcb133451070eb2ee3e",
    "deepseekv3.jinja": "563b1ce7d61d50a9b4c7439a912a1116f095b712df5b5e4d3e1116049874eb64",
    "deepseekv3_training.jinja": "aadb4942004c186f9ba97d28f653d7f2e0dc20e4275352a486f7cafbe4dd7b51",
    "diffusion_gemma.jinja": "9aeb7eac68ad87bba7567e9d4597ff203e5609f1b427d9e823437d0142cc61bf",
    "diffusion_gemma_training.jinja": "cf1664f301605c2fa7e361a18b5b60aaf3896b3f8e2626b96869a99c8e8a71f9",
    "gemma4.jinja": "33204f1acb5bd0002713e16a593847f24ceeafe711ed88bda2a352dc996a3373",
    "gemma4_v2.jinja": "55572b8d3c8342044e25874c73fe5234b661fa0a57a57f6ef75b58e03d7d959a",
    "gemma4_v3.jinja": "781d10940fbc44be40064b5d43a056fc486c84ceaa55538226368b57314132bf",
    "gemma4_v4.jinja": "2f1b4d75d067bae3fe44e676721c7f077d243bc007156cb9c2f8b5836613d082",
    "gemma4_v5.jinja": "0a2c8073c878ab1da004bee933a998606537bbb62016310352c7285c3f01c5b5",
    "glm4moe.jinja": "44f815868bf02fa458dd2f741a338046f4bf45f398eb6d067766726b9d96cce3",
    "glm4moe_training.jinja": "79c2386fbe44c9881be09b2dd086e0799b15447f8d530c45041152b6da9f3704",
    "lfm2_2_5.jinja": "6d65c8804847ad74eea912dd7eca3dc1cf7a457b53a77f47d841a14121910963",
    "lfm2_2_5_v2.jinja": "c5b67247c9f736f6c40eaa91ae1ef27dc67f5b041eedaadb97a1bea5030fb0ff",
    "lfm2_2_5_vl.jinja": "86f4770449a4797c9b4212d110b0cc70fb993c1ce960095bcfb12eea22f61cca",
    "lfm2_v2.jinja": "5504d163d879bfb6fd4135b7fa3d56768b2e69dd718338f7b146750289f46ab0",
    "lfm2_v2_training.jinja": "fd9c5f7cb11511f72c3db43496380e4b40e7a6110a978dc27cf338ddec45efb2",
    "muse_glimmer.jinja": "cfc67e5f349f37690dfd31ed1f18bc4442a9dd32fe39a648f993cb4eb3cae678",
    "muse_glimmer_training.jinja": "6eec84ccc527ef03efdcad19e64e5a4347d22c13c5d80fadcaf289ca3457ced9",
    "nemotron_3_5_lightning.jinja": "58933db77d3099b4f78c55a38347a72e1ea05b97d6bd8f38775303dc0194e0a9",
    "nemotron_3_5_lightning_training.jinja": "a44efc49cf02e3dee4421bd34925ba7e2081f1652b16648efbec4a6e8a203ea8",
    "nemotron_3_nano.jinja": "ab7813c3abdd9cb655905a410728b26c7884eca45ddfab8d9f931553485a7862",
    "nemotron_3_nano_training.jinja": "f52a4a70292b98db4d1b9f69a59546a43fc5e8603a6794781973a3e5821bd475",
    "nemotron_3_super.jinja": "575fb74f54ed264df9047d0ecce3c98938aae953fb4f50356675706264cbb68a",
    "nemotron_3_super_training.jinja": "d3859585444574090259d403ca65f71a496b77b0b50f31106aa99a25f5caa692",
    "nemotron_3_ultra.jinja": "82753bef5cedc4932c1ed509b5c9a12be680fd86d1adb65bc3f7398d11c8eebc",
    "nemotron_3_ultra_training.jinja": "d61cca230ac4f8137e74e88d73d8a649e4c3a71bb79b82925a19cf6dc52a6c7e",
    "qwen3_5_nothink.jinja": "273d8e0e683b885071fb17e08d71e5f2a5ddfb5309756181681de4f5a1822d80",
    "qwen3_5_nothink_training.jinja": "f32fe3e21c20f59d193244181c8b4c324c73a8cd313ddf825633a9ecfd2afad2",
    "qwen3_5_think.jinja": "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715",
    "qwen3_5_think_training.jinja": "ccf356d8f238e287c047b1ef589850fd6b2b44e6cb29079e26c635fb9b8111ef",
    "qwen3_6.jinja": "e84f32a23fdda27689f868aa4a1a5621f41133e51a48d7f3efcbea2839574259",
    "qwen3_6_training.jinja": "c5a26eaf3aab77fdc4ec696540ff896713ff0764f552ce9f597ede99fc673034",
    "qwen3_8.jinja": "c3cf9e34abf4f9e36c2d72165aa9c132d3e2a725b6c2586aaa3a8af9d7a81041",
    "qwen3_8_training.jinja": "320c2f734288f91c341c1c3c9690e4e6aba07a27852bf88d7c8481c880168288",
    "qwen3_instruct_2507.jinja": "64f85b198065d0fba2a81f37e10ed68161ce2c19a754c7100e67e0ca2ee9c326",
    "qwen3_instruct_2507_training.jinja": "48e17aa3caf5bf20075b6e7366864ee943e00b6f0752aadfe8b670c2ab0291a5",
    "qwen3_vl.jinja": "3636d0f0bd6bef02654cdffdc447b79cb2cef8ab02cc75267345946291a489e4",
    "qwen3_vl_training.jinja": "66bd81986bf7f8abe6d7fb4a50341c8d8ae14b16637e8fb876bca7e7ef0b9c6f",
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


def block_text(block) -> str | None:
    """The text a template gets for a block: a text, or a text document; None for anything else."""
    return block.text if isinstance(block, (Text, Media)) else None


def result_content(result: ToolResult) -> str:
    """A result as the one string a user hands a template: its text parts joined by newlines, or with none,
    its structured output as JSON."""
    texts = [t for t in map(block_text, result.content) if t is not None]
    if not texts and result.output is not UNSET:
        return json.dumps(result.output, ensure_ascii=False)
    return "\n".join(texts)


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
