"""Canonical blocks for the log sources that no wire codec reads: arguments as a string or an
object, results paired to calls by the logged call id, media by modality."""

from __future__ import annotations

from typing import Any

import orjson

from .. import jsonpolicy
from ..conversation import Media, Text, ToolCall, ToolResult
from ..errors import ParseError
from ..ids import CallIds

_KINDS = {"image": "image", "audio": "audio", "video": "video", "document": "document"}


def json_attribute(attributes: dict, key: str, path: str) -> Any:
    """An attribute holding JSON: a string to decode, or a value the exporter kept structured."""
    value = attributes.get(key)
    if not isinstance(value, str):
        return value
    try:
        return jsonpolicy.loads(value)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"attribute '{key}' is not valid JSON: {exc}", path=f"{path}['{key}']",
                         code="invalid_attribute_json") from None


class Calls:
    """Canonical ids for one conversation's calls, and their results paired by the logged id."""

    def __init__(self) -> None:
        self.ids = CallIds()
        self.by_provider_id: dict[str, ToolCall] = {}

    def call(self, name: str, arguments: Any, provider_id: str | None, **fields: Any) -> ToolCall:
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):
            raw = arguments
            try:
                parsed = jsonpolicy.loads(raw) if raw.strip() else {}
            except orjson.JSONDecodeError:
                call = ToolCall(id=self.ids.new(name, raw_arguments=raw), name=name, raw_arguments=raw,
                                arguments_valid=False, provider_id=provider_id, **fields)
            else:
                call = ToolCall(id=self.ids.new(name, parsed), name=name, arguments=parsed, raw_arguments=raw,
                                provider_id=provider_id, **fields)
        else:
            call = ToolCall(id=self.ids.new(name, arguments), name=name, arguments=arguments,
                            provider_id=provider_id, **fields)
        if provider_id:
            self.by_provider_id[provider_id] = call
        return call

    def result(self, provider_id: str | None, response: Any, *, is_error: bool = False, name: str | None = None,
               **fields: Any) -> ToolResult:
        call = self.by_provider_id.get(provider_id) if provider_id else None
        if isinstance(response, str):
            body: dict[str, Any] = {"content": (Text(response),)}
        elif isinstance(response, list) and all(isinstance(p, (Text, Media)) for p in response):
            body = {"content": tuple(response)}
        else:
            body = {"output": response}
        return ToolResult(call_id=call.id if call else None, provider_id=provider_id,
                          name=name or (call.name if call else None), is_error=is_error,
                          matched_by="id" if call else None, **body, **fields)


def media(kind: Any, mime_type: Any, **where: Any) -> Media:
    """A media block; the kind from the logged modality, else from the MIME type."""
    mime = mime_type if isinstance(mime_type, str) else None
    name = kind if isinstance(kind, str) else (mime.split("/", 1)[0] if mime else "")
    return Media(kind=_KINDS.get(name, "file"), media_type=mime, **{k: v for k, v in where.items() if v is not None})
