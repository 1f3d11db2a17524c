"""Logged exchanges: a request and the response it got, as a proxy or an HTTP recorder saw them.

The conversation is the request's history plus the response's assistant turn. Each side is a body
or an HTTP envelope; a streamed response is reassembled first. In an HTTP recording, a background-mode
Responses call (answered `queued`) takes the answer a later retrieval of it found (`with_retrieved`).
"""

from __future__ import annotations

import re
from typing import Any

from msgspec.structs import replace

from .. import formats, jsonpolicy
from ..conversation import Conversation
from ..errors import ParseError, SftprepError
from ..ids import renumber

# Endpoint paths name the format more reliably than body shapes do.
_ENDPOINTS = (
    (re.compile(r"/v1/messages(\?|$)"), "anthropic"),
    (re.compile(r"/chat/completions(\?|$)"), "openai-chat"),
    # Azure OpenAI also serves it as /openai/responses?api-version=... (and Foundry under .../openai/responses).
    (re.compile(r"/(v1|openai)/responses(\?|$)"), "openai-responses"),
    (re.compile(r":(stream)?[gG]enerateContent(\?|$)"), "gemini"),
)
_LABELS = {"anthropic": "anthropic", "openai_chat": "openai-chat", "openai_responses": "openai-responses",
           "google": "gemini", "gemini": "gemini"}


def is_exchange(value: Any) -> bool:
    return isinstance(value, dict) and "request" in value and "response" in value


def is_recording(value: Any) -> bool:
    """An HTTP recording file: `{"interactions": [exchange, ...]}`."""
    return isinstance(value, dict) and isinstance(value.get("interactions"), list)


_RETRIEVE = re.compile(r"/(?:v1|openai)/responses/([^/?]+)(\?|$)")
_FINISHED = frozenset({"completed", "incomplete", "failed"})


def with_retrieved(interactions: list) -> list:
    """A recording's exchanges, background-mode Responses calls joined with their answer: a POST
    /v1/responses answered `queued` or `in_progress` gets, as its response, the last later GET
    /v1/responses/{id} of the same recording that found the response finished."""
    finished: dict[str, tuple[int, Any]] = {}
    for i, interaction in enumerate(interactions):
        uri = _request_uri(interaction, "GET")
        found = _RETRIEVE.search(uri.split("?", 1)[0]) if uri else None
        body = _response_body(interaction) if found else None
        if found and isinstance(body, dict) and body.get("status") in _FINISHED:
            finished[found.group(1)] = (i, interaction["response"])
    if not finished:
        return interactions
    out = list(interactions)
    for i, interaction in enumerate(interactions):
        if format_from_uri(_request_uri(interaction, "POST")) != "openai-responses":
            continue
        body = _response_body(interaction)
        if isinstance(body, dict) and body.get("status") in ("queued", "in_progress"):
            hit = finished.get(body.get("id"))  # type: ignore[arg-type]
            if hit is not None and hit[0] > i:
                out[i] = {**interaction, "response": hit[1], "retrieved_from": f"interactions[{hit[0]}]"}
    return out


def _request_uri(interaction: Any, method: str) -> str | None:
    request = interaction.get("request") if is_exchange(interaction) else None
    if not isinstance(request, dict) or request.get("method") != method:
        return None
    uri = request.get("uri") or request.get("url")
    return uri if isinstance(uri, str) else None


def _response_body(interaction: dict) -> Any:
    try:
        return _unwrap(interaction["response"], "$.response")[0]
    except ParseError:
        return None


# A Responses object in these states holds no finished turn: background mode answers `queued` and the output
# is fetched later; a failed or cancelled response has an error, not an answer. The codec reads them (their
# round trip is exact); as training records they are rejected.
_UNFINISHED = frozenset({"queued", "in_progress", "cancelled"})


def check_finished(conv: Conversation, body: Any) -> None:
    """Refuse a Responses response object (`body`, read as `conv`) that is no finished generation."""
    if conv.meta.provider != "openai-responses" or not isinstance(body, dict) or body.get("object") != "response":
        return
    status = body.get("status")
    if status == "failed":
        error = body.get("error")
        detail = error.get("message") if isinstance(error, dict) else None
        raise ParseError("the response failed" + (f": {str(detail)[:200]}" if detail else ""), path="$.status",
                         code="failed_generation")
    if status in _UNFINISHED:
        raise ParseError(f"the response is {status}, not finished: no turn to learn from (a background "
                         "response's output is fetched later, with GET /v1/responses/{id})", path="$.status",
                         code="unfinished_response")


def format_from_uri(uri: str | None) -> str | None:
    if not uri:
        return None
    path = uri.split("?", 1)[0]
    for pattern, fmt in _ENDPOINTS:
        if pattern.search(path):
            return fmt
    return None


