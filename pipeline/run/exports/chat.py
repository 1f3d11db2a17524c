"""The conversation exactly as the row's template was handed it, as `messages` + `tools`: what every
export is written from. Built by the template family's own conversion (so hosted tools the render dropped
are not there, results and joined texts are the strings the template wrote, empty turns are not made up,
a trimmed row is the trimmed conversation), then stripped of the renderer's sentinels. Each message keeps
the canonical messages it came from, so an assistant message is known to be trained exactly when the
row's loss mask trains one of those."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from ...conversation import Conversation
from ...ledger import Ledger
from ...render._harmony_inputs import build_inputs as harmony_inputs
from ...render._inputs import build_inputs
from ...render.marks import MARK_RE, Marks, mark_index

TARGET = "messages export"
# A JSON value's exact copy (dicts, lists for tuples, exact ints and floats, keys of any type).
_PLAIN_ENCODE = msgspec.msgpack.Encoder().encode
_PLAIN_DECODE = msgspec.msgpack.Decoder().decode


@dataclass(frozen=True)
class Chat:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    trained: list[bool]  # per message: an assistant message the row trains
    mask: Any  # the render's MaskPolicy


def rendered_chat(conv: Conversation, renderer: Any, rendered: Any, mask_bytes: bytes | None = None,
                  marked: Any = None) -> Chat:
    """The template inputs of the render that produced `rendered` (same family, policy and options).
    `marked`: that render's own MarkedInputs, which are those inputs (not built again)."""
    family = renderer.template.family
    if family.build_inputs is harmony_inputs:
        # Harmony's own inputs are one message per block of its format; trainers and the official
        # gpt-oss template read chat messages, which the generic conversion gives under its policy.
        marks = Marks()
        inputs = build_inputs(conv, marks, Ledger(TARGET), family.policy)
    elif marked is not None:
        inputs, marks = marked
    else:
        marks = Marks()
        # The render's own ledger already holds every entry this conversion makes.
        inputs = family.inputs(conv, marks, Ledger(TARGET), renderer.options)
    trained_messages = _trained_messages(rendered, mask_bytes)
    messages, trained = [], []
    for message in inputs.messages:
        sources: set[int] = set()
        plain = _strip(message, marks, sources)
        messages.append(plain)
        trained.append(plain.get("role") == "assistant" and bool(sources & trained_messages))
    tools = [_strip(tool, marks, set()) for tool in inputs.tools or ()]
    return Chat(messages, tools, trained, renderer.mask)


def _trained_messages(rendered: Any, mask_bytes: bytes | None) -> set[int]:
    mask = mask_bytes if mask_bytes is not None else bytes(rendered.loss_mask)
    return {span.message for span in rendered.spans
            if span.message is not None and any(mask[span.token_start:span.token_end])}


def _strip(value: Any, marks: Marks, sources: set[int]) -> Any:
    """A plain copy of `value` without sentinels; the canonical messages whose marks it held go to
    `sources`. Marked dicts (and cached tool definitions) are never mutated."""
    kind = type(value)  # exact types first: most values are plain strings and dicts
    if kind is str:
        return _text(value, marks, sources)
    if kind is dict:
        return {key: _strip(item, marks, sources) for key, item in value.items()}
    if kind is list:
        return [_strip(item, marks, sources) for item in value]
    pair = getattr(value, "sftprep_marks", None)
    if pair is not None:
        _note(pair[0], marks, sources)
        # Marks.json refused any sentinel inside: what remains is a plain copy, made in C when it can be.
        try:
            return _PLAIN_DECODE(_PLAIN_ENCODE(value))
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
            pass
    if isinstance(value, str):
        return _text(value, marks, sources)
    if isinstance(value, dict):
        return {key: _strip(item, marks, sources) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strip(item, marks, sources) for item in value]
    return value


def _text(value: str, marks: Marks, sources: set[int]) -> str:
    if value.isascii():
        return value
    for char in MARK_RE.findall(value):
        _note(char, marks, sources)
    return MARK_RE.sub("", value)


def _note(char: str, marks: Marks, sources: set[int]) -> None:
    index = (mark_index(char) - 2) // 2
    if 0 <= index < len(marks.refs) and marks.refs[index].message is not None:
        sources.add(marks.refs[index].message)
