"""One batch result and its request to a conversation (see the package docstring for the shapes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from msgspec.structs import replace

from ...conversation import Conversation
from ...errors import ParseError, SftprepError
from ..exchange import parse_exchange

SHAPES = ("openai-batch", "anthropic-batch")


@dataclass
class BatchResult:
    kind: str  # one of SHAPES
    custom_id: str | None
    result: Any  # the result line as logged
    request: Any  # its request line, None when no requests file holds the id
    request_source: str | None  # FILE:LINE of the request
    request_files: list[str] = field(default_factory=list)
    duplicates: list[str] | None = None  # other request lines with the same custom_id


def parse(value: BatchResult, *, fmt: str | None = None, strict: bool = False) -> Conversation:
    if value.custom_id is None:
        raise ParseError("a batch result needs a string 'custom_id'", path="$.custom_id", code="invalid_record")
    if value.request is None:
        files = ", ".join(value.request_files) or "none beside the results file"
        raise ParseError(f"no request with custom_id '{value.custom_id}' (requests files: {files})",
                         path="$.custom_id", code="batch_request_missing")
    if value.duplicates:
        raise ParseError(f"custom_id '{value.custom_id}' names several requests ({', '.join(value.duplicates)})",
                         path="$.custom_id", code="batch_request_ambiguous")
    exchange = _openai(value) if value.kind == "openai-batch" else _anthropic(value)
    try:
        conv = parse_exchange(exchange, fmt=fmt, strict=strict)
    except SftprepError as exc:
        # Paths into the joined exchange, made paths into the line they came from.
        if exc.path.startswith("$.request.body"):
            body = ".body" if value.kind == "openai-batch" else ".params"
            exc.path = "$" + body + exc.path[len("$.request.body"):]
            exc.message = f"in request {value.request_source}: {exc.message}"
            exc.args = (exc.message,)
        elif exc.path.startswith("$.response.body"):
            exc.path = "$" + _result_body(value.kind) + exc.path[len("$.response.body"):]
        raise
    meta = replace(conv.meta, shape=value.kind,
                   notes=conv.meta.notes + (f"request {value.request_source}, joined on custom_id '{value.custom_id}'",))
    extras = {**conv.extras, value.kind: _ids(value)}
    return replace(conv, meta=meta, extras=extras)


def _result_body(kind: str) -> str:
    return ".response.body" if kind == "openai-batch" else ".result.message"


def _ids(value: BatchResult) -> dict:
    out = {"custom_id": value.custom_id, "request_source": value.request_source}
    result = value.result
    if value.kind == "openai-batch":
        out["batch_request_id"] = result.get("id")
        response = result.get("response") or {}
        out["request_id"] = response.get("request_id") if isinstance(response, dict) else None
    return {k: v for k, v in out.items() if v is not None}


def _openai(value: BatchResult) -> dict:
    result, request = value.result, value.request
    if not isinstance(request, dict) or not isinstance(request.get("body"), dict):
        raise ParseError("an OpenAI batch request needs 'body' (and 'url')", path=f"{value.request_source}",
                         code="invalid_record")
    error = result.get("error")
    response = result.get("response")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
        raise ParseError(f"the batch request failed ({code or 'error'}): {str(message)[:200]}", path="$.error",
                         code="batch_expired" if code == "batch_expired" else "batch_errored")
    if not isinstance(response, dict):
        raise ParseError("an OpenAI batch result needs 'response' or 'error'", path="$.response",
                         code="invalid_record")
    status = response.get("status_code")
    if isinstance(status, int) and status >= 400:
        body = response.get("body")
        detail = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
        raise ParseError(f"the batch request failed with HTTP {status}" + (f": {detail[:200]}" if detail else ""),
                         path="$.response.status_code", code="batch_errored")
    return {"request": {"method": request.get("method", "POST"), "url": request.get("url"), "body": request["body"]},
            "response": {"status": status, "body": response.get("body")}}


def _anthropic(value: BatchResult) -> dict:
    result, request = value.result.get("result"), value.request
    if not isinstance(request, dict) or not isinstance(request.get("params"), dict):
        raise ParseError("an Anthropic batch request needs 'params'", path=f"{value.request_source}",
                         code="invalid_record")
    kind = result.get("type") if isinstance(result, dict) else None
    if kind == "errored":
        error = result.get("error") or {}
        inner = error.get("error", error) if isinstance(error, dict) else {}
        inner = inner if isinstance(inner, dict) else {}
        raise ParseError(f"the batch request errored ({inner.get('type', 'error')}): {str(inner.get('message'))[:200]}",
                         path="$.result.error", code="batch_errored")
    if kind in ("canceled", "expired"):
        raise ParseError(f"the batch request {'expired' if kind == 'expired' else 'was canceled'} before it ran: "
                         "no answer to learn from",
                         path="$.result.type", code=f"batch_{kind}")
    if kind != "succeeded" or not isinstance(result.get("message"), dict):
        raise ParseError(f"unknown batch result type {kind!r} (succeeded, errored, canceled, expired)",
                         path="$.result.type", code="invalid_record")
    return {"request": {"method": "POST", "url": "/v1/messages", "body": request["params"]},
            "response": {"status": 200, "body": result["message"]}}
