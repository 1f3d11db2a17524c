"""What a render is asked for (MaskPolicy, RenderOptions) and what it gives back (Rendered and its Spans),
with the views of a result: its JSON and the mask view."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

import msgspec

from ..errors import ConfigError, RenderError
from ..ledger import LedgerEntry
from .tokenizers import Tokenizer

# A pinned "today" for templates that print a date (Llama 3.x, gpt-oss): renders are reproducible.
DEFAULT_NOW = datetime(2024, 7, 26)


# --- options and results ---------------------------------------------------------------------------

class MaskPolicy(msgspec.Struct, frozen=True):
    """Which tokens are trained. `turns`: every assistant turn, or the last one only. A message with
    `weight == 0` is never trained. Everything else (prompts, tool results, scaffolding) never is."""

    turns: Literal["all", "last"] = "all"
    reasoning: bool = True  # train the reasoning of trained turns
    eot: bool = True  # train the end-of-turn token of trained turns

    @classmethod
    def parse(cls, spec: str) -> "MaskPolicy":
        """`all`, `last`, optionally followed by `,no-reasoning` and/or `,no-eot`."""
        words = [w.strip() for w in spec.split(",") if w.strip()]
        turns = words[0] if words else "all"
        flags = set(words[1:])
        valid_flags = {"no-reasoning", "no-eot", "reasoning", "eot"}
        if turns not in ("all", "last") or not flags <= valid_flags:
            raise ConfigError(f"unknown mask policy '{spec}'; valid: all or last, then optionally ,no-reasoning "
                              "and ,no-eot (e.g. 'last,no-eot')", code="unknown_mask_policy")
        return cls(turns=turns, reasoning="no-reasoning" not in flags, eot="no-eot" not in flags)  # type: ignore[arg-type]


class RenderOptions(msgspec.Struct, frozen=True):
    now: datetime = DEFAULT_NOW  # what `strftime_now` and `date_string` show
    add_generation_prompt: bool = False
    strict: bool = False  # any ledger entry is an error
    check: bool = True  # run the mask checks (errors name the message and block)
    # Also render without sentinels and require the same text: catches templates that inspect
    # content (`if content.startswith(...)`). None: on for user templates, off for built-ins.
    verify_marks: bool | None = None
    template_kwargs: dict[str, Any] = msgspec.field(default_factory=dict)
    # For families that render one call per assistant turn and no text beside it (llama3): "split" the
    # turn into consecutive turns, "drop-text" beside calls as the official template does, or "refuse".
    # Each is ledgered; families that carry any turn ignore it.
    calls: Literal["split", "drop-text", "refuse"] = "split"
    # The reasoning of turns before the current query, for families whose template strips it (qwen3):
    # "as_template" strips it as the template does, "keep" renders it, "drop" drops all reasoning;
    # "expand" renders one row per turn as the model saw it (`render.expand`), each row as_template.
    past_reasoning: Literal["as_template", "expand", "keep", "drop"] = "as_template"


class Span(msgspec.Struct, frozen=True, array_like=True):
    """A run of the rendered text tied to its source. Token ranges partition the tokens (a token belongs
    to the span holding its first character); character ranges partition the text."""

    token_start: int
    token_end: int
    char_start: int
    char_end: int
    message: int | None
    block: int | None
    kind: str


class Rendered(msgspec.Struct, frozen=True):
    template: str
    tokenizer: str
    text: str
    input_ids: list[int]
    loss_mask: list[int]
    spans: tuple[Span, ...]
    ledger: tuple[LedgerEntry, ...]


# --- views ------------------------------------------------------------------------------------------

def mask_view(rendered: Rendered, tokenizer: Tokenizer, open_mark: str = "⟦", close_mark: str = "⟧") -> str:
    """The rendered text with trained token runs wrapped in visible markers (for goldens and debugging)."""
    encoding = tokenizer.backend.encode(rendered.text, add_special_tokens=False)
    if encoding.ids != rendered.input_ids:
        raise RenderError("rendered ids differ from tokenizing the rendered text", code="render_ids")
    offsets = encoding.offsets
    out, pos, i, n = [], 0, 0, len(rendered.loss_mask)
    while i < n:
        if not rendered.loss_mask[i]:
            i += 1
            continue
        j = i
        while j < n and rendered.loss_mask[j]:
            j += 1
        start, end = max(pos, offsets[i][0]), offsets[j - 1][1]
        out.append(rendered.text[pos:start] + open_mark + rendered.text[start:end] + close_mark)
        pos, i = end, j
    out.append(rendered.text[pos:])
    return "".join(out)


def spans_json(rendered: Rendered) -> list[dict[str, Any]]:
    return [{"start": s.token_start, "end": s.token_end, "char_start": s.char_start, "char_end": s.char_end,
             "message": s.message, "block": s.block, "kind": s.kind} for s in rendered.spans]


def to_json(rendered: Rendered) -> str:
    return json.dumps({"template": rendered.template, "tokenizer": rendered.tokenizer, "text": rendered.text,
                       "input_ids": rendered.input_ids, "loss_mask": rendered.loss_mask,
                       "spans": spans_json(rendered), "ledger": msgspec.to_builtins(list(rendered.ledger))},
                      ensure_ascii=False)
