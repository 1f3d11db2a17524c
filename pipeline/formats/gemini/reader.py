"""Gemini parts -> canonical blocks, one part at a time: a part holds exactly one data field (text,
inlineData, functionCall, ...) plus metadata that may sit on any of them (thought, thoughtSignature...)."""

from __future__ import annotations

from typing import Any

from ...conversation import Block, Media, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...errors import ParseError
from ...ids import CallIds
from ..base import CallIndex
from .parts import CAMEL, NAME, _bad, k, unset

# Server-side tool traffic: kept verbatim as Opaque, with what it is for reports.
_HOSTED = {"executableCode": "call", "codeExecutionResult": "result", "toolCall": "call", "toolResponse": "result"}
_DATA = frozenset({"text", "inlineData", "fileData", "functionCall", "functionResponse", *_HOSTED})
# Part metadata that does not make a part a different kind of block.
_PART_META = frozenset({"videoMetadata", "video_metadata", "partMetadata", "part_metadata", "mediaResolution",
                        "media_resolution"})
_ABSENT = object()


def media_kind(mime: str | None) -> str:
    if not mime:
        return "file"
    major = mime.split("/", 1)[0]
    if major in ("image", "audio", "video"):
        return major
    if major == "text" or mime == "application/pdf":
        return "document"
    return "file"


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
        whole = part
        part, nulls = unset(part)
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
        if nulls:
            form["nulls"] = nulls
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
                    return self._unknown(unknown[0] if unknown else next(iter(part)), whole, path)
                # A bare signature (or an empty thought): reasoning state without visible text.
                if thought is _ABSENT:
                    form["no_thought"] = True
                elif thought is False:
                    form["thought"] = False
                return Reasoning(signature=sig, origin=NAME, extras=_slots(extras), form=_slots(form))
        if thought is not _ABSENT:
            form["thought"] = thought
        if isinstance(data, dict) and data_key in ("inlineData", "fileData", "functionCall", "functionResponse"):
            data, inner = unset(data)
            if inner:
                form["nulls"] = [*nulls, *(f"{k(data_key, snake)}.{key}" for key in inner)]
        match data_key:
            case "inlineData" | "fileData":
                return self._media(data_key, data, sig, extras, form, f"{path}.{k(data_key, snake)}")
            case "functionCall":
                return self._call(data, sig, extras, form, f"{path}.{k(data_key, snake)}")
            case "functionResponse":
                return self._result(data, sig, extras, form, f"{path}.{k(data_key, snake)}")
            case _:
                hint = _HOSTED[data_key]
                return Opaque(provider=NAME, item_type=data_key, payload=whole, role_hint=hint,
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
