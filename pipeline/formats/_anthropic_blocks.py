"""Anthropic messages and content blocks <-> canonical ones (the content half of the Anthropic codec).

`BlockReader` turns one conversation's blocks into canonical ones while pairing tool results with
their calls; `BlockWriter` does the reverse and writes a ledger entry for whatever Anthropic cannot
carry; `read_message` / `write_messages` handle roles around them. Request-level work (system, tools,
parameters, response objects) lives in `anthropic.py`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, assert_never

import orjson
from msgspec import UNSET

from ..conversation import Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ..errors import ParseError
from ..ids import CallIds
from ..ledger import Ledger
from .base import ANTHROPIC_ID, CallIndex, expect, outgoing_id, require

NAME = "anthropic"

# Provider-hosted traffic carried verbatim as Opaque, with the role it plays.
OPAQUE_TYPES: dict[str, str] = {
    "server_tool_use": "call",
    "mcp_tool_use": "call",
    "web_search_tool_result": "result",
    "web_fetch_tool_result": "result",
    "code_execution_tool_result": "result",
    "bash_code_execution_tool_result": "result",
    "text_editor_code_execution_tool_result": "result",
    "tool_search_tool_result": "result",
    "mcp_tool_result": "result",
    "advisor_tool_result": "result",
    "compaction": "other",
    "tool_addition": "other",
    "tool_removal": "other",
    "container_upload": "other",
    "fallback": "other",
    "search_result": "other",
    "mcp_tool_listing": "other",
}
# Items a tool_result's content list may hold that have no canonical Text/Media form.
_RESULT_ONLY_ITEMS = frozenset({"tool_reference", "search_result", "browser_state"})

ROLES = frozenset({"user", "assistant", "system"})
_MESSAGE_KEYS = frozenset({"role", "content"})
_TEXT_KEYS = frozenset({"type", "text"})
_MEDIA_KEYS = frozenset({"type", "source"})
_CALL_KEYS = frozenset({"type", "id", "name", "input"})
_RESULT_KEYS = frozenset({"type", "tool_use_id", "content", "is_error"})
_THINKING_KEYS = frozenset({"type", "thinking", "signature"})
_REDACTED_KEYS = frozenset({"type", "data"})
# Fields each source type maps onto Media; a source with anything else is kept verbatim.
_SOURCE_KEYS = {
    "base64": frozenset({"type", "media_type", "data"}),
    "url": frozenset({"type", "url"}),
    "file": frozenset({"type", "file_id"}),
    "text": frozenset({"type", "media_type", "data"}),
}
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
# Leading base64 characters of each image format's magic bytes.
_IMAGE_MAGIC = (("iVBORw0KGgo", "image/png"), ("/9j/", "image/jpeg"), ("R0lGOD", "image/gif"),
                ("UklGR", "image/webp"))


def _rest(obj: dict, known: frozenset[str]) -> dict:
    """Keys the canonical block does not model, as a new dict (the caller's stays untouched)."""
    return {k: v for k, v in obj.items() if k not in known}


def _slots(values: dict) -> dict:
    return {NAME: values} if values else {}


class BlockReader:
    """Reads the blocks of one conversation, front to back."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.ids = CallIds()
        self.index = CallIndex()

    def block(self, b: Any, path: str):
        expect(b, dict, path, "content block")
        btype = require(b, "type", str, path)
        match btype:
            case "text":
                return self.text(b, path)
            case "image" | "document":
                return self.media(b, btype, path)
            case "tool_use":
                return self.tool_use(b, path)
            case "tool_result":
                return self.tool_result(b, path)
            case "thinking":
                text = require(b, "thinking", str, path)
                signature = b.get("signature")
                if signature is not None:
                    expect(signature, str, f"{path}.signature", "'signature'")
                form = {"signature": "null"} if "signature" in b and signature is None else {}
                return Reasoning(text=text, signature=signature, origin=NAME,
                                 extras=_slots(_rest(b, _THINKING_KEYS)), form=_slots(form))
            case "redacted_thinking":
                data = require(b, "data", str, path)
                return Reasoning(redacted=data, origin=NAME, extras=_slots(_rest(b, _REDACTED_KEYS)))
            case _:
                hint = OPAQUE_TYPES.get(btype)
                if hint is None and self.strict:
                    raise ParseError(f"unknown anthropic block type '{btype}'", path=f"{path}.type",
                                     code="unknown_block")
                name = b.get("name")
                return Opaque(provider=NAME, item_type=btype, payload=b, role_hint=hint or "other",
                              name=name if isinstance(name, str) else None)

    def text(self, b: dict, path: str) -> Text:
        text = require(b, "text", str, path)
        return Text(text, extras=_slots(_rest(b, _TEXT_KEYS)))

    def media(self, b: dict, kind: str, path: str) -> Media:
        source = require(b, "source", dict, path)
        spath = f"{path}.source"
        stype = require(source, "type", str, spath)
        extras = _rest(b, _MEDIA_KEYS)
        known = _SOURCE_KEYS.get(stype)
        if known is None or (stype == "text" and kind != "document") or not source.keys() <= known:
            # A source shape without canonical fields (content blocks, new types): keep it whole.
            extras["source"] = source
            return Media(kind=kind, extras=_slots(extras))
        match stype:
            case "base64":
                return Media(kind=kind, media_type=require(source, "media_type", str, spath),
                             data=require(source, "data", str, spath), extras=_slots(extras))
            case "text":
                return Media(kind=kind, media_type=require(source, "media_type", str, spath),
                             text=require(source, "data", str, spath), extras=_slots(extras))
            case "url":
                return Media(kind=kind, url=require(source, "url", str, spath), extras=_slots(extras))
            case _:  # "file"
                return Media(kind=kind, file_id=require(source, "file_id", str, spath), extras=_slots(extras))

    def tool_use(self, b: dict, path: str) -> ToolCall:
        provider_id = require(b, "id", str, path)
        name = require(b, "name", str, path)
        arguments = require(b, "input", dict, path)
        cid = self.ids.new(name, arguments)
        self.index.add(cid, name, provider_id)
        return ToolCall(id=cid, name=name, arguments=arguments, provider_id=provider_id,
                        extras=_slots(_rest(b, _CALL_KEYS)))

    def tool_result(self, b: dict, path: str) -> ToolResult:
        provider_id = require(b, "tool_use_id", str, path)
        form: dict[str, Any] = {}
        extras = _rest(b, _RESULT_KEYS)
        is_error = False
        if "is_error" in b:
            is_error = expect(b["is_error"], bool, f"{path}.is_error", "'is_error'")
            if not is_error:
                form["is_error"] = False  # written out explicitly
        content: tuple = ()
        raw = b.get("content", UNSET)
        if raw is UNSET:
            form["content"] = "absent"
        elif isinstance(raw, str):
            content = (Text(raw),)
            form["content"] = "str"
        else:
            expect(raw, list, f"{path}.content", "'content'")
            items: list = []
            unmapped: list = []
            for k, item in enumerate(raw):
                ipath = f"{path}.content[{k}]"
                expect(item, dict, ipath, "content block")
                itype = require(item, "type", str, ipath)
                match itype:
                    case "text":
                        items.append(self.text(item, ipath))
                    case "image" | "document":
                        items.append(self.media(item, itype, ipath))
                    case _:
                        if itype not in _RESULT_ONLY_ITEMS and self.strict:
                            raise ParseError(f"unknown anthropic tool_result content type '{itype}'",
                                             path=f"{ipath}.type", code="unknown_block")
                        # Kept with its position so a same-format round trip restores the order.
                        unmapped.append([k, item])
            content = tuple(items)
            if unmapped:
                extras["unmapped_content"] = unmapped
        call_id = self.index.by_id(provider_id)
        name = self.index.names.get(call_id) if call_id is not None else None
        return ToolResult(call_id=call_id, provider_id=provider_id, name=name, content=content,
                          is_error=is_error, matched_by="id" if call_id is not None else None,
                          extras=_slots(extras), form=_slots(form))


# --- writing ----------------------------------------------------------------------------------------

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
            arguments = {"input": arguments}
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
            items.append({"type": "text", "text": orjson.dumps(block.output).decode()})
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id}
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

def read_message(m: Any, path: str, reader: BlockReader) -> Message:
    expect(m, dict, path, "message")
    role = require(m, "role", str, path)
    if role not in ROLES:
        raise ParseError(f"role must be 'user', 'assistant' or 'system', got '{role}'", path=f"{path}.role")
    form: dict[str, str] = {}
    if "content" not in m and role == "system":  # a system message may carry only output_config
        blocks: tuple = ()
        form["content"] = "absent"
    else:
        content = require(m, "content", (str, list), path)
        if isinstance(content, str):
            blocks = (Text(content),)
            form["content"] = "str"
        else:
            blocks = tuple(reader.block(b, f"{path}.content[{i}]") for i, b in enumerate(content))
    rest = {k: v for k, v in m.items() if k not in _MESSAGE_KEYS}
    return Message(role=role, blocks=blocks, extras={NAME: rest} if rest else {},
                   form={NAME: form} if form else {})


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
        out.update(m.extras.get(NAME) or {})
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
    own = m.extras.get(NAME)
    if own:
        out.update(own)
    return out


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
