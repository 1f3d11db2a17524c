"""Canonical blocks and messages -> Anthropic ones: `BlockWriter` writes one conversation's blocks, with a
ledger entry for whatever Anthropic cannot carry; `write_messages` lays out the messages around them."""

from __future__ import annotations

import base64
import binascii
from typing import Any, assert_never

from msgspec import UNSET

from ... import jsonpolicy
from ...conversation import CUSTOM_INPUT, Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...ledger import Ledger
from ..base import ANTHROPIC_ID, RESPONSE_FIELD, ledger_result_name, outgoing_id
from .blocks import _TEXT_KEYS, NAME

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# Leading base64 characters of each image format's magic bytes.
_IMAGE_MAGIC = (("iVBORw0KGgo", "image/png"), ("/9j/", "image/jpeg"), ("R0lGOD", "image/gif"),
                ("UklGR", "image/webp"))


def _own(slots: dict) -> dict | None:
    return slots.get(NAME)


def sniff_image_type(data: str) -> str | None:
    for prefix, media_type in _IMAGE_MAGIC:
        if data.startswith(prefix):
            return media_type
    return None


class BlockWriter:
    """Writes canonical blocks as Anthropic blocks; one instance per serialized conversation."""

    def __init__(self, ledger: Ledger, same_origin: bool) -> None:
        self.ledger = ledger
        # Anthropic's own data is written back as it came (its logs do hold whitespace-only text);
        # data of another origin is made to satisfy the API's rules.
        self.same_origin = same_origin
        self.out_ids: dict[str, str] = {}  # canonical call id -> id written on the tool_use
        self.used_ids: set[str] = set()

    def block(self, block, path: str) -> dict | None:
        """The Anthropic block for `block`, or None when it cannot be written (ledgered here, or by
        the foreign-extras walk for another provider's Opaque)."""
        match block:
            case Text():
                return self.text(block, path) if self.keep_text(block, path) else None
            case Media():
                return self.media(block, path)
            case ToolCall():
                return self.tool_use(block, path)
            case ToolResult():
                return self.tool_result(block, path)
            case Reasoning():
                return self.reasoning(block, path)
            case Opaque():
                return block.payload if block.provider == NAME else None
            case _:
                assert_never(block)

    def _signature(self, block, path: str) -> None:
        if block.signature is not None:
            self.ledger.add("dropped", path, "a Gemini thought signature has no place on this anthropic block")

    def keep_text(self, block: Text, path: str) -> bool:
        """Anthropic rejects text blocks without visible text; an empty one is dropped (ledgered)."""
        if self.same_origin or block.text.strip():
            return True
        self.ledger.add("dropped", path, "anthropic rejects text blocks that are empty or only whitespace")
        return False

    def text(self, block: Text, path: str) -> dict:
        self._signature(block, path)
        out = {"type": "text", "text": block.text}
        own = _own(block.extras)
        if own:
            out.update(own)
        return out

    def media(self, block: Media, path: str) -> dict | None:
        self._signature(block, path)
        own = _own(block.extras) or {}
        source = own.get("source")
        if source is None:
            match block.kind:
                case "image":
                    source = self._image_source(block, path)
                    btype = "image"
                case "document" | "file":
                    source = self._document_source(block, path)
                    btype = "document"
                case "audio" | "video":
                    source = None
                    btype = ""
                    self.ledger.add("dropped", path, f"anthropic messages cannot carry {block.kind}")
                case _:
                    assert_never(block.kind)
            if source is None:
                return None
        else:
            btype = "image" if block.kind == "image" else "document"
        if block.filename is not None and "title" not in own:
            self.ledger.add("dropped", path, "anthropic has no file name on a content block")
        out = {"type": btype, "source": source}
        out.update((k, v) for k, v in own.items() if k != "source")
        return out

    def _image_source(self, block: Media, path: str) -> dict | None:
        if block.data is not None:
            media_type = block.media_type
            if media_type is None:
                media_type = sniff_image_type(block.data)
                if media_type is None:
                    self.ledger.add("dropped", path, "image without a media type that anthropic accepts")
                    return None
                self.ledger.add("synthesized", path, f"media_type {media_type} read from the image bytes")
            return {"type": "base64", "media_type": media_type, "data": block.data}
        if block.url is not None:
            return {"type": "url", "url": block.url}
        if block.file_id is not None:
            return {"type": "file", "file_id": block.file_id}
        self.ledger.add("dropped", path, "image with neither data, URL nor file id")
        return None

    def _document_source(self, block: Media, path: str) -> dict | None:
        if block.text is not None:
            return {"type": "text", "media_type": block.media_type or "text/plain", "data": block.text}
        if block.data is not None:
            media_type = block.media_type or ("application/pdf" if block.data.startswith("JVBER") else None)
            if media_type == "application/pdf":
                return {"type": "base64", "media_type": media_type, "data": block.data}
            if media_type is not None and media_type.startswith("text/"):
                try:
                    text = base64.b64decode(block.data, validate=True).decode("utf-8")
                except (binascii.Error, ValueError):
                    text = None
                if text is not None:  # same content, plain-text source instead of base64
                    return {"type": "text", "media_type": "text/plain", "data": text}
            self.ledger.add("dropped", path, f"anthropic documents take PDF or plain text, not {media_type}")
            return None
        if block.url is not None:
            return {"type": "url", "url": block.url}
        if block.file_id is not None:
            return {"type": "file", "file_id": block.file_id}
        self.ledger.add("dropped", path, "document with neither data, text, URL nor file id")
        return None

    def tool_use(self, block: ToolCall, path: str) -> dict:
        self._signature(block, path)
        out_id, replaced = outgoing_id(block.provider_id, block.id, ANTHROPIC_ID)
        if replaced:
            self.ledger.add("synthesized", path,
                            f"call id '{block.provider_id}' is not a valid anthropic id; wrote the canonical id")
        elif block.provider_id is None:
            self.ledger.add("synthesized", path, "call had no provider id; wrote the canonical id")
        elif out_id in self.used_ids and not self.same_origin:
            # Some logs reuse a call id across turns; Anthropic wants tool_use ids unique.
            self.ledger.add("synthesized", path, f"call id '{out_id}' was already used; wrote the canonical id")
            out_id = block.id
        self.used_ids.add(out_id)
        self.out_ids[block.id] = out_id
        arguments = block.arguments
        if arguments is UNSET or not block.arguments_valid:
            raw = block.raw_arguments or ""
            self.ledger.add("dropped", f"{path}.arguments",
                            f"arguments are not valid JSON ({len(raw)} chars: {raw[:40]!r}); "
                            "anthropic needs an object, wrote {}")
            arguments = {}
        elif not isinstance(arguments, dict):
            self.ledger.add("folded", f"{path}.arguments",
                            f"arguments are a JSON {type(arguments).__name__}, anthropic needs an object: "
                            "wrapped as {\"input\": ...}")
            arguments = {CUSTOM_INPUT: arguments}
        out = {"type": "tool_use", "id": out_id, "name": block.name, "input": arguments}
        own = _own(block.extras)
        if own:
            out.update(own)
        return out

    def tool_result(self, block: ToolResult, path: str, fallback_id: str = "") -> dict:
        self._signature(block, path)
        tool_use_id = self.out_ids.get(block.call_id) if block.call_id is not None else None
        if tool_use_id is None:
            canonical = block.call_id or fallback_id
            tool_use_id, replaced = outgoing_id(block.provider_id, canonical, ANTHROPIC_ID)
            if replaced or block.provider_id is None:
                self.ledger.add("synthesized", path, "result without a usable call id; wrote a generated id")
        own = _own(block.extras) or {}
        form = _own(block.form) or {}
        items: list = []
        for k, inner in enumerate(block.content):
            ipath = f"{path}.content[{k}]"
            if isinstance(inner, Text):
                item = self.text(inner, ipath) if self.keep_text(inner, ipath) else None
            else:
                item = self.media(inner, ipath)
            if item is not None:
                items.append(item)
        for k, item in own.get("unmapped_content", ()):
            items.insert(k, item)
        if block.output is not UNSET:
            self.ledger.add("folded", f"{path}.output", "anthropic results have no structured output: written as JSON text")
            items.append({"type": "text", "text": jsonpolicy.dumps(block.output).decode()})
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id}
        ledger_result_name(self.ledger, path, block, NAME)
        shape = form.get("content")
        if shape == "str" and len(items) == 1 and items[0].keys() == _TEXT_KEYS:
            out["content"] = items[0]["text"]
        elif items or (shape != "absent" and self.same_origin):  # another origin's empty result: no content
            out["content"] = items
        if block.is_error:
            out["is_error"] = True
        elif "is_error" in form:
            out["is_error"] = False
        out.update((k, v) for k, v in own.items() if k != "unmapped_content")
        return out

    def reasoning(self, block: Reasoning, path: str) -> dict | None:
        if block.origin != NAME:
            origin = block.origin or "an unknown provider"
            self.ledger.add("dropped", path, f"reasoning from {origin} cannot be sent to anthropic: thinking "
                                             "blocks need an anthropic signature")
            return None
        if block.summary or block.encrypted is not None or block.item_id is not None:
            self.ledger.add("dropped", path, "anthropic thinking has no summary, encrypted content or item id")
        if block.redacted is not None:
            out = {"type": "redacted_thinking", "data": block.redacted}
        else:
            out = {"type": "thinking", "thinking": block.text or ""}
            if block.signature is not None or "signature" in (_own(block.form) or {}):
                out["signature"] = block.signature
        own = _own(block.extras)
        if own:
            out.update(own)
        return out


