"""Canonical blocks -> Gemini parts, one block at a time, with a ledger entry for whatever Gemini cannot
carry."""

from __future__ import annotations

from typing import Any, assert_never

from msgspec import UNSET

from ...conversation import CUSTOM_INPUT, Block, Media, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...ledger import Ledger
from .parts import NAME, SNAKE, k, put_nulls

# Prefixes of extras keys that belong inside the data object rather than on the part.
_INNER = ("functionCall.", "functionResponse.", "inlineData.", "fileData.")
# Mime types a functionResponse may hold in its `parts` (multimodal function responses).
_RESPONSE_MEDIA = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"})


class PartWriter:
    """Writes canonical blocks as Gemini parts, ledgering what Gemini cannot carry.

    `own` is True when the conversation was read from Gemini: calls that had no id then stay without
    one. From other sources a call without a provider id gets its canonical id (Gemini accepts ids),
    so results pair by id instead of by name and order."""

    def __init__(self, ledger: Ledger, own: bool) -> None:
        self.ledger = ledger
        self.own = own
        self.emitted: dict[str, str | None] = {}  # canonical call id -> id written on the functionCall
        self.names: dict[str, str] = {}  # canonical call id -> name

    def block(self, block: Block, path: str, parts: list, moved: list) -> None:
        """Append the parts for `block` to `parts`; media that must follow in a user content to `moved`."""
        match block:
            case Text():
                if not block.text and not self.own:
                    self.ledger.add("dropped", path, "Gemini refuses an empty text part")
                    return
                parts.append(self.text(block))
            case Media():
                part = self.media(block, path)
                if part is not None:
                    parts.append(part)
            case ToolCall():
                parts.append(self.call(block, path))
            case ToolResult():
                parts.append(self.result(block, path, moved))
            case Reasoning():
                self.reasoning(block, path, parts)
            case Opaque():
                if block.provider == NAME:
                    parts.append(block.payload)
                # another provider's item: ledgered by ledger_foreign_extras
            case _:
                assert_never(block)

    def text(self, block: Text) -> dict:
        form = block.form.get(NAME)
        part: dict[str, Any] = {"text": block.text}
        snake = form.get("snake") if form else None
        if block.signature is not None:
            part[k("thoughtSignature", snake)] = block.signature
        if form and "thought" in form:
            part["thought"] = form["thought"]
        _put_extras(part, block.extras.get(NAME))
        return put_nulls(part, form and form.get("nulls"))

    def media(self, block: Media, path: str, inner: bool = False) -> dict | None:
        """An inlineData or fileData part; None (with a ledger entry) when Gemini has no place for it."""
        form = block.form.get(NAME) or {}
        snake = form.get("snake")
        if block.data is not None:
            key = k("inlineData", snake)
            mime = block.media_type
            if mime is None:
                mime = "application/octet-stream"
                self.ledger.add("synthesized", path, "inline data without a media type: Gemini requires "
                                "mimeType, wrote application/octet-stream")
            data = {k("mimeType", snake): mime, "data": block.data}
        elif block.url is not None:
            key = k("fileData", snake)
            data = {k("fileUri", snake): block.url}
            if block.media_type is not None:
                data[k("mimeType", snake)] = block.media_type
        elif block.text is not None and not inner:
            self.ledger.add("folded", path, "a text document became a text part: Gemini has no text documents")
            return {"text": block.text}
        else:
            what = f"file id '{block.file_id}'" if block.file_id is not None else "media without data or URL"
            self.ledger.add("dropped", path, f"{what}: Gemini takes inline data or a file URI only")
            return None
        if block.file_id is not None and (block.data is not None or block.url is not None):
            self.ledger.add("dropped", path, f"file id '{block.file_id}' beside the data: Gemini has no file ids")
        if block.filename is not None:
            self.ledger.add("dropped", path, "Gemini media parts have no file name")
        part: dict[str, Any] = {key: data}
        if block.signature is not None:
            part[k("thoughtSignature", snake)] = block.signature
        if "thought" in form:
            part["thought"] = form["thought"]
        _put_extras(part, block.extras.get(NAME))
        return put_nulls(part, form.get("nulls"))

    def call(self, block: ToolCall, path: str) -> dict:
        form = block.form.get(NAME) or {}
        snake = form.get("snake")
        fc: dict[str, Any] = {"name": block.name}
        pid = block.provider_id
        if pid is None and not self.own:
            pid = block.id
            self.ledger.add("synthesized", path, "call had no provider id: wrote its canonical id so the result "
                            "pairs by id")
        if pid is not None:
            fc["id"] = pid
        self.emitted[block.id] = pid
        self.names[block.id] = block.name
        args = block.arguments
        if not block.arguments_valid or args is UNSET:
            self.ledger.add("dropped", path, f"call arguments are not valid JSON ({block.raw_arguments!r}): "
                            "Gemini args must be an object, wrote none")
        elif block.kind != "function" or not isinstance(args, dict):
            fc["args"] = {CUSTOM_INPUT: args}
            self.ledger.add("folded", path, f"{block.kind} call input is not an object: wrapped as args.{CUSTOM_INPUT}")
        elif args or not form.get("no_args"):
            fc["args"] = args
        part: dict[str, Any] = {k("functionCall", snake): fc}
        if block.signature is not None:
            part[k("thoughtSignature", snake)] = block.signature
        if "thought" in form:
            part["thought"] = form["thought"]
        _put_extras(part, block.extras.get(NAME))
        return put_nulls(part, form.get("nulls"))

    def result(self, block: ToolResult, path: str, moved: list) -> dict:
        form = block.form.get(NAME) or {}
        snake = form.get("snake")
        name = block.name
        if name is None:
            name = self.names.get(block.call_id) if block.call_id is not None else None
            if name is None:
                name = "unknown"
                self.ledger.add("synthesized", path, "result of an unknown call has no tool name: Gemini requires "
                                "one, wrote 'unknown'")
        fr: dict[str, Any] = {"name": name}
        rid = block.provider_id
        if rid is None and not self.own and block.call_id is not None:
            rid = self.emitted.get(block.call_id)
            if rid is not None:
                self.ledger.add("synthesized", path, "result had no provider id: wrote its call's id")
        if rid is not None:
            fr["id"] = rid
        fr["response"] = self._response(block, path)
        media_parts = []
        for ci, item in enumerate(block.content):
            if not isinstance(item, Media) or (item.data is None and item.url is None and item.text is not None):
                continue  # text (and text documents) went into the response object
            cpath = f"{path}.content[{ci}]"
            if item.form.get(NAME) is not None or item.media_type in _RESPONSE_MEDIA:
                part = self.media(item, cpath, inner=True)
                if part is not None:
                    media_parts.append(part)
            else:
                part = self.media(item, cpath)
                if part is not None:
                    moved.append(part)
                    self.ledger.add("moved", cpath, f"a function response cannot hold {item.media_type or 'this media'}"
                                    ": moved to a following user content")
        if media_parts or form.get("empty_parts"):
            fr["parts"] = media_parts
        part: dict[str, Any] = {k("functionResponse", snake): fr}
        if block.signature is not None:
            part[k("thoughtSignature", snake)] = block.signature
        if "thought" in form:
            part["thought"] = form["thought"]
        _put_extras(part, block.extras.get(NAME))
        return put_nulls(part, form.get("nulls"))

    def _response(self, block: ToolResult, path: str) -> dict:
        """The `response` object: the structured output as is, else the text wrapped under 'output'
        (or 'error' for a failed call, Gemini's convention)."""
        key = "error" if block.is_error else "output"
        texts = [item.text for item in block.content
                 if isinstance(item, Text) or (isinstance(item, Media) and item.text is not None
                                               and item.data is None and item.url is None)]
        output = block.output
        if output is not UNSET:
            if texts:
                self.ledger.add("dropped", path, "result text beside a structured output: Gemini's response "
                                "holds one object")
            if isinstance(output, dict):
                reads_as_error = "error" in output and "output" not in output
                if reads_as_error == block.is_error:
                    return output
                self.ledger.add("folded", path, f"structured output wrapped under response.{key} so Gemini "
                                f"reads the {'failure' if block.is_error else 'success'} right")
                return {key: output}
            self.ledger.add("folded", path, f"structured output is not an object: wrapped as response.{key}")
            return {key: output}
        if block.is_error:
            self.ledger.add("folded", path, "is_error folded into the response: text under response.error")
        elif texts:
            self.ledger.add("folded", path, "result text wrapped as response.output: Gemini's response is an object")
        if not texts:
            return {"error": ""} if block.is_error else {}
        return {key: texts[0] if len(texts) == 1 else texts}

    def reasoning(self, block: Reasoning, path: str, parts: list) -> None:
        form = block.form.get(NAME) or {}
        if block.origin == NAME:
            part: dict[str, Any] = {}
            if block.text is not None:
                part["text"] = block.text
            if not form.get("no_thought"):
                part["thought"] = form.get("thought", True)
            if block.signature is not None:
                part[k("thoughtSignature", form.get("snake"))] = block.signature
            if block.summary or block.redacted is not None or block.encrypted is not None:
                self.ledger.add("dropped", path, "reasoning summary or other providers' state on gemini reasoning")
            _put_extras(part, block.extras.get(NAME))
            parts.append(put_nulls(part, form.get("nulls")))
            return
        origin = block.origin or "an unknown provider"
        if block.signature is not None or block.redacted is not None or block.encrypted is not None:
            self.ledger.add("dropped", path, f"opaque reasoning state of {origin} is only valid there")
        if block.text is not None:
            parts.append({"text": block.text, "thought": True})
            if block.summary:
                self.ledger.add("dropped", path, "reasoning summary beside the reasoning text")
        elif block.summary:
            parts.extend({"text": s, "thought": True} for s in block.summary)
            self.ledger.add("folded", path, "reasoning summary sent as thought text")
        elif block.signature is None and block.redacted is None and block.encrypted is None:
            self.ledger.add("dropped", path, "empty reasoning block")


def _put_extras(part: dict, extras: dict | None) -> None:
    """Write back the part's unknown keys; `functionCall.x` style keys go inside the data object."""
    if not extras:
        return
    for key, value in extras.items():
        if key.startswith(_INNER):
            outer, inner = key.split(".", 1)
            target = part.get(outer, part.get(SNAKE[outer]))
            if isinstance(target, dict):
                if inner == "parts" and outer == "functionResponse":
                    target["parts"] = value
                else:
                    target[inner] = value
                continue
        part[key] = value
