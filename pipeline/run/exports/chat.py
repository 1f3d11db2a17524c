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

from ... import jsonpolicy
from ...conversation import Conversation
from ...ledger import Ledger
from ...render._harmony_inputs import build_inputs as harmony_inputs
from ...render._inputs import build_inputs
from ...render.marks import MARK_RE, Marks, mark_index

TARGET = "messages export"
# A JSON value's exact copy (dicts, lists for tuples, exact ints and floats, keys of any type).
_PLAIN_ENCODE = msgspec.msgpack.Encoder().encode
_PLAIN_DECODE = msgspec.msgpack.Decoder().decode
_UNMARK = MARK_RE.sub


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
    inputs, marks = _template_inputs(conv, renderer, marked)
    trained_messages = _trained_messages(rendered, mask_bytes)
    generic = family.build_inputs is None and marks.enabled and len(inputs.origins) == len(inputs.messages)
    messages, trained = (_by_origin if generic else _by_marks)(inputs, marks, trained_messages)
    tools = [_plain_tool(tool, marks) for tool in inputs.tools or ()]
    return Chat(messages, tools, trained, renderer.mask)


def _template_inputs(conv: Conversation, renderer: Any, marked: Any) -> tuple[Any, Marks]:
    family = renderer.template.family
    if family.build_inputs is harmony_inputs:
        # Harmony's own inputs are one message per block of its format; trainers and the official
        # gpt-oss template read chat messages, which the generic conversion gives under its policy.
        marks = Marks()
        return build_inputs(conv, marks, Ledger(TARGET), family.policy), marks
    if marked is not None:
        return marked
    marks = Marks()
    # The render's own ledger already holds every entry this conversion makes.
    return family.inputs(conv, marks, Ledger(TARGET), renderer.options), marks


# --- the messages and tools columns without the plain copy ----------------------------------------
# A row without exports needs only the JSON of `Chat.messages` and `Chat.tools`. Those are the template
# inputs' JSON with every sentinel cut out, which is far cheaper than copying the inputs in Python: the
# encoder writes non-ASCII characters as their UTF-8 bytes and escapes only ASCII ones, so removing a
# character from a string before encoding equals removing its four bytes after. `_strip` removes exactly
# the sentinels (MARK_RE) from every string, except in two cases that cannot occur when no string the
# inputs were built from holds one: a string shaped like one marked piece is sliced, not scanned, and
# keys are kept. The inputs' strings are marked texts and JSON (Marks refuses sentinels inside them), the
# converters' ASCII literals, and strings of the conversation (ids and names, unmarked): so its JSON
# without a byte F3 or F4 (the lead bytes of U+C0000 and up) is the condition. Sentinels of the first
# private-use plane begin with F3 (B0..BF); the cut checks each F3 it finds is one of MARK_RE's and
# gives up (the general path then) on anything else, and on F4 (the second plane: over 32,766 pieces).
_SENTINEL_FROM, _SENTINEL_TO = b"\xb0", b"\xbf\xbf\xbd"  # the three bytes after F3 of U+F0000..U+FFFFD
_TOOLS_JSON: dict[tuple[str, ...], tuple[tuple[str, ...], bytes]] = {}
_TOOLS_JSON_MAX = 256


def chat_json(conv: Conversation, conversation: bytes, renderer: Any, marked: Any = None) -> tuple[bytes, bytes] | None:
    """(messages, tools) as the JSON `rendered_chat` gives them, from the render's inputs (`marked`, or
    built as `rendered_chat` builds them); `conversation`: `conv`'s JSON. None: use `rendered_chat`."""
    if b"\xf3" in conversation or b"\xf4" in conversation:
        return None
    inputs, marks = _template_inputs(conv, renderer, marked)
    if not marks.enabled:
        return None
    try:
        messages = _cut_sentinels(jsonpolicy.dumps(inputs.messages))
        tools = _tools_json(inputs.tools or [])
    except TypeError:  # not JSON (the general path raises what it raises)
        return None
    return None if messages is None else (messages, tools)


def _cut_sentinels(data: bytes) -> bytes | None:
    if b"\xf4" in data:
        return None
    parts = data.split(b"\xf3")
    out = [parts[0]]
    for part in parts[1:]:
        if not _SENTINEL_FROM <= part[:3] <= _SENTINEL_TO:
            return None
        out.append(part[3:])
    return b"".join(out)


def _tools_json(tools: list[Any]) -> bytes:
    """Marked tool definitions hold no sentinel (Marks.json refuses one), so their JSON is the plain
    copies' JSON. A dataset's tool lists repeat: a list of cached definitions (known by their JSON
    texts, held here so the identities stay theirs) is encoded once, and rows share the bytes."""
    key = tuple(getattr(tool, "sftprep_json", None) for tool in tools)
    if None in key:
        return jsonpolicy.dumps(tools)
    hit = _TOOLS_JSON.get(key)  # equal texts; the same objects below
    if hit is not None and all(a is b for a, b in zip(hit[0], key)):
        return hit[1]
    data = jsonpolicy.dumps(tools)
    if len(_TOOLS_JSON) >= _TOOLS_JSON_MAX:
        _TOOLS_JSON.clear()
    _TOOLS_JSON[key] = (key, data)
    return data