# --- messages ----------------------------------------------------------------------------------------

def write_messages(conv: Conversation, writer: BlockWriter, ledger: Ledger) -> list[dict]:
    out: list[dict] = []
    msgs = conv.messages
    i, n = 0, len(msgs)
    while i < n:
        j = i + 1
        if msgs[i].role in ("user", "tool"):
            # Anthropic has no tool role: a run of tool and user messages becomes one user message.
            while j < n and msgs[j].role in ("user", "tool"):
                j += 1
            if j - i == 1 or all(msgs[k].role == "user" for k in range(i, j)):
                j = i + 1
        written = _message_out(msgs[i], i, writer, ledger) if j == i + 1 else _user_run(msgs, i, j, writer, ledger)
        if written is not None:
            out.append(written)
        i = j
    return out


def _message_out(m: Message, mi: int, writer: BlockWriter, ledger: Ledger) -> dict | None:
    mpath = f"$.messages[{mi}]"
    message_fields(m, mpath, ledger)
    role = m.role
    shape = (m.form.get(NAME) or {}).get("content")
    if shape == "str" and role in ("user", "assistant", "system") and plain_text(m.blocks):
        # The string shorthand: no block rules apply (an empty final assistant prefill stays "").
        out: dict[str, Any] = {"role": role, "content": m.blocks[0].text}
        out.update(_request_fields(m, mpath, ledger))
        return out
    match role:
        case "system" | "developer":
            if role == "developer":
                ledger.add("folded", mpath, "anthropic has no developer role: written as a system message")
            content = _system_content(m, mpath, writer, ledger)
            role = "system"
        case "user" | "tool":
            triples = [(mi, bi, b) for bi, b in enumerate(m.blocks)]
            content = blocks_out(triples if writer.same_origin else _results_first(triples, ledger), writer)
            role = "user"
        case "assistant":
            content = blocks_out([(mi, bi, b) for bi, b in enumerate(m.blocks)], writer)
        case _:
            assert_never(role)
    if not content and m.blocks:
        ledger.add("dropped", mpath, "nothing in this message can be written in anthropic")
        return None
    out = {"role": role}
    if shape != "absent" or content:
        out["content"] = content
    out.update(_request_fields(m, mpath, ledger))
    return out