def parse_exchange(value: dict, *, fmt: str | None = None, strict: bool = False) -> Conversation:
    request, response = value["request"], value["response"]
    req_body, uri = _unwrap(request, "$.request")
    endpoint_fmt = format_from_uri(uri)
    if uri and endpoint_fmt is None:
        method = request.get("method", "") if isinstance(request, dict) else ""
        raise ParseError(f"{method} {uri.split('?', 1)[0]} is not a generation request (uploads, token "
                         "counts, compaction and stored objects hold no conversation turn)", path="$.request.uri",
                         code="not_a_model_call")
    fmt = fmt or endpoint_fmt or _LABELS.get(value.get("provider") or "")
    status = response.get("status") if isinstance(response, dict) and "body" in response else None
    resp_body, _ = _unwrap(response, "$.response")
    if isinstance(status, int) and status >= 400:
        raise ParseError(f"the response failed with HTTP {status}{_error_text(resp_body)}", path="$.response.status",
                         code="failed_exchange")
    if resp_body is None:
        raise ParseError("the response body is missing (null): nothing to learn from this exchange",
                         path="$.response.body", code="failed_exchange")
    try:
        conv = formats.parse(req_body, fmt, "request" if fmt else None, strict=strict)
    except SftprepError as exc:
        raise _under(exc, "$.request.body" if req_body is not request else "$.request")
    fmt = conv.meta.provider
    if isinstance(resp_body, list) or (isinstance(resp_body, str) and resp_body.lstrip()[:1] == "["):
        # A JSON array of chunks (Gemini streamGenerateContent without SSE framing) is a stream too.
        from .streams import reassemble

        try:
            resp_body = reassemble(resp_body, fmt)
        except SftprepError as exc:
            raise _under(exc, "$.response.body")
    elif isinstance(resp_body, str):
        from .streams import detect_stream, reassemble

        if detect_stream(resp_body) is None:
            raise ParseError(f"the response body is neither JSON nor an event stream: {resp_body[:80]!r}",
                             path="$.response.body", code="invalid_response")
        try:
            resp_body = reassemble(resp_body, fmt)
        except SftprepError as exc:
            raise _under(exc, "$.response.body")
    try:
        answer = formats.parse(resp_body, fmt, "response", strict=strict)
        check_finished(answer, resp_body)
    except SftprepError as exc:
        other = _other_format(resp_body)
        if other and other != fmt:
            raise ParseError(f"the request is {fmt} but the response is {other}", path="$.response.body",
                             code="mixed_formats") from None
        raise _under(exc, "$.response.body")
    model = answer.meta.model or conv.meta.model or _model_in_uri(uri)
    notes = conv.meta.notes + answer.meta.notes
    if isinstance(value.get("retrieved_from"), str):
        notes += (f"a background response: its answer is the one retrieved at {value['retrieved_from']}",)
    meta = replace(conv.meta, shape="exchange", model=model,
                   response_id=answer.meta.response_id, created=answer.meta.created,
                   stop_reason=answer.meta.stop_reason, usage=answer.meta.usage, notes=notes)
    return renumber(replace(conv, messages=conv.messages + answer.messages, meta=meta))


_URI_MODEL = re.compile(r"/models/([^/:?]+):")


def _model_in_uri(uri: str | None) -> str | None:
    """Gemini names the model in the path (`.../models/gemini-3-pro-preview:generateContent`)."""
    found = _URI_MODEL.search(uri.split("?", 1)[0]) if uri else None
    return found.group(1) if found else None


def _unwrap(side: Any, path: str) -> tuple[Any, str | None]:
    """(body, uri) of a request or response given as a body or as an HTTP envelope."""
    if isinstance(side, dict) and "body" in side and ({"method", "uri", "url", "status", "headers"} & side.keys()):
        body = side["body"]
        if isinstance(body, (bytes, str)) and body[:1] in ("{", "[", b"{", b"["):
            try:
                body = jsonpolicy.loads(body)
            except jsonpolicy.JsonPolicyError:
                pass  # SSE text or a broken body: the parser says which
        uri = side.get("uri") or side.get("url")
        if uri is not None and not isinstance(uri, str):
            raise ParseError(f"the URI must be a string, not a JSON {type(uri).__name__}",
                             path=f"{path}.{'uri' if side.get('uri') is not None else 'url'}")
        return body, uri
    if side is None:
        return None, None
    return side, None


def _error_text(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return f": {err['message'][:200]}"
        if isinstance(err, str):
            return f": {err[:200]}"
    return ""


def _other_format(body: Any) -> str | None:
    try:
        return formats.detect(body).format
    except SftprepError:
        return None


def _under(exc: SftprepError, prefix: str) -> SftprepError:
    """Re-root an error's path under the part of the exchange it came from."""
    if exc.path.startswith("$"):
        exc.path = prefix + exc.path[1:]
    return exc
