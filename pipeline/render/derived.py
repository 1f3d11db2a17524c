"""What the model generates in each assistant turn of a template without generation markers (a
tokenizer's own chat template, a .jinja file), found by rendering rather than from where blocks landed.

The model's part of turn k starts after the generation prompt: the conversation up to that turn rendered
with `add_generation_prompt` is a prefix of the whole render, and what follows is the model's. It ends
with the turn's last special token before the next message begins: the conversation rendered through
turn k is a prefix of the whole render too, so that token is the last one inside it. Call syntax
(`<tool_call>\\n{"name": "`) is the model's, so it is trained; a template that writes a turn differently
when it is the last one (gpt-oss: `<|return|>` against `<|end|>`) falls back to the first special token
after the turn's content, and one whose prompt is not a prefix to where its generation prompt text
last appears before the turn's content.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from msgspec.structs import replace

from ..conversation import Conversation
from ._inputs import TemplateInputs
from .marks import _Found
from .rendered import RenderOptions
from .spans import _Region
from .templates import Template
from .tokenizers import Tokenizer


class _Prefixes:
    """Renders of the first n template messages, with or without the generation prompt, each once."""

    def __init__(self, template: Template, inputs: TemplateInputs, tokenizer: Tokenizer, options: RenderOptions):
        self.template, self.inputs, self.tokenizer = template, inputs, tokenizer
        self.options = {flag: replace(options, add_generation_prompt=flag) for flag in (False, True)}
        self.cache: dict[tuple[int, bool], str] = {}

    def __call__(self, n: int, prompt: bool) -> str:
        key = (n, prompt)
        if key not in self.cache:
            partial = TemplateInputs(self.inputs.messages[:n], self.inputs.tools)
            self.cache[key] = self.template.render_raw(partial, self.tokenizer, self.options[prompt])
        return self.cache[key]


def derived_regions(template: Template, plain: TemplateInputs, tokenizer: Tokenizer, options: RenderOptions,
                    text: str, found: _Found, blocks, pieces, conv: Conversation) -> list[_Region]:
    """One region per assistant message the template rendered. `plain` are the inputs without
    sentinels; `text` is the render (equal to the plain render: the caller checked)."""
    prefixes = _Prefixes(template, plain, tokenizer, options)
    specials = [(s, e) for s, e, token in pieces if token is not None]
    special_starts = [s for s, _ in specials]
    points: dict[int, list[int]] = {}
    for s, e, ref in blocks:
        if ref.message is not None:
            span = points.setdefault(ref.message, [s, e])
            span[0], span[1] = min(span[0], s), max(span[1], e)
    for s, ref in found.anchors:
        span = points.setdefault(ref.message, [s, s])
        span[0], span[1] = min(span[0], s), max(span[1], s)
    starts = sorted(span[0] for span in points.values())
    regions: list[_Region] = []
    previous_end = 0
    count = len(plain.messages)
    for k, origin in enumerate(plain.origins):
        if origin is None or origin not in points or conv.messages[origin].role != "assistant":
            continue
        first, last = points[origin]
        start = _model_start(text, prefixes(k, False), prefixes(k, True), previous_end, first)
        through = text if k == count - 1 else prefixes(k + 1, False)
        after = bisect_right(starts, last)  # the next message's content: the turn ends before it
        following = starts[after] if after < len(starts) else len(text)
        eot = _end_token(text, through, specials, special_starts, last, following)
        end = eot[1] if eot is not None else max(last, len(through.rstrip()) if text.startswith(through) else last)
        regions.append(_Region(start, end, origin, eot))
        previous_end = end
    return regions


def _model_start(text: str, before: str, prompt: str, lower: int, first: int) -> int:
    generation = prompt[len(before):] if prompt.startswith(before) else ""
    if not generation:  # the template writes no generation prompt: the turn starts with its content
        return first
    if text.startswith(prompt) and len(prompt) <= first:
        return len(prompt)
    at = text.rfind(generation, lower, first)
    return at + len(generation) if at >= 0 else first


def _end_token(text: str, through: str, specials, special_starts, last: int, following: int):
    """The turn's end-of-turn token, as (start, end) in `text`, or None when it has none."""
    if text.startswith(through) and len(through) >= last:
        inside = [p for p in specials[bisect_left(special_starts, last):] if p[1] <= len(through)]
        return inside[-1] if inside else None
    i = bisect_left(special_starts, last)
    return specials[i] if i < len(specials) and specials[i][0] < following else None
