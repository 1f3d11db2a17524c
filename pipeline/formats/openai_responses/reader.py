"""OpenAI Responses input/output items -> canonical blocks (the reading half of the item layer;
`writer` is the other half): message items and their parts, calls, results, reasoning."""

from __future__ import annotations

from typing import Any

from ...conversation import Media, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...errors import ParseError
from ...ids import CallIds
from ..base import CallIndex, expect, require
from .grouping import Group, Messages
from .items import KNOWN_ITEM_TYPES, MESSAGE_ROLES, NAME, item_side, parse_json_arguments, slot

_MESSAGE_KEYS = frozenset({"type", "role", "content", "id", "status"})
_CALL_HINT = frozenset({"mcp_call", "program"})
_AUDIO_MEDIA_TYPES = {"mp3": "audio/mpeg", "wav": "audio/wav"}
# Reasoning content parts holding visible reasoning: the API's, and the plain `text` that Codex CLI writes
# for reasoning it got from Chat Completions servers.
_REASONING_PARTS = frozenset({"reasoning_text", "text"})


def _role_hint(item_type: str) -> str:
    if item_type.endswith("_call") or item_type in _CALL_HINT:
        return "call"
    if item_type.endswith("_output"):
        return "result"
    return "other"


def split_data_url(url: str) -> tuple[str, str] | None:
    """`data:<media type>;base64,<data>` -> (media type, data); None for anything else."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(";base64,")
    if not sep or not head or ";" in head or "," in head:
        return None
    return head, data


class Reader:
    """Parses items of one conversation; holds its call ids and call index."""

    __slots__ = ("ids", "calls", "strict", "native_calls")

    def __init__(self, strict: bool) -> None:
        self.ids = CallIds()
        self.calls = CallIndex()
        self.strict = strict
        # call_ids of provider-native call items (local_shell_call, shell_call, ...): kept as Opaque blocks
        self.native_calls: set[str] = set()

    # --- the item list ------------------------------------------------------------------------

    def items(self, items: list, base: str, lead: bool):
        """-> (messages, system blocks, developer blocks, lead layout). With `lead`, the system and
        developer messages before any other item are the conversation's instructions."""
        out = Messages()
        system: list = []
        developer: list = []
        lead_form: list = []
        leading = lead
        for i, item in enumerate(items):
            path = f"{base}[{i}]"
            expect(item, dict, path, "item")
            item_type = item.get("type")
            if item_type is None and "role" not in item:
                if "id" not in item:
                    raise ParseError("missing required field 'type'", path=path)
                item_type = "item_reference"  # the one item that may leave out its type
            elif item_type is None or item_type == "message":
                role = require(item, "role", str, path)
                if role not in MESSAGE_ROLES:
                    raise ParseError(f"unknown role '{role}' (expected one of user, assistant, system, developer)",
                                     path=f"{path}.role")
                content = self.message_content(item, path, role)
                # conv.system/developer hold text and media only: an unknown part keeps it a message.
                if leading and role in ("system", "developer") and not content[3]:
                    one = Group(role)
                    one.add_content(*content)
                    entry = {"role": role, "n": len(one.blocks)}
                    if one.form:
                        entry["m"] = one.form  # message-level layout (empty content, opaque parts)
                    (system if role == "system" else developer).extend(one.blocks)
                    lead_form.append(entry)
                    continue
                leading = False
                # Assistant message items join the assistant turn; any other is a message of its own.
                out.group("assistant" if role == "assistant" else None, role).add_content(*content)
                continue
            if not isinstance(item_type, str):
                raise ParseError(f"'type' must be a string, got {type(item_type).__name__}", path=f"{path}.type")
            leading = False
            side = item_side(item, item_type)
            block = self.item(item, item_type, path)
            out.group(side if side in ("assistant", "tool") else None, side).blocks.append(block)
        return out.finish(), system, developer, lead_form

    def item(self, item: dict, item_type: str, path: str):
        match item_type:
            case "function_call":
                return self.function_call(item, path)
            case "custom_tool_call":
                return self.custom_call(item, path)
            case "function_call_output" | "custom_tool_call_output":
                call_id = item.get("call_id")
                if isinstance(call_id, str) and call_id in self.native_calls:
                    # The output of a provider-native call (Codex answers local_shell_call so): native too,
                    # so that it travels, or is dropped, with its call.
                    return self.opaque(item, item_type)
                return self.call_output(item, item_type, path)
            case "reasoning":
                return self.reasoning(item, path)
        if item_type not in KNOWN_ITEM_TYPES and self.strict:
            raise ParseError(f"unknown item type '{item_type}'", path=f"{path}.type", code="unknown_block")
        block = self.opaque(item, item_type)
        if block.role_hint == "call" and isinstance(item.get("call_id"), str):
            self.native_calls.add(item["call_id"])
        return block

    @staticmethod
    def opaque(item: dict, item_type: str) -> Opaque:
        name = item.get("name")
        return Opaque(provider=NAME, item_type=item_type, payload=dict(item), role_hint=_role_hint(item_type),  # type: ignore[arg-type]
                      name=name if isinstance(name, str) else None)

    # --- message items ------------------------------------------------------------------------

    def message_content(self, item: dict, path: str, role: str):
        """-> (blocks, item layout, item extras as `message.<key>`, indexes of opaque parts)."""
        if "content" not in item:
            raise ParseError("missing required field 'content'", path=path)
        content = item["content"]
        layout: dict = {}
        if "type" in item:
            layout["t"] = 1
        kv = {k: item[k] for k in ("id", "status") if k in item}
        if kv:
            layout["kv"] = kv
        item_extras = {f"message.{k}": v for k, v in item.items() if k not in _MESSAGE_KEYS}
        opaque_at: list[int] = []
        if isinstance(content, str):
            layout["s"] = 1
            return [Text(text=content)], layout, item_extras, opaque_at
        expect(content, list, f"{path}.content", "'content'")
        blocks = []
        for j, part in enumerate(content):
            block = self.part(part, f"{path}.content[{j}]", role)
            if isinstance(block, Opaque):
                opaque_at.append(j)
            blocks.append(block)
        return blocks, layout, item_extras, opaque_at

    def part(self, part: Any, path: str, role: str):
        expect(part, dict, path, "content part")
        if "type" not in part:
            raise ParseError("missing required field 'type'", path=path)
        part_type = part["type"]
        match part_type:
            case "input_text" | "output_text":
                text = require(part, "text", str, path)
                form: dict = {}
                extras: dict = {}
                if part_type != ("output_text" if role == "assistant" else "input_text"):
                    form["pt"] = part_type
                for key, value in part.items():
                    if key == "type" or key == "text":
                        continue
                    if value == [] and key in ("annotations", "logprobs"):
                        form.setdefault("e", []).append(key)  # an empty list carries no data
                    else:
                        extras[key] = value
                return Text(text=text, extras=slot(extras), form={NAME: form})
            case "refusal":
                text = require(part, "refusal", str, path)
                extras = {k: v for k, v in part.items() if k not in ("type", "refusal")}
                extras["refusal"] = True
                return Text(text=text, extras={NAME: extras}, form={NAME: {}})
            case "input_image":
                return self.image_part(part, path)
            case "input_file":
                return self.file_part(part, path)
            case "input_audio":
                audio = require(part, "input_audio", dict, path)
                data = require(audio, "data", str, f"{path}.input_audio")
                fmt = require(audio, "format", str, f"{path}.input_audio")
                extras = {k: v for k, v in part.items() if k not in ("type", "input_audio")}
                inner = {k: v for k, v in audio.items() if k not in ("data", "format")}
                if inner:
                    extras["input_audio"] = inner
                return Media(kind="audio", data=data, media_type=_AUDIO_MEDIA_TYPES.get(fmt, f"audio/{fmt}"),
                             extras=slot(extras), form={NAME: {"fmt": fmt}})
        if self.strict:
            raise ParseError(f"unknown content part type '{part_type}'", path=f"{path}.type", code="unknown_block")
        return Opaque(provider=NAME, item_type=part_type if isinstance(part_type, str) else str(part_type),
                      payload=dict(part))

    @staticmethod
    def _media_common(part: dict, path: str, kv: dict, extras: dict, fields: dict, known: tuple[str, ...]) -> None:
        """file_id / detail and unknown keys, shared by image and file parts."""
        for key, value in part.items():
            if key == "type" or key in known:
                continue
            if key == "file_id":
                if isinstance(value, str):
                    fields["file_id"] = value
                elif value is None:
                    kv[key] = None
                else:
                    expect(value, str, f"{path}.file_id", "'file_id'")
            elif key == "detail" and value in (None, "auto"):
                kv[key] = value  # the default: layout, not data
            else:
                extras[key] = value

    def image_part(self, part: dict, path: str) -> Media:
        kv: dict = {}
        extras: dict = {}
        fields: dict = {}
        form: dict = {}
        if "image_url" in part:
            url = part["image_url"]
            if url is None:
                kv["image_url"] = None
            else:
                expect(url, str, f"{path}.image_url", "'image_url'")
                split = split_data_url(url)
                if split is not None:
                    fields["media_type"], fields["data"] = split
                else:
                    fields["url"] = url
        self._media_common(part, path, kv, extras, fields, ("image_url",))
        if kv:
            form["kv"] = kv
        return Media(kind="image", extras=slot(extras), form={NAME: form}, **fields)

    def file_part(self, part: dict, path: str) -> Media:
        kv: dict = {}
        extras: dict = {}
        fields: dict = {}
        form: dict = {}
        for key in ("file_data", "file_url", "filename"):
            if key not in part:
                continue
            value = part[key]
            if value is None:
                kv[key] = None
                continue
            expect(value, str, f"{path}.{key}", f"'{key}'")
            if key == "file_data":
                split = split_data_url(value)
                if split is not None:
                    fields["media_type"], fields["data"] = split
                else:
                    fields["data"] = value
                    form["raw"] = 1
            elif key == "file_url":
                fields["url"] = value
            else:
                fields["filename"] = value
        self._media_common(part, path, kv, extras, fields, ("file_data", "file_url", "filename"))
        if kv:
            form["kv"] = kv
        media_type = fields.get("media_type") or ""
        filename = fields.get("filename") or ""
        document = media_type == "application/pdf" or media_type.startswith("text/") or filename.endswith(".pdf")
        return Media(kind="document" if document else "file", extras=slot(extras), form={NAME: form}, **fields)

    # --- calls, results, reasoning ------------------------------------------------------------

    def function_call(self, item: dict, path: str) -> ToolCall:
        call_id = require(item, "call_id", str, path)
        self.native_calls.discard(call_id)
        name = require(item, "name", str, path)
        raw = require(item, "arguments", str, path)
        arguments, valid = parse_json_arguments(raw)
        canonical = self.ids.from_text(name, raw, arguments)
        self.calls.add(canonical, name, call_id)
        kv = {k: item[k] for k in ("id", "status") if k in item}
        extras = {k: v for k, v in item.items() if k not in ("type", "call_id", "name", "arguments", "id", "status")}
        return ToolCall(id=canonical, name=name, arguments=arguments, raw_arguments=raw, arguments_valid=valid,
                        provider_id=call_id, extras=slot(extras), form={NAME: {"kv": kv} if kv else {}})

    def custom_call(self, item: dict, path: str) -> ToolCall:
        call_id = require(item, "call_id", str, path)
        name = require(item, "name", str, path)
        text = require(item, "input", str, path)
        canonical = self.ids.new(name, text)
        self.calls.add(canonical, name, call_id)
        kv = {k: item[k] for k in ("id", "status") if k in item}
        extras = {k: v for k, v in item.items() if k not in ("type", "call_id", "name", "input", "id", "status")}
        return ToolCall(id=canonical, name=name, arguments=text, provider_id=call_id, kind="custom",
                        extras=slot(extras), form={NAME: {"kv": kv} if kv else {}})

    def call_output(self, item: dict, item_type: str, path: str) -> ToolResult:
        if "output" not in item:
            raise ParseError("missing required field 'output'", path=path)
        output = expect(item["output"], (str, list), f"{path}.output", "'output'")
        kv: dict = {}
        provider_id = item.get("call_id")
        if provider_id is None:
            if "call_id" in item:
                kv["call_id"] = None
        else:
            expect(provider_id, str, f"{path}.call_id", "'call_id'")
        name = item.get("name")
        if name is not None:
            expect(name, str, f"{path}.name", "'name'")
        elif "name" in item:
            kv["name"] = None
        for key in ("id", "status"):
            if key in item:
                kv[key] = item[key]
        extras = {k: v for k, v in item.items()
                  if k not in ("type", "call_id", "output", "name", "id", "status")}
        form: dict = {}
        content: tuple = ()
        if isinstance(output, str):
            content = (Text(text=output),)
            form["s"] = 1
        else:
            parts = [self.part(p, f"{path}.output[{j}]", "user") for j, p in enumerate(output)]
            if any(isinstance(p, Opaque) for p in parts):
                extras["output"] = output  # a part with no canonical form: keep the whole output as is
            else:
                content = tuple(parts)
        if kv:
            form["kv"] = kv
        canonical = self.calls.by_id(provider_id)
        return ToolResult(call_id=canonical, provider_id=provider_id, name=name, content=content,
                          matched_by="id" if canonical is not None else None,
                          kind="custom" if item_type == "custom_tool_call_output" else "function",
                          extras=slot(extras), form={NAME: form})

    def reasoning(self, item: dict, path: str) -> Reasoning:
        kv: dict = {}
        extras: dict = {}
        form: dict = {}
        fields: dict = {}
        for key, value in item.items():
            match key:
                case "type":
                    pass
                case "id" if isinstance(value, str):
                    fields["item_id"] = value
                case "encrypted_content" if isinstance(value, str):
                    fields["encrypted"] = value
                case "summary":
                    expect(value, list, f"{path}.summary", "'summary'")
                    texts = []
                    simple = True
                    for j, part in enumerate(value):
                        expect(part, dict, f"{path}.summary[{j}]", "summary part")
                        text = part.get("text")
                        if isinstance(text, str) and part.get("type") == "summary_text" and len(part) == 2:
                            texts.append(text)
                        else:
                            simple = False
                            if isinstance(text, str):
                                texts.append(text)
                    fields["summary"] = tuple(texts)
                    if not simple:
                        extras["summary"] = value
                case "content" if isinstance(value, list) and value and all(
                        isinstance(p, dict) and p.get("type") in _REASONING_PARTS and len(p) == 2
                        and isinstance(p.get("text"), str) for p in value):
                    texts = [p["text"] for p in value]
                    fields["text"] = "".join(texts)
                    if len(texts) > 1:
                        form["split"] = [len(t) for t in texts]
                    if any(p["type"] != "reasoning_text" for p in value):
                        form["pt"] = [p["type"] for p in value]
                case "content" if value is None or value == []:
                    kv[key] = value
                case "id" | "encrypted_content" | "status":
                    kv[key] = value
                case _:
                    extras[key] = value
        if "summary" not in item:
            form["ns"] = 1
        if kv:
            form["kv"] = kv
        return Reasoning(origin=NAME, extras=slot(extras), form={NAME: form}, **fields)
