"""Anthropic messages and content blocks -> canonical ones: `BlockReader` reads one conversation's blocks,
pairing tool results with their calls; `read_message` reads the message around them."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ...conversation import Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...errors import ParseError
from ...ids import CallIds
from ..base import CallIndex, expect, require
from .blocks import _TEXT_KEYS, NAME, OPAQUE_TYPES, ROLES

# Items a tool_result's content list may hold that have no canonical Text/Media form.
_RESULT_ONLY_ITEMS = frozenset({"tool_reference", "search_result", "browser_state"})

_MESSAGE_KEYS = frozenset({"role", "content"})
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
