"""OTLP JSON trace exports, as the collector's file exporter and the OTLP/HTTP JSON encoding write them
(`{"resourceSpans": [{"resource", "scopeSpans": [{"scope", "spans": [...]}]}]}`, one export request per
line in JSONL), and the SDKs' own span JSON (`{"name", "context": {"span_id"}, "attributes": {...}}`).

Attributes in OTLP are typed key/value lists (`{"key", "value": {"stringValue": ...}}`); they are decoded
here to plain values once, so the dialect readers (OTel GenAI, OpenInference) see a flat dict.
The protobuf JSON mapping accepts both lowerCamelCase and the proto field names: both are read.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

from ...errors import ParseError


@dataclass
class SpanRecord:
    """One span of an export, with the resource and scope it was exported under: one record."""

    span: dict  # the span as exported
    attributes: dict[str, Any]  # decoded
    events: list[tuple[str, dict[str, Any]]]  # (name, decoded attributes), in order
    resource: dict[str, Any] = field(default_factory=dict)  # decoded resource attributes
    scope: str | None = None  # the instrumentation scope's name
    path: str = "$"  # where the span sits in its export
    event_paths: list[str] | None = None  # where each event sits, when the events are log records

    @property
    def name(self) -> str:
        return str(self.span.get("name") or "")


def _get(obj: dict, camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def is_otlp_export(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(_get(value, "resourceSpans", "resource_spans"), list)


def is_sdk_span(value: Any) -> bool:
    """A span as the SDKs print it (`ReadableSpan.to_json()`): attributes as a plain dict."""
    return (isinstance(value, dict) and isinstance(value.get("context"), dict) and "span_id" in value["context"]
            and isinstance(value.get("attributes"), dict) and "name" in value)


def any_value(value: Any, path: str) -> Any:
    """An OTLP AnyValue as a plain value. int64 values come as decimal strings in JSON."""
    if not isinstance(value, dict):
        raise ParseError("an attribute value must be an AnyValue object", path=path, code="invalid_attribute")
    if not value:
        return None
    for key in ("stringValue", "string_value"):
        if key in value:
            return value[key]
    for key in ("boolValue", "bool_value", "doubleValue", "double_value"):
        if key in value:
            return value[key]
    for key in ("intValue", "int_value"):
        if key in value:
            try:
                return int(value[key])
            except (TypeError, ValueError):
                raise ParseError(f"intValue {value[key]!r} is not an integer", path=f"{path}.{key}",
                                 code="invalid_attribute") from None
    for key in ("arrayValue", "array_value"):
        if key in value:
            items = _values(value[key], f"{path}.{key}")
            return [any_value(v, f"{path}.{key}.values[{i}]") for i, v in enumerate(items)]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return key_values(_values(value[key], f"{path}.{key}"), f"{path}.{key}.values")
    for key in ("bytesValue", "bytes_value"):
        if key in value:
            try:
                return base64.b64decode(value[key], validate=True).hex()
            except (binascii.Error, TypeError, ValueError):
                raise ParseError("bytesValue is not base64", path=f"{path}.{key}", code="invalid_attribute") from None
    raise ParseError(f"unknown AnyValue kind {sorted(value)}", path=path, code="invalid_attribute")


def _values(container: Any, path: str) -> list:
    """The `values` of an ArrayValue or KeyValueList (empty ones may be written as {} or left out)."""
    items = container.get("values") if isinstance(container, dict) else None if container is None else container
    if items is None:
        return []
    if not isinstance(items, list):
        raise ParseError("expected {\"values\": [...]}", path=path, code="invalid_attribute")
    return items


def key_values(items: Any, path: str) -> dict[str, Any]:
    if isinstance(items, dict):  # SDK JSON: already plain
        return dict(items)
    if not isinstance(items, list):
        raise ParseError("attributes must be a list of {key, value}", path=path, code="invalid_attribute")
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise ParseError("an attribute must be {key, value}", path=f"{path}[{i}]", code="invalid_attribute")
        out[item["key"]] = any_value(item.get("value") or {}, f"{path}[{i}].value")
    return out


def iter_spans(export: dict) -> Iterator[tuple[str, dict, dict, str | None]]:
    """(path, span, resource, scope name) for every span of an OTLP export, in order. The resource and
    scope stay undecoded here: a broken one fails its spans' records, not the reader."""
    for ri, rs in enumerate(_list(_get(export, "resourceSpans", "resource_spans"))):
        if not isinstance(rs, dict):
            continue  # malformed containers hold no spans; a malformed span is a record and fails alone
        resource = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
        scopes = _list(_get(rs, "scopeSpans", "scope_spans")) or _list(_get(rs, "instrumentationLibrarySpans",
                                                                             "instrumentation_library_spans"))
        for si, ss in enumerate(scopes):
            if not isinstance(ss, dict):
                continue
            scope = ss.get("scope") or ss.get("instrumentationLibrary") or {}
            name = scope.get("name") if isinstance(scope, dict) and isinstance(scope.get("name"), str) else None
            for pi, span in enumerate(_list(ss.get("spans"))):
                yield f"$.resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]", span, resource, name


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def span_record(span: Any, resource: dict, scope: str | None, path: str) -> SpanRecord:
    """Decode one span's attributes, events and resource; errors name the JSON path in the export."""
    if not isinstance(span, dict):
        raise ParseError("a span must be an object", path=path)
    attributes = key_values(span.get("attributes") or [], f"{path}.attributes")
    events = []
    for i, event in enumerate(_list(span.get("events"))):
        if isinstance(event, dict):
            events.append((str(event.get("name") or ""), key_values(event.get("attributes") or [],
                                                                    f"{path}.events[{i}].attributes")))
    res = key_values(resource.get("attributes") or [], "$.resource.attributes") if resource else {}
    return SpanRecord(span=span, attributes=attributes, events=events, resource=res, scope=scope, path=path)


def span_ids(record: SpanRecord) -> dict[str, str]:
    """Trace and span ids as exported (hex in OTLP JSON, 0x-prefixed in SDK JSON)."""
    span = record.span
    context = span.get("context") if isinstance(span.get("context"), dict) else {}
    out = {"trace_id": _get(span, "traceId", "trace_id") or context.get("trace_id"),
           "span_id": _get(span, "spanId", "span_id") or context.get("span_id"),
           "parent_span_id": _get(span, "parentSpanId", "parent_span_id") or span.get("parent_id"),
           "span_name": record.name, "service": record.resource.get("service.name"), "scope": record.scope}
    return {k: v for k, v in out.items() if isinstance(v, str) and v}


def start_time(record: SpanRecord) -> str | None:
    """The span's start as ISO 8601 UTC (OTLP: nanoseconds since the epoch; SDK JSON: already ISO)."""
    value = _get(record.span, "startTimeUnixNano", "start_time_unix_nano")
    if value is None:
        value = record.span.get("start_time")
        return value if isinstance(value, str) else None
    try:
        nanos = int(value)
    except (TypeError, ValueError):
        return None
    stamp = datetime.fromtimestamp(nanos // 1_000_000_000, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos % 1_000_000_000 // 1_000_000:03d}Z"
