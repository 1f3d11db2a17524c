"""past_reasoning = "expand": a conversation whose template strips the reasoning of earlier turns (Qwen3
drops it before the current query) becomes rows in which every trained assistant turn is seen as the
model sees it at inference, and is trained exactly once.

A turn is *in context* in a row when the row's render starts with the turn's inference-time prompt (the
conversation up to the turn, rendered with the generation prompt: text and ids) and the row renders the
turn's reasoning. The full render trains the turns in context there. While some turn is left, the latest
one, t, gets a row ending with it (messages[:t + 1]); that row trains every left turn in context in it.
A turn not in context even in the row ending with it cannot be trained faithfully: RenderError.

Each row says which case applied: "whole" (the full render alone trains every turn in context),
"final" (the full render, beside other rows), "prefix" (a row ending at an earlier turn). Rows are
rendered with past_reasoning "as_template"; turns a row does not train get weight 0 there.
"""

from __future__ import annotations

from typing import NamedTuple

from msgspec import structs

from ..conversation import Conversation, Reasoning
from ..errors import RenderError
from ._inputs import block_path
from ._roundtrip import dropped_paths, shown
from .engine import render_buffers
from .rendered import MaskPolicy, RenderOptions, Rendered
from .templates import Template
from .tokenizers import Tokenizer

CASES = ("whole", "final", "prefix")


class Row(NamedTuple):
    rendered: Rendered
    buffers: tuple[bytes, bytes]  # ids as little-endian int32, mask as int8 (what writers store)
    case: str  # one of CASES
    messages: int  # the row renders conv.messages[:messages]
    trained: tuple[int, ...]  # the assistant messages it trains


def has_reasoning(conv: Conversation) -> bool:
    return any(isinstance(b, Reasoning) and b.text for m in conv.messages if m.role == "assistant" for b in m.blocks)


def expand(conv: Conversation, template: Template, tokenizer: Tokenizer, *, mask: MaskPolicy = MaskPolicy(),
           options: RenderOptions = RenderOptions()) -> list[Row]:
    """The rows of `conv` under past_reasoning="expand" (see the module docstring), in message order."""
    options = structs.replace(options, past_reasoning="as_template")
    full, *buffers = render_buffers(conv, template, tokenizer, mask=mask, options=options)
    candidates = _candidates(conv, mask)
    if not has_reasoning(conv) or not candidates:
        return [Row(full, tuple(buffers), "whole", len(conv.messages), tuple(sorted(candidates)))]
    expander = _Expander(conv, template, tokenizer, mask, options)
    left = set(candidates)
    in_full = expander.in_context(full, left)
    rows: list[Row] = []
    while left - in_full:
        last = max(left - in_full)
        row = expander.row(last, left - in_full)
        rows.append(row)
        left -= set(row.trained)
    rows.reverse()
    if in_full:
        case = "final" if rows else "whole"
        if in_full != candidates:  # the other turns are trained elsewhere: untrained here
            full, *buffers = expander.render(conv, in_full)
        rows.append(Row(full, tuple(buffers), case, len(conv.messages), tuple(sorted(in_full))))
    return rows


def _candidates(conv: Conversation, mask: MaskPolicy) -> set[int]:
    """The assistant turns the mask policy trains (all of them, or the last)."""
    turns = [mi for mi, m in enumerate(conv.messages) if m.role == "assistant" and m.blocks and m.weight != 0]
    return set(turns[-1:] if mask.turns == "last" else turns)


class _Expander:
    def __init__(self, conv: Conversation, template: Template, tokenizer: Tokenizer, mask: MaskPolicy,
                 options: RenderOptions) -> None:
        self.conv, self.template, self.tokenizer, self.mask, self.options = conv, template, tokenizer, mask, options
        self.prompts: dict[int, Rendered] = {}

    def render(self, conv: Conversation, trained: set[int]):
        """Render with only `trained` assistant turns trainable (others weight 0)."""
        messages = tuple(m if mi in trained or m.role != "assistant" else structs.replace(m, weight=0)
                         for mi, m in enumerate(conv.messages))
        return render_buffers(structs.replace(conv, messages=messages), self.template, self.tokenizer,
                              mask=self.mask, options=self.options)

    def prompt(self, mi: int) -> Rendered:
        """What the model is given before it writes message `mi`."""
        if mi not in self.prompts:
            head = structs.replace(self.conv, messages=self.conv.messages[:mi])
            options = structs.replace(self.options, add_generation_prompt=True, check=False)
            self.prompts[mi] = render_buffers(head, self.template, self.tokenizer, mask=self.mask, options=options)[0]
        return self.prompts[mi]

    def in_context(self, rendered: Rendered, turns: set[int]) -> set[int]:
        dropped = dropped_paths(rendered.ledger)
        out = set()
        for mi in turns:
            if mi >= len(self.conv.messages) or any(
                    isinstance(b, Reasoning) and b.text and not shown(block_path(mi, bi), dropped)
                    for bi, b in enumerate(self.conv.messages[mi].blocks)):
                continue
            prompt = self.prompt(mi)
            n = len(prompt.input_ids)
            if rendered.text.startswith(prompt.text) and rendered.input_ids[:n] == prompt.input_ids:
                out.add(mi)
        return out

    def row(self, last: int, left: set[int]) -> Row:
        """The row ending with message `last`, training the turns of `left` in context in it."""
        head = structs.replace(self.conv, messages=self.conv.messages[:last + 1])
        wanted = {mi for mi in left if mi <= last}
        rendered, *buffers = self.render(head, wanted)
        trained = self.in_context(rendered, wanted)
        if last not in trained:
            raise RenderError("past_reasoning='expand': this turn is not rendered as the model sees it at inference "
                              "even in a row ending with it (its prompt is not a prefix of the row, or the template "
                              "drops its reasoning)", path=f"$.messages[{last}]", code="render_expand")
        if trained != wanted:
            rendered, *buffers = self.render(head, trained)
        return Row(rendered, tuple(buffers), "prefix", last + 1, tuple(sorted(trained)))