def _by_marks(inputs: Any, marks: Marks, trained_messages: set[int]) -> tuple[list[dict[str, Any]], list[bool]]:
    """The messages stripped, and which are trained: an assistant message whose marks name a trained
    canonical message."""
    messages, trained = [], []
    for message in inputs.messages:
        if message.get("role") == "assistant":  # only an assistant message's sources decide anything
            sources: set[int] = set()
            messages.append(_strip(message, marks, sources))
            trained.append(bool(sources & trained_messages))
        else:
            messages.append(_strip(message, marks, None))
            trained.append(False)
    return messages, trained


def _by_origin(inputs: Any, marks: Marks, trained_messages: set[int]) -> tuple[list[dict[str, Any]], list[bool]]:
    """`_by_marks` for the generic conversion's inputs, without collecting marks: it marks every piece
    of an assistant message (an empty turn with an anchor) with that message's own ref, so the marks
    name exactly its origin."""
    messages = [_strip(message, marks, None) for message in inputs.messages]
    trained = [origin is not None and message.get("role") == "assistant" and origin in trained_messages
               for message, origin in zip(inputs.messages, inputs.origins)]
    return messages, trained


def _trained_messages(rendered: Any, mask_bytes: bytes | None) -> set[int]:
    mask = mask_bytes if mask_bytes is not None else bytes(rendered.loss_mask)
    # A span is trained when not all of its mask bytes are zero.
    return {span.message for span in rendered.spans
            if span.message is not None and mask.count(0, span.token_start, span.token_end)
            < span.token_end - span.token_start}


# Plain copies of cached tool definitions, by the identity of the JSON text the cache gave them (held
# here, so the identity stays theirs): a dataset's tool lists repeat. Shared between rows, as the
# cached definitions are: nothing mutates a row's tools.
_PLAIN_TOOLS: dict[int, tuple[str, dict[str, Any]]] = {}
_PLAIN_TOOLS_MAX = 2048


def _plain_tool(tool: Any, marks: Marks) -> Any:
    text = getattr(tool, "sftprep_json", None)
    if text is None:
        return _strip(tool, marks, None)
    hit = _PLAIN_TOOLS.get(id(text))
    if hit is not None and hit[0] is text:
        return hit[1]
    plain = _strip(tool, marks, None)
    if len(_PLAIN_TOOLS) >= _PLAIN_TOOLS_MAX:
        _PLAIN_TOOLS.clear()
    _PLAIN_TOOLS[id(text)] = (text, plain)
    return plain


def _strip(value: Any, marks: Marks, sources: set[int] | None) -> Any:
    """A plain copy of `value` without sentinels; the canonical messages whose marks it held go to
    `sources` (None: not wanted). Marked dicts (and cached tool definitions) are never mutated."""
    kind = type(value)  # exact types first: most values are plain strings and dicts
    if kind is str:
        if value.isascii():
            return value
        if _one_piece(value):
            if sources is not None:
                _note(value[0], marks, sources)
            return value[1:-1]
        if sources is not None:
            for char in MARK_RE.findall(value):
                _note(char, marks, sources)
        return _UNMARK("", value)
    if kind is dict:
        if sources is None:  # string values (most) stripped here, not through _strip
            return {key: (item if item.isascii() else item[1:-1] if _one_piece(item) else _UNMARK("", item))
                    if type(item) is str else _strip(item, marks, None) for key, item in value.items()}
        return {key: _strip(item, marks, sources) for key, item in value.items()}
    if kind is list:
        return [_strip(item, marks, sources) for item in value]
    pair = getattr(value, "sftprep_marks", None)
    if pair is not None:
        if sources is not None:
            _note(pair[0], marks, sources)
        # Marks.json refused any sentinel inside: what remains is a plain copy, made in C when it can be.
        try:
            return _PLAIN_DECODE(_PLAIN_ENCODE(value))
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
            pass
    if isinstance(value, str):
        return _strip(str(value), marks, sources) if not value.isascii() else value
    if isinstance(value, dict):
        return {key: _strip(item, marks, sources) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strip(item, marks, sources) for item in value]
    return value


def _one_piece(text: str) -> bool:
    """`text` is one marked piece, open + content + close of one pair: Marks.text refuses content that
    holds sentinels, so none is inside and stripping is a slice, not a scan of the whole text."""
    first = ord(text[0])
    return (ord(text[-1]) == first + 1 and not first & 1
            and (0xF0002 <= first <= 0xFFFFC or 0x100000 <= first <= 0x10FFFC))


def _note(char: str, marks: Marks, sources: set[int]) -> None:
    index = (mark_index(char) - 2) // 2
    if 0 <= index < len(marks.refs) and marks.refs[index].message is not None:
        sources.add(marks.refs[index].message)
