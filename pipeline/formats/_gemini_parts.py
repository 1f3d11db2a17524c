"""Gemini parts <-> canonical blocks: one part at a time, in both directions.

A part holds exactly one data field (text, inlineData, functionCall, ...) plus metadata that may sit
on any of them (thought, thoughtSignature, videoMetadata...). The API accepts camelCase and snake_case
keys; the spelling read is kept in `form["gemini"]["snake"]` (the camelCase names written in snake_case)
so a same-format round trip is exact.
"""

from __future__ import annotations

from typing import Any, assert_never

from msgspec import UNSET

from ..conversation import Block, Media, Opaque, Reasoning, Text, ToolCall, ToolResult
from ..errors import ParseError
from ..ids import CallIds
from ..ledger import Ledger
from .base import CallIndex, _type_name

NAME = "gemini"

# camelCase -> snake_case for every multi-word key the codec reads or writes.
SNAKE = {
    "thoughtSignature": "thought_signature", "inlineData": "inline_data", "fileData": "file_data",
    "functionCall": "function_call", "functionResponse": "function_response",
    "executableCode": "executable_code", "codeExecutionResult": "code_execution_result",
    "toolCall": "tool_call", "toolResponse": "tool_response", "mimeType": "mime_type", "fileUri": "file_uri",
    "systemInstruction": "system_instruction", "functionDeclarations": "function_declarations",
    "parametersJsonSchema": "parameters_json_schema", "finishReason": "finish_reason",
    "usageMetadata": "usage_metadata", "modelVersion": "model_version", "responseId": "response_id",
    "createTime": "create_time", "promptFeedback": "prompt_feedback",
}
CAMEL = {snake: camel for camel, snake in SNAKE.items()}

# Server-side tool traffic: kept verbatim as Opaque, with what it is for reports.
_HOSTED = {"executableCode": "call", "codeExecutionResult": "result", "toolCall": "call", "toolResponse": "result"}
_DATA = frozenset({"text", "inlineData", "fileData", "functionCall", "functionResponse", *_HOSTED})
# Part metadata that does not make a part a different kind of block.
_PART_META = frozenset({"videoMetadata", "video_metadata", "partMetadata", "part_metadata", "mediaResolution",
                        "media_resolution"})
# Prefixes of extras keys that belong inside the data object rather than on the part.
_INNER = ("functionCall.", "functionResponse.", "inlineData.", "fileData.")
# Mime types a functionResponse may hold in its `parts` (multimodal function responses).
_RESPONSE_MEDIA = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"})
_ABSENT = object()


def k(name: str, snake: Any) -> str:
    """The key to write: snake_case when the source spelled this name that way."""
    return SNAKE[name] if snake and name in snake else name


def media_kind(mime: str | None) -> str:
    if not mime:
        return "file"
    major = mime.split("/", 1)[0]
    if major in ("image", "audio", "video"):
        return major
    if major == "text" or mime == "application/pdf":
        return "document"
    return "file"


def _bad(value: Any, what: str, path: str) -> ParseError:
    return ParseError(f"{what}, got {_type_name(value)}", path=path)


