"""Qwen3 (thinking models): the family's facts, its conversion and the parser from its token stream back
to a canonical Conversation.

The format (what `templates/qwen3.jinja` writes) is ChatML with a <think> block and no default system:
    [<|im_start|>system\nSYSTEM[\n\n# Tools ... <tools>\nTOOL_JSON...\n</tools> ...]<|im_end|>\n]
    <|im_start|>user\nTEXT<|im_end|>\n
    <|im_start|>assistant\n[<think>\nREASONING\n</think>\n\n]TEXT[\n]<tool_call>\n{...}\n</tool_call><|im_end|>\n
    <|im_start|>user\n<tool_response>\nRESULT\n</tool_response>...<|im_end|>\n
The "current query" is the last user turn with text (not only tool results). The official template drops
the reasoning of assistant turns before it, shows the reasoning of turns after it, and gives the final
message a <think> block even when empty. `past_reasoning` (RenderOptions) decides what the template is
handed: "as_template" (and "expand", whose rows are each rendered that way) drops earlier reasoning as
the template would, ledgered; "keep" hands it all; "drop" drops all reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from msgspec import structs

from ..conversation import Conversation, Media, Message, Reasoning, Text, Tool, ToolCall
from ..errors import RenderError
from ..ids import CallIds
from ..ledger import Ledger, LedgerEntry
from . import chatml
from ._inputs import InputPolicy, TemplateInputs, _Builder, block_path
from ._roundtrip import dropped_paths, shown, without_dropped
from .marks import Marks
from .rendered import RenderOptions
from .templates import Family

THINK_OPEN, THINK_CLOSE = "<think>\n", "\n</think>\n\n"
NO_THINKING = THINK_OPEN + THINK_CLOSE  # the generation prompt with enable_thinking=False


@dataclass(frozen=True)
class Qwen3Policy(InputPolicy):
    past_reasoning: str = "as_template"  # as RenderOptions.past_reasoning


POLICY = Qwen3Policy(target="qwen3", reasoning="field", developer="system", text_joiner="\n",
                     bad_name=chatml.POLICY.bad_name)


def current_query(conv: Conversation) -> int:
    """Index of the last user message with text (tool results alone do not count), as the template
    finds it; len - 1 when there is none (then no turn comes after it)."""
    for mi in range(len(conv.messages) - 1, -1, -1):
        message = conv.messages[mi]
        if message.role in ("user", "tool") and any(
                isinstance(b, Text) or (isinstance(b, Media) and b.text is not None) for b in message.blocks):
            return mi
    return len(conv.messages) - 1


def _thinks(conv: Conversation, mi: int, has_reasoning: bool, query: int) -> bool:
    """Whether the template writes a <think> block for assistant message `mi`."""
    return has_reasoning or (mi > query and mi == len(conv.messages) - 1)


class _Qwen3Builder(_Builder):
    policy: Qwen3Policy

    def __init__(self, conv: Conversation, marks: Marks, ledger: Ledger, policy: Qwen3Policy) -> None:
        super().__init__(conv, marks, ledger, policy)
        self.query = current_query(conv)
        self.blank_reasoning = False  # the message being converted has reasoning of newlines alone

    def _reasoning_dropped(self, mi: int, block: Reasoning) -> str | None:
        if self.blank_reasoning and not block.text:
            return "reasoning of newlines alone: the qwen3 template writes it as an empty <think> block"
        why = super()._reasoning_dropped(mi, block)
        if why is not None:
            return why
        if self.policy.past_reasoning == "drop":
            return "reasoning dropped (past_reasoning='drop')"
        if self.policy.past_reasoning != "keep" and mi <= self.query:
            return ("reasoning of a turn before the current query: the qwen3 template drops it "
                    "(past_reasoning='as_template'; 'expand' trains it in a row of its own)")
        return None

    def _assistant(self, mi: int, message: Message) -> None:
        self.blank_reasoning = False
        kept = {bi for bi, b in enumerate(message.blocks)
                if isinstance(b, Reasoning) and b.text and self._reasoning_dropped(mi, b) is None}
        blocks, changed = strip_newlines(message.blocks, kept, _thinks(self.conv, mi, bool(kept), self.query))
        for bi in changed:
            where = "around reasoning" if bi in kept else "after the <think> block"
            self.ledger.add("dropped", block_path(mi, bi) + ".newlines",
                            f"newlines {where} (the qwen3 template strips them)")
        # The official template tests the reasoning before stripping it: newlines alone still give an
        # (empty) <think> block, even in a turn with nothing else (an empty text anchors that turn).
        self.blank_reasoning = bool(kept) and not any(blocks[bi].text for bi in kept)
        if self.blank_reasoning and not any(_carried(b) for b in blocks):
            blocks += (Text(""),)
        count = len(self.items)
        super()._assistant(mi, structs.replace(message, blocks=blocks))
        if len(self.items) == count:
            return
        if self.blank_reasoning:
            self.items[-1].message["think_block"] = True
        had_text = any(isinstance(b, Text) and b.text for b in message.blocks)
        if had_text and not self.items[-1].message["content"]:
            # Likewise the text: text of newlines alone still puts a newline before the calls.
            self.items[-1].message["newline_before_calls"] = True


def _carried(block) -> bool:
    """A block the template gets as text or a call."""
    return (isinstance(block, Text) or (isinstance(block, Media) and block.text is not None)
            or (isinstance(block, ToolCall) and block.kind != "hosted"))


def strip_newlines(blocks: tuple, reasoning: set[int], thinks: bool) -> tuple[tuple, list[int]]:
    """The newlines the official template strips, stripped from the blocks themselves (so marked text
    renders as unmarked text would): around the joined reasoning (blocks `reasoning`), and before the
    text after a <think> block. Returns the blocks and the indexes changed."""
    out = list(blocks)
    order = sorted(reasoning)
    for indexes, strip in ((order, str.lstrip), (order[::-1], str.rstrip)):
        for bi in indexes:  # until a block keeps text: a block of newlines alone is stripped whole
            text = strip(out[bi].text, "\n")
            if text != out[bi].text:
                out[bi] = structs.replace(out[bi], text=text)
            if text:
                break
    if thinks:
        for bi, block in enumerate(out):
            if isinstance(block, Text) and block.text:
                text = block.text.lstrip("\n")
                if text != block.text:
                    out[bi] = structs.replace(block, text=text)
                if text:
                    break
    return tuple(out), [bi for bi, (a, b) in enumerate(zip(blocks, out)) if a is not b]


def build_inputs(conv: Conversation, marks: Marks, ledger: Ledger, policy: InputPolicy) -> TemplateInputs:
    assert isinstance(policy, Qwen3Policy)
    return _Qwen3Builder(conv, marks, ledger, policy).run()


def configure(policy: InputPolicy, options: RenderOptions) -> InputPolicy:
    assert isinstance(policy, Qwen3Policy)
    return replace(policy, past_reasoning=options.past_reasoning)


# --- what parse-back must equal -------------------------------------------------------------------

def expected(conv: Conversation, ledger: tuple[LedgerEntry, ...]) -> Conversation:
    """`conv` as rendered: its newlines stripped as the conversion strips them, without what the ledger
    dropped, the reasoning of a turn as one block (the template writes one <think> block)."""
    dropped = dropped_paths(ledger)
    query = current_query(conv)
    messages = []
    for mi, message in enumerate(conv.messages):
        if message.role == "assistant":
            kept = {bi for bi, b in enumerate(message.blocks)
                    if isinstance(b, Reasoning) and b.text and shown(block_path(mi, bi), dropped)}
            blocks, _ = strip_newlines(message.blocks, kept, _thinks(conv, mi, bool(kept), query))
            message = structs.replace(message, blocks=blocks)
        messages.append(message)
    kept_conv = without_dropped(structs.replace(conv, messages=tuple(messages)), ledger)
    return structs.replace(kept_conv, messages=tuple(_one_reasoning(m) for m in kept_conv.messages))


def _one_reasoning(message: Message) -> Message:
    reasoning = [b for b in message.blocks if isinstance(b, Reasoning)]
    if len(reasoning) < 2:
        return message
    joined = Reasoning(text=POLICY.text_joiner.join(b.text for b in reasoning if b.text))
    return structs.replace(message, blocks=(joined,) + tuple(b for b in message.blocks if not isinstance(b, Reasoning)))


# --- parse-back -------------------------------------------------------------------------------------

def parse_back(text: str) -> Conversation:
    """The conversation a Qwen3 token stream holds. Raises RenderError on text Qwen3 cannot produce."""
    return chatml.parse_turns(text, _system, _assistant, "qwen3", ("", NO_THINKING))


def _system(body: str) -> tuple[tuple[Text, ...], tuple[Tool, ...]]:
    if body.startswith(chatml.TOOLS_HEADER[2:]):  # tools, no system text
        _, tools = chatml._system("\n\n" + body, None)
        return (), tools
    return chatml._system(body, None)


def _assistant(body: str, ids: CallIds, turn: int) -> tuple[Message, list[ToolCall]]:
    reasoning: tuple[Reasoning, ...] = ()
    if body.startswith(THINK_OPEN):
        end = body.find(THINK_CLOSE, len(THINK_OPEN) - 1)
        if end == -1:
            raise RenderError("a <think> block without its end", path=f"$.turn[{turn}]", code="parse_back")
        thought = body[len(THINK_OPEN):end]
        reasoning = (Reasoning(text=thought),) if thought else ()
        body = body[end + len(THINK_CLOSE):]
    message, calls = chatml._assistant(body, ids, turn)
    return structs.replace(message, blocks=reasoning + message.blocks), calls


CARRIES = dict(chatml.CARRIES) | {
    "reasoning": "<think> block; turns before the current query per past_reasoning (the template drops them)",
    "system": "kept; no default prompt"}

FAMILY = Family(name="qwen3", policy=POLICY, template_file="qwen3.jinja", eot_tokens=("<|im_end|>",),
                required_tokens=("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
                                 "</tool_response>", "<think>", "</think>"),
                parse_back=parse_back, build_inputs=build_inputs, default_tokenizer="qwen3", configure=configure,
                expected=expected, carries=tuple(CARRIES.items()))