def _request_fields(m: Message, mpath: str, ledger: Ledger) -> dict:
    """The message's own fields, less those of the response it was read from (a logged exchange's
    turn): a null one says nothing, any other is ledgered."""
    fields = {}
    for key, value in (m.extras.get(NAME) or {}).items():
        if not key.startswith(RESPONSE_FIELD):
            fields[key] = value
        elif value is not None:
            ledger.add("dropped", mpath, f"response field '{key[1:]}' has no place in a request's message")
    return fields


def plain_text(blocks: tuple) -> bool:
    """One Text with nothing but its text: what a string `content` / `system` parses into."""
    return (len(blocks) == 1 and isinstance(blocks[0], Text) and not blocks[0].extras
            and blocks[0].signature is None)


def _user_run(msgs: tuple[Message, ...], start: int, stop: int, writer: BlockWriter, ledger: Ledger) -> dict | None:
    """Consecutive user and tool messages written as the one user message Anthropic expects."""
    triples: list[tuple[int, int, Any]] = []
    for mi in range(start, stop):
        message_fields(msgs[mi], f"$.messages[{mi}]", ledger)
        for key in msgs[mi].extras.get(NAME) or ():
            ledger.add("dropped", f"$.messages[{mi}]", f"message field '{key}' lost merging into one user message")
        triples.extend((mi, bi, b) for bi, b in enumerate(msgs[mi].blocks))
    content = blocks_out(_results_first(triples, ledger), writer)
    if not content:
        ledger.add("dropped", f"$.messages[{start}]", "nothing in these messages can be written in anthropic")
        return None
    return {"role": "user", "content": content}


