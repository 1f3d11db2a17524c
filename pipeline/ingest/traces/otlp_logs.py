"""OTLP JSON log exports (`{"resourceLogs": [{"resource", "scopeLogs": [{"scope", "logRecords": [...]}]}]}`):
the older GenAI event form as instrumentations emit it through the Logs API, one log record per message
(`eventName`, or the `event.name` attribute: `gen_ai.user.message`, `gen_ai.choice`, ...) with the fields
in its `body` and the model call's `traceId` / `spanId`. The records of one span are one model call: they
become one record, read like span events. The other log records of an export are one record, rejected as
not a model call, so that every log record is accounted for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ...errors import ParseError, SftprepError
from .otel_events import EVENT_NAMES
from .otlp import SpanRecord, any_value, key_values


@dataclass
class OtherLogs:
    """The log records of an export that are no GenAI message events: one record, rejected at parse."""

    paths: list[str]

    def reject(self) -> ParseError:
        shown = ", ".join(self.paths[:3]) + (", ..." if len(self.paths) > 3 else "")
        return ParseError(f"{len(self.paths)} log record(s) of this export are no GenAI message events ({shown})",
                          path=self.paths[0], code="not_a_model_call")


def is_log_export(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("resourceLogs", value.get("resource_logs")), list)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def split(export: dict) -> Iterator[tuple[str, Any, SpanRecord | OtherLogs | SftprepError]]:
    groups: dict[tuple[str, str], dict] = {}
    others: list[str] = []
    for ri, rl in enumerate(_list(export.get("resourceLogs", export.get("resource_logs")))):
        if not isinstance(rl, dict):
            continue
        resource = rl.get("resource") if isinstance(rl.get("resource"), dict) else {}
        for si, sl in enumerate(_list(rl.get("scopeLogs", rl.get("scope_logs")))):
            if not isinstance(sl, dict):
                continue
            scope = sl.get("scope") if isinstance(sl.get("scope"), dict) else {}
            for li, log in enumerate(_list(sl.get("logRecords", sl.get("log_records")))):
                path = f"$.resourceLogs[{ri}].scopeLogs[{si}].logRecords[{li}]"
                name, attrs = _event(log, path)
                if name not in EVENT_NAMES:
                    others.append(path)
                    continue
                key = (str(log.get("traceId") or ""), str(log.get("spanId") or ""))
                group = groups.setdefault(key, {"path": path, "resource": resource, "scope": scope, "events": [],
                                                "paths": [], "logs": []})
                group["events"].append((name, attrs))
                group["paths"].append(f"{path}.body")
                group["logs"].append(log)
    for (trace_id, span_id), group in groups.items():
        span = {"traceId": trace_id, "spanId": span_id, "name": f"log events of span {span_id or '?'}",
                "startTimeUnixNano": group["logs"][0].get("timeUnixNano"), "logRecords": group["logs"]}
        try:
            resource = key_values(group["resource"].get("attributes") or [], "$.resource.attributes")
        except SftprepError as exc:
            yield group["path"], span, exc
            continue
        scope = group["scope"].get("name") if isinstance(group["scope"].get("name"), str) else None
        yield group["path"], span, SpanRecord(span=span, attributes={"gen_ai.operation.name": "chat"},
                                              events=group["events"], resource=resource, scope=scope,
                                              path=group["path"], event_paths=group["paths"])
    if others:
        yield others[0], {"logRecords": others}, OtherLogs(others)


def _event(log: Any, path: str) -> tuple[str | None, dict]:
    """A log record's event name and its fields (the body, decoded from AnyValue or a JSON string)."""
    if not isinstance(log, dict):
        return None, {}
    try:
        attrs = key_values(log.get("attributes") or [], f"{path}.attributes")
        body = any_value(log["body"], f"{path}.body") if isinstance(log.get("body"), dict) else None
    except SftprepError:
        return None, {}
    name = log.get("eventName") or attrs.get("event.name")
    if isinstance(body, str):
        return name if isinstance(name, str) else None, {"body": body}
    return name if isinstance(name, str) else None, body if isinstance(body, dict) else {}