class PartReader:
    """Reads the parts of one conversation, front to back: issues call ids and pairs results."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.ids = CallIds()
        self.index = CallIndex()
        self.by_order = 0  # results paired by name and order
        self.notes: list[str] = []

    def part(self, part: Any, path: str) -> Block:
        if not isinstance(part, dict):
            raise _bad(part, "a part must be an object", path)
        data_key = data = None
        thought: Any = _ABSENT
        sig = None
        snake: list[str] | None = None
        extras: dict[str, Any] | None = None
        for key, value in part.items():
            name = CAMEL.get(key)
            if name is None:
                name = key
            else:
                snake = [name] if snake is None else [*snake, name]
            if name in _DATA:
                if data_key is not None:
                    raise ParseError(f"a part holds one kind of data, found '{data_key}' and '{name}'", path=path)
                data_key, data = name, value
            elif name == "thought":
                if not isinstance(value, bool):
                    raise _bad(value, "'thought' must be a boolean", f"{path}.{key}")
                thought = value
            elif name == "thoughtSignature":
                if not isinstance(value, str):
                    raise _bad(value, "'thoughtSignature' must be a string", f"{path}.{key}")
                sig = value
            else:
                if extras is None:
                    extras = {}
                extras[key] = value
        form: dict[str, Any] = {"snake": snake} if snake else {}
        match data_key:
            case "text":
                if not isinstance(data, str):
                    raise _bad(data, "'text' must be a string", f"{path}.text")
                if thought is True:
                    return Reasoning(text=data, signature=sig, origin=NAME, extras=_slots(extras), form=_slots(form))
                if thought is False:
                    form["thought"] = False
                return Text(data, signature=sig, extras=_slots(extras), form=_slots(form))
            case None:
                unknown = [key for key in (extras or ()) if key not in _PART_META]
                if unknown or (thought is _ABSENT and sig is None):
                    if not part:
                        raise ParseError("a part must hold data (text, inlineData, functionCall, ...)", path=path)
                    return self._unknown(unknown[0] if unknown else next(iter(part)), part, path)
                # A bare signature (or an empty thought): reasoning state without visible text.
                if thought is _ABSENT:
                    form["no_thought"] = True
                elif thought is False:
                    form["thought"] = False
                return Reasoning(signature=sig, origin=NAME, extras=_slots(extras), form=_slots(form))
        if thought is not _ABSENT:
            form["thought"] = thought
        match data_key:
            case "inlineData" | "fileData":
                return self._media(data_key, data, sig, extras, form, f"{path}.{k(data_key, snake)}")
            case "functionCall":
                return self._call(data, sig, extras, form, f"{path}.{k(data_key, snake)}")
            case "functionResponse":
                return self._result(data, sig, extras, form, f"{path}.{k(data_key, snake)}")
            case _:
                hint = _HOSTED[data_key]
                return Opaque(provider=NAME, item_type=data_key, payload=part, role_hint=hint,
                              name=_hosted_name(data_key, data))

    def _unknown(self, item_type: str, part: dict, path: str) -> Opaque:
        if self.strict:
            raise ParseError(f"unknown part type '{item_type}'", path=path, code="unknown_block")
        return Opaque(provider=NAME, item_type=item_type, payload=part)

    def _media(self, data_key: str, data: Any, sig: str | None, extras: dict | None, form: dict,
               path: str) -> Media:
        if not isinstance(data, dict):
            raise _bad(data, f"'{data_key}' must be an object", path)
        mime = payload = None
        snake = form.get("snake")
        for key, value in data.items():
            name = CAMEL.get(key, key)
            if name == "mimeType":
                if not isinstance(value, str):
                    raise _bad(value, "'mimeType' must be a string", f"{path}.{key}")
                mime = value
            elif (name == "data" and data_key == "inlineData") or (name == "fileUri" and data_key == "fileData"):
                if not isinstance(value, str):
                    raise _bad(value, f"'{name}' must be a string", f"{path}.{key}")
                payload = value
            else:
                if extras is None:
                    extras = {}
                extras[f"{data_key}.{key}"] = value
                continue
            if name != key:
                snake = [name] if snake is None else [*snake, name]
        if payload is None:
            raise ParseError(f"missing required field '{'data' if data_key == 'inlineData' else 'fileUri'}'", path=path)
        if snake:
            form["snake"] = snake
        if data_key == "inlineData":
            if mime is None:
                raise ParseError("missing required field 'mimeType'", path=path)
            return Media(kind=media_kind(mime), media_type=mime, data=payload, signature=sig,
                         extras=_slots(extras), form=_slots(form))
        return Media(kind=media_kind(mime), media_type=mime, url=payload, signature=sig,
                     extras=_slots(extras), form=_slots(form))

    def _call(self, data: Any, sig: str | None, extras: dict | None, form: dict, path: str) -> ToolCall:
        name, pid, fields, extras = _function_fields("functionCall", data, {"args": (dict, "an object")}, extras,
                                                     path)
        args: Any = fields.get("args", _ABSENT)
        if args is _ABSENT:
            args = {}
            form["no_args"] = True
        call_id = self.ids.new(name, args)
        self.index.add(call_id, name, pid)
        return ToolCall(id=call_id, name=name, arguments=args, provider_id=pid, signature=sig,
                        extras=_slots(extras), form=_slots(form))

    def _result(self, data: Any, sig: str | None, extras: dict | None, form: dict, path: str) -> ToolResult:
        name, pid, fields, extras = _function_fields(
            "functionResponse", data, {"response": (dict, "an object"), "parts": (list, "an array")}, extras, path)
        response: Any = fields.get("response", _ABSENT)
        parts = fields.get("parts")
        if response is _ABSENT:
            raise ParseError("missing required field 'response'", path=path)
        content: tuple = ()
        if parts is not None:
            content, raw = self._response_parts(parts, f"{path}.parts")
            if raw:
                extras = {**(extras or {}), "functionResponse.parts": parts}
            elif not parts:
                form["empty_parts"] = True
        if pid is not None:
            call_id = self.index.by_id(pid)
            matched = "id" if call_id is not None else None
        else:
            call_id, ambiguous = self.index.by_name(name)
            matched = "name_order" if call_id is not None else None
            if call_id is not None:
                self.by_order += 1
            if ambiguous:
                if self.strict:
                    raise ParseError(f"several unanswered '{name}' calls without ids: only their order pairs this "
                                     "result", path=path, code="ambiguous_call_match")
                self.notes.append(f"{path}: several unanswered '{name}' calls without ids; paired by order")
        # Gemini's convention: an 'error' key (and no 'output') reports a failed call.
        is_error = "error" in response and "output" not in response
        return ToolResult(call_id=call_id, provider_id=pid, name=name, content=content, output=response,
                          is_error=is_error, matched_by=matched, signature=sig, extras=_slots(extras),
                          form=_slots(form))

    def _response_parts(self, parts: list, path: str) -> tuple[tuple, bool]:
        """Media of a multimodal function response; (no content, True) when a part is something else,
        so the parts are kept verbatim instead."""
        out = []
        for i, item in enumerate(parts):
            # Only media parse here: a call or result inside would be registered for pairing.
            block = None
            if isinstance(item, dict) and any(CAMEL.get(key, key) in ("inlineData", "fileData") for key in item):
                block = self.part(item, f"{path}[{i}]")
            if not isinstance(block, Media):
                if self.strict:
                    raise ParseError("a function response part must hold inlineData or fileData",
                                     path=f"{path}[{i}]", code="unknown_block")
                return (), True
            out.append(block)
        return tuple(out), False


def _function_fields(data_key: str, data: Any, typed: dict[str, tuple[type, str]], extras: dict | None,
                     path: str) -> tuple[str, str | None, dict[str, Any], dict | None]:
    """The fields of a functionCall or functionResponse object, read in their order: the required string
    'name', the optional string 'id', the fields in `typed` (field -> (type, what it must be)), and any
    other key kept in extras as `data_key.key`. Returns (name, id, the typed fields present, extras)."""
    if not isinstance(data, dict):
        raise _bad(data, f"'{data_key}' must be an object", path)
    name = pid = None
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if key == "name":
            name = value
        elif key == "id":
            if not isinstance(value, str):
                raise _bad(value, "'id' must be a string", f"{path}.id")
            pid = value
        elif key in typed:
            kind, what = typed[key]
            if not isinstance(value, kind):
                raise _bad(value, f"'{key}' must be {what}", f"{path}.{key}")
            fields[key] = value
        else:
            if extras is None:
                extras = {}
            extras[f"{data_key}.{key}"] = value
    if not isinstance(name, str):
        if name is None:
            raise ParseError("missing required field 'name'", path=path)
        raise _bad(name, "'name' must be a string", f"{path}.name")
    return name, pid, fields, extras


def _hosted_name(data_key: str, data: Any) -> str | None:
    if data_key in ("executableCode", "codeExecutionResult"):
        return "code_execution"
    if isinstance(data, dict):
        tool_type = data.get("toolType", data.get("tool_type"))
        if isinstance(tool_type, str):
            return tool_type
    return None


def _slots(values: dict | None) -> dict:
    return {NAME: values} if values else {}


# --- writing ---------------------------------------------------------------------------------------

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
        return part

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
        return part

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
            fc["args"] = {"input": args}
            self.ledger.add("folded", path, f"{block.kind} call input is not an object: wrapped as args.input")
        elif args or not form.get("no_args"):
            fc["args"] = args
        part: dict[str, Any] = {k("functionCall", snake): fc}
        if block.signature is not None:
            part[k("thoughtSignature", snake)] = block.signature
        if "thought" in form:
            part["thought"] = form["thought"]
        _put_extras(part, block.extras.get(NAME))
        return part

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
        return part

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
            parts.append(part)
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