def _results_first(triples: list[tuple[int, int, Any]], ledger: Ledger) -> list[tuple[int, int, Any]]:
    """Anthropic wants tool results first in a user turn: move other blocks behind them (ledgered)."""
    last_result = -1
    for k, (_, _, block) in enumerate(triples):
        if isinstance(block, ToolResult):
            last_result = k
    moved = [t for t in triples[:max(last_result, 0)] if not isinstance(t[2], ToolResult)]
    if not moved:
        return triples
    for mi, bi, _ in moved:
        ledger.add("reordered", f"$.messages[{mi}].blocks[{bi}]",
                   "anthropic needs tool results first in a user turn: moved after the results")
    return ([t for t in triples if isinstance(t[2], ToolResult)]
            + [t for t in triples if not isinstance(t[2], ToolResult)])


def blocks_out(triples: list[tuple[int, int, Any]], writer: BlockWriter) -> list[dict]:
    content = []
    for mi, bi, block in triples:
        path = f"$.messages[{mi}].blocks[{bi}]"
        if isinstance(block, ToolResult):
            item = writer.tool_result(block, path, f"toolu_orphan_{mi}_{bi}")
        else:
            item = writer.block(block, path)
        if item is not None:
            content.append(item)
    return content


def _system_content(m: Message, mpath: str, writer: BlockWriter, ledger: Ledger) -> list[dict]:
    content = []
    for bi, block in enumerate(m.blocks):
        path = f"{mpath}.blocks[{bi}]"
        if isinstance(block, Text):
            if writer.keep_text(block, path):
                content.append(writer.text(block, path))
        elif isinstance(block, Opaque):
            if block.provider == NAME:
                content.append(block.payload)
        else:
            ledger.add("dropped", path, "anthropic system messages hold text only")
    return content


def message_fields(m: Message, mpath: str, ledger: Ledger) -> None:
    if m.name is not None:
        ledger.add("dropped", mpath, "anthropic messages have no participant name")
    if m.weight is not None:
        ledger.add("dropped", mpath, "anthropic messages have no training weight")
