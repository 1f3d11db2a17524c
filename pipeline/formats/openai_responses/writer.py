"""Canonical messages -> OpenAI Responses items (the writing half of the item layer).

Reads the layout that `reader.Reader` left in `form["openai-responses"]` to rebuild the very same
items for a conversation of this format; for another format's conversation it writes the plain item
forms the API accepts and a ledger entry for every divergence.
"""

from __future__ import annotations

from typing import Any, assert_never

from msgspec import UNSET

from ... import jsonpolicy
from ...conversation import Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...ledger import Ledger
from ..base import ledger_result_name, outgoing_id
from .items import ERROR_PREFIX, MAX_CALL_ID, NAME, own, parse_json_arguments


def _plain_text(block) -> bool:
    """A Text that a string `content` can hold: no part type, flags or part-level extras."""
    if not isinstance(block, Text):
        return False
    form = own(block.form) or {}
    if any(k != "item" for k in form):
        return False
    return all(k.startswith("message.") for k in own(block.extras) or ())


class Writer:
    """Writes canonical blocks as items; every divergence goes to the ledger."""

    __slots__ = ("ledger", "written", "owner")

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.written: dict[str, str] = {}  # canonical call id -> the call_id written for it
        self.owner: dict[str, str] = {}  # call_id written -> canonical id of the call that has it

    # --- one message (or a run of instruction blocks) -----------------------------------------

    def message(self, message: Message, base: str, out: list, offset: int = 0) -> None:
        """Append the items for `message`; block paths are `{base}[{offset + i}]`."""
        role = message.role
        mform = own(message.form) or {}
        opaque_parts = set(mform.get("parts", ()))
        item_at = mform.get("item_at") or {}
        empty = mform.get("empty") or ()
        empty_i = 0
        item: dict | None = None
        parts: list = []
        item_role = role
        if role == "tool":
            item_role = "user"
        if message.name is not None or message.weight is not None:
            where = base[:-7] if base.endswith(".blocks") else base
            for field in ("name", "weight"):
                if getattr(message, field) is not None:
                    self.ledger.add("dropped", where, f"message {field} has no place in openai-responses input")
        blocks = message.blocks
        for bi, block in enumerate(blocks):
            while empty_i < len(empty) and empty[empty_i][0] == bi:
                self._close(item, parts, out)
                item, parts = None, []
                out.append(self._empty_item(empty[empty_i][1], item_role))
                empty_i += 1
            path = f"{base}[{offset + bi}]"
            if not isinstance(block, (Reasoning, Opaque)) and block.signature is not None:
                self._signature(path)
            is_part = isinstance(block, (Text, Media)) or (isinstance(block, Opaque) and bi in opaque_parts)
            if is_part:
                layout = None
                if isinstance(block, Opaque):
                    layout = item_at.get(str(bi))
                else:
                    bform = own(block.form)
                    if bform is not None:
                        layout = bform.get("item")
                    elif role == "assistant":
                        layout = {"s": 1}  # another format's text: one assistant message per block
                if item is None or layout is not None:
                    self._close(item, parts, out)
                    parts = []
                    item = self._open(layout, item_role, block)
                if role == "tool":
                    self.ledger.add("moved", path, "free content in a tool message has no place beside "
                                                   "function_call_output items; written in a user message")
                part = self.part(block, path, item_role)
                if part is not None:
                    parts.append((block, part))
                continue
            self._close(item, parts, out)
            item, parts = None, []
            match block:
                case Reasoning():
                    written = self.reasoning(block, path)
                    if written is not None:
                        out.append(written)
                case ToolCall():
                    out.append(self.call(block, path))
                case ToolResult():
                    out.append(self.result(block, path))
                case Opaque():
                    if block.provider == NAME:
                        out.append(dict(block.payload) if isinstance(block.payload, dict) else block.payload)
                    # another provider's item: ledgered by ledger_foreign_extras
                case Text() | Media():
                    raise AssertionError("content parts are handled above")
                case _:
                    assert_never(block)
        self._close(item, parts, out)
        while empty_i < len(empty):
            out.append(self._empty_item(empty[empty_i][1], item_role))
            empty_i += 1
        if not blocks and not empty and role != "tool":
            # Another format's message with empty content (Chat `"content": ""`): still a turn, kept.
            out.append(self._empty_item({"s": 1}, item_role))

    def _signature(self, path: str) -> None:
        # This format never writes one: a signature here is another provider's opaque state.
        self.ledger.add("dropped", path, "another provider's signature (opaque reasoning state) cannot be "
                                         "replayed in openai-responses")

    def _open(self, layout: dict | None, role: str, first) -> dict:
        item: dict = {}
        # Another format's content (no layout): a lone text becomes string content.
        as_string = True if layout is None else bool(layout.get("s"))
        layout = layout or {}
        if layout.get("t"):
            item["type"] = "message"
        item["role"] = role
        item.update(layout.get("kv") or ())
        extras = layout.get("x")
        if extras is None and not isinstance(first, Opaque):
            extras = own(first.extras)
        if extras:
            for key, value in extras.items():
                if key.startswith("message."):
                    item[key[8:]] = value
        item["\0s"] = as_string
        return item

    @staticmethod
    def _close(item: dict | None, parts: list, out: list) -> None:
        """Finish the open message item (if any) with its parts and append it to `out`."""
        if item is None:
            return
        as_string = item.pop("\0s")
        if not parts:
            return  # every part was dropped (and ledgered): no empty item
        if as_string and len(parts) == 1 and _plain_text(parts[0][0]):
            item["content"] = parts[0][0].text
        else:
            item["content"] = [p for _, p in parts]
        out.append(item)

    @staticmethod
    def _empty_item(layout: dict, role: str) -> dict:
        item: dict = {}
        if layout.get("t"):
            item["type"] = "message"
        item["role"] = role
        item.update(layout.get("kv") or ())
        for key, value in (layout.get("x") or {}).items():
            item[key[8:] if key.startswith("message.") else key] = value
        item["content"] = "" if layout.get("s") else []
        return item

    # --- content parts ------------------------------------------------------------------------

    def part(self, block, path: str, role: str) -> dict | None:
        match block:
            case Text():
                return self.text_part(block, role)
            case Media():
                return self.media_part(block, path, role)
            case Opaque():
                return dict(block.payload) if isinstance(block.payload, dict) else block.payload
            case _:
                raise AssertionError(f"not a content part: {type(block).__name__}")

    @staticmethod
    def text_part(block: Text, role: str) -> dict:
        mine = NAME in block.form
        form = own(block.form) or {}
        extras = own(block.extras) or {}
        if extras.get("refusal") is True:
            part = {"type": "refusal", "refusal": block.text}
        else:
            part_type = form.get("pt") or ("output_text" if role == "assistant" else "input_text")
            part = {"type": part_type, "text": block.text}
            for key in form.get("e", ()):
                part[key] = []
            if part_type == "output_text" and not mine:
                part["annotations"] = []  # required on output_text
        for key, value in extras.items():
            if key != "refusal" and not key.startswith("message."):
                part[key] = value
        return part

    def media_part(self, block: Media, path: str, role: str) -> dict | None:
        form = own(block.form)
        extras = own(block.extras) or {}
        mine = form is not None
        if role == "assistant" and not mine:
            self.ledger.add("dropped", path, f"an assistant message in openai-responses cannot hold {block.kind} content")
            return None
        kind = block.kind
        if kind == "audio" and mine and "fmt" in form:
            audio = {"data": block.data, "format": form["fmt"], **(extras.get("input_audio") or {})}
            part = {"type": "input_audio", "input_audio": audio}
        elif kind in ("audio", "video"):
            self.ledger.add("dropped", path, f"openai-responses input accepts no {kind} content")
            return None
        elif kind == "image":
            part = {"type": "input_image"}
            if block.data is not None:
                media_type = block.media_type
                if media_type is None:
                    media_type = "image/png"
                    self.ledger.add("synthesized", path, "image without a media type: written as image/png")
                part["image_url"] = f"data:{media_type};base64,{block.data}"
            elif block.url is not None:
                part["image_url"] = block.url
            if block.file_id is not None:
                part["file_id"] = block.file_id
            if not mine:
                part["detail"] = "auto"  # required in message content; "auto" is the API default
                if block.filename is not None:
                    self.ledger.add("dropped", path, f"image file name '{block.filename}' has no field in "
                                                     "openai-responses")
        elif block.text is not None and block.data is None and block.url is None and block.file_id is None:
            self.ledger.add("folded", path, "a plain-text document becomes an input_text part")
            return {"type": "input_text", "text": block.text}
        else:
            part = {"type": "input_file"}
            if block.data is not None:
                if mine and form.get("raw"):
                    part["file_data"] = block.data
                else:
                    media_type = block.media_type
                    if media_type is None:
                        media_type = "application/octet-stream"
                        self.ledger.add("synthesized", path, "file without a media type: written as "
                                                             "application/octet-stream")
                    part["file_data"] = f"data:{media_type};base64,{block.data}"
            if block.url is not None:
                part["file_url"] = block.url
            if block.file_id is not None:
                part["file_id"] = block.file_id
            if block.filename is not None:
                part["filename"] = block.filename
            elif block.data is not None and not mine:
                ext = {"application/pdf": ".pdf", "text/plain": ".txt"}.get(block.media_type or "", "")
                part["filename"] = f"file{ext}"
                self.ledger.add("synthesized", path, f"inline file without a name: filename 'file{ext}' written")
        if mine:
            part.update(form.get("kv") or ())
        for key, value in extras.items():
            if key != "input_audio" and not key.startswith("message."):
                part[key] = value
        return part

    # --- single-item blocks -------------------------------------------------------------------

    def reasoning(self, block: Reasoning, path: str) -> dict | None:
        if block.origin != NAME:
            self.ledger.add("dropped", path, f"reasoning from {block.origin or 'an unknown origin'} cannot be "
                                             "replayed in openai-responses (a reasoning item needs an OpenAI item "
                                             "id and encrypted_content)")
            return None
        parsed = own(block.form)
        form = parsed or {}
        extras = own(block.extras) or {}
        if block.item_id is None and parsed is None:  # built elsewhere: no id to replay it under
            self.ledger.add("dropped", path, "openai-responses reasoning without its item id cannot be replayed")
            return None
        item: dict = {"type": "reasoning"}
        item.update(form.get("kv") or ())
        if block.item_id is not None:
            item["id"] = block.item_id
        if "summary" in extras:
            item["summary"] = extras["summary"]
        elif not form.get("ns"):
            item["summary"] = [{"type": "summary_text", "text": s} for s in block.summary]
        if block.text is not None:
            split = form.get("split") or [len(block.text)]
            types = form.get("pt") or ["reasoning_text"] * len(split)
            if sum(split) != len(block.text) or len(types) != len(split):
                split, types = [len(block.text)], ["reasoning_text"]  # the text changed since parsing
            chunks, at = [], 0
            for n, part_type in zip(split, types):
                chunks.append({"type": part_type, "text": block.text[at:at + n]})
                at += n
            item["content"] = chunks
        if block.encrypted is not None:
            item["encrypted_content"] = block.encrypted
        for key, value in extras.items():
            if key != "summary":
                item[key] = value
        return item

    def _call_id(self, block: ToolCall, path: str) -> str:
        """The call_id for a call: its own when the API takes it and no earlier call has it."""
        out, replaced = outgoing_id(block.provider_id, block.id, None, MAX_CALL_ID)
        if replaced:
            self.ledger.add("synthesized", path, f"call id '{block.provider_id}' is longer than {MAX_CALL_ID} "
                                                 f"characters; canonical id '{block.id}' written")
        elif block.provider_id is None:
            self.ledger.add("synthesized", path, f"call had no id; canonical id '{block.id}' written")
        elif self.owner.get(out, block.id) != block.id and NAME not in block.form:
            # Reused by an earlier call (another format's ids); this format's own data is kept as it was.
            out = block.id
            self.ledger.add("synthesized", path, f"call id '{block.provider_id}' is used by an earlier call; "
                                                 f"canonical id '{block.id}' written")
        self.written[block.id] = out
        self.owner[out] = block.id
        return out

    def _result_call_id(self, block: ToolResult, path: str) -> str | None:
        """The call_id for a result: the one written for its call."""
        if block.call_id is None:
            return block.provider_id  # an orphan: write what it had
        out = self.written.get(block.call_id)
        if out is None:  # its call is not in this body (or comes later): same rule as for a call
            out = outgoing_id(block.provider_id, block.call_id, None, MAX_CALL_ID)[0]
        if out != block.provider_id:
            self.ledger.add("synthesized", path, f"result's call id {block.provider_id!r} replaced by '{out}', "
                                                 "the id written for its call")
        return out

    def call(self, block: ToolCall, path: str) -> dict:
        form = own(block.form) or {}
        extras = own(block.extras) or {}
        call_id = self._call_id(block, path)
        if block.kind == "custom":
            value = block.arguments
            if not isinstance(value, str):
                value = block.raw_arguments if block.raw_arguments is not None else jsonpolicy.dumps(value).decode()
                self.ledger.add("folded", path, "custom tool input must be a string: arguments written as JSON text")
            item = {"type": "custom_tool_call", "call_id": call_id, "name": block.name, "input": value}
        else:
            item = {"type": "function_call", "call_id": call_id, "name": block.name,
                    "arguments": self._arguments(block, path)}
        item.update(form.get("kv") or ())
        item.update(extras)
        return item

    def _arguments(self, block: ToolCall, path: str) -> str:
        raw = block.raw_arguments
        if raw is not None:
            if not block.arguments_valid:
                return raw  # the raw text is the truth, and this format carries text
            if parse_json_arguments(raw)[0] == block.arguments:
                return raw
        if block.arguments is UNSET:
            self.ledger.add("synthesized", path, "call without arguments: '{}' written")
            return "{}"
        return jsonpolicy.dumps(block.arguments).decode()

    def result(self, block: ToolResult, path: str) -> dict:
        form = own(block.form) or {}
        extras = own(block.extras) or {}
        item_type = "custom_tool_call_output" if block.kind == "custom" else "function_call_output"
        item: dict = {"type": item_type}
        call_id = self._result_call_id(block, path)
        if call_id is not None:
            item["call_id"] = call_id
        if "output" in extras:
            output: Any = extras["output"]
        else:
            output = self._output(block, path, form.get("s") == 1 if NAME in block.form else None)
        if block.is_error:
            self.ledger.add("folded", path, f"openai-responses has no error flag on tool output: "
                                            f"folded into the output as a '{ERROR_PREFIX.strip()}' prefix")
            if isinstance(output, str):
                output = ERROR_PREFIX + output
            else:
                output = [{"type": "input_text", "text": ERROR_PREFIX.strip()}, *output]
        item["output"] = output
        if block.name is not None and NAME in block.form:  # optional: written only where it was read
            item["name"] = block.name
        else:
            ledger_result_name(self.ledger, path, block, NAME)
        item.update(form.get("kv") or ())
        for key, value in extras.items():
            if key != "output":
                item[key] = value
        return item

    def _output(self, block: ToolResult, path: str, as_string: bool | None) -> Any:
        """`as_string`: this format wrote a string (True) or a part list (False); None: another format."""
        content = block.content
        if block.output is not UNSET:
            self.ledger.add("folded", path, "structured tool output written as JSON text")
            if not content:
                return jsonpolicy.dumps(block.output).decode()
            # Beside text or media, the JSON becomes the first text part: nothing is lost.
            content = (Text(jsonpolicy.dumps(block.output).decode()), *content)
        if not content:
            return [] if as_string is False else ""
        if len(content) == 1 and isinstance(content[0], Text) and (as_string or own(content[0].form) is None) \
                and not own(content[0].extras):
            return content[0].text
        parts = []
        for ci, inner in enumerate(content):
            if inner.signature is not None:
                self._signature(f"{path}.content[{ci}]")
            part = self.part(inner, f"{path}.content[{ci}]", "user")
            if part is not None:
                parts.append(part)
        return parts
