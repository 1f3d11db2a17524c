"""Tracing exports: every span of an OTLP JSON export (or SDK span JSON) is one record; model-call
spans become conversations through their dialect (OTel GenAI, OpenInference), other spans are
rejected as not a model call, with the span's path in the export."""

from __future__ import annotations

from typing import Any, Iterator


from ... import jsonpolicy
from ...conversation import Conversation
from ...errors import ParseError, ShapeError, SftprepError
from . import langfuse, langsmith, openinference, otel_genai, otlp_logs, otlp_proto
from .otlp import SpanRecord, is_otlp_export, is_sdk_span, iter_spans, span_record

DIALECTS = (otel_genai.NAME, openinference.NAME)
SHAPES = (*DIALECTS, langfuse.NAME, langsmith.NAME)


def is_trace_export(value: Any) -> bool:
    """An export holding several records (spans, observations) to split, or one SDK span."""
    return (is_otlp_export(value) or is_sdk_span(value) or otlp_logs.is_log_export(value)
            or langfuse.split(value) is not None
            or langsmith.split(value) is not None)


def is_trace_record(value: Any) -> bool:
    return (isinstance(value, (SpanRecord, otlp_logs.OtherLogs)) or langfuse.is_observation(value)
            or langsmith.is_run(value))


def split(value: Any) -> Iterator[tuple[str, Any, Any]]:
    """(path, as exported, record) per record of an export: a `SpanRecord`, an observation or run, the
    other log records of a log export, or the error that stopped decoding one."""
    if otlp_logs.is_log_export(value):
        yield from otlp_logs.split(value)
        return
    observations = langfuse.split(value) or langsmith.split(value)
    if observations is not None:
        for path, observation in observations:
            yield path, observation, observation
        return
    if is_sdk_span(value):
        items: Iterator = iter([("$", value, value.get("resource") or {}, None)])
    else:
        items = iter_spans(value)
    for path, span, resource, scope in items:
        try:
            yield path, span, span_record(span, resource if isinstance(resource, dict) else {}, scope, path)
        except SftprepError as exc:
            yield path, span, exc


def span_bytes(span: Any) -> bytes:
    """A span that could not be decoded, for the rejects file (as the reader keeps undecodable bytes)."""
    return jsonpolicy.dumps(span)[:65536]


def dialect(record: SpanRecord) -> str | None:
    # OTel GenAI content wins: some instrumentations write both conventions on one span.
    if otel_genai.is_genai_span(record) and any(k.startswith("gen_ai.input") or k.startswith("gen_ai.output")
                                                for k in record.attributes):
        return otel_genai.NAME
    if openinference.is_openinference_span(record):
        return openinference.NAME
    if otel_genai.is_genai_span(record):
        return otel_genai.NAME
    return None


def parse(record: Any, shape: str | None = None, *, fmt: str | None = None, strict: bool = False) -> Conversation:
    if shape == langfuse.NAME or (shape is None and langfuse.is_observation(record)):
        if not langfuse.is_observation(record):
            raise ShapeError("not a Langfuse observation: expected {type, traceId, input/output}")
        return langfuse.parse(record, fmt=fmt, strict=strict)
    if shape == langsmith.NAME or (shape is None and langsmith.is_run(record)):
        if not langsmith.is_run(record):
            raise ShapeError("not a LangSmith run: expected {run_type, inputs, outputs}")
        return langsmith.parse(record, strict=strict)
    if isinstance(record, otlp_logs.OtherLogs):
        raise record.reject()
    if not isinstance(record, SpanRecord):
        raise ShapeError(f"not a span of a trace export (--shape {shape})")
    name = shape if shape in DIALECTS else dialect(record)
    status = record.span.get("status")
    if name is not None and isinstance(status, dict) and status.get("code") in (2, "STATUS_CODE_ERROR", "ERROR"):
        raise ParseError(f"span '{record.name}' ended with an error status: {str(status.get('message') or '')[:200]}",
                         path=f"{record.path}.status", code="failed_generation")
    if name == otel_genai.NAME:
        return otel_genai.parse_span(record)
    if name == openinference.NAME:
        return openinference.parse_span(record)
    raise ParseError(f"span '{record.name}' is not a model call: it has no gen_ai.* or OpenInference llm.* "
                     "attributes", path=f"{record.path}.attributes", code="not_a_model_call")


__all__ = ["DIALECTS", "SHAPES", "SpanRecord", "dialect", "is_trace_export", "is_trace_record", "parse", "span_bytes",
           "split"]
