"""Gemini CLI chat recordings (`~/.gemini/tmp/<project_hash>/chats/session-<time>-<id>.jsonl`, subagents
under `chats/<parent_id>/`), as gemini-cli's ChatRecordingService writes them
(packages/core/src/services/chatRecordingService.ts): a first line of session metadata (`sessionId`,
`projectHash`, `startTime`, ...), then message records `{"id", "timestamp", "type": user | gemini | info |
error | warning, "content", "toolCalls", "thoughts", "tokens", "model"}`. The file is an upsert log: a
message is written again, whole, each time its tool calls, results or tokens change; `{"$set": {...}}`
patches the metadata (its `messages`, when present, replace the list); `{"$rewindTo": id}` drops that
message and everything after it. The older recordings are one JSON document with `messages`.

A `gemini` record is one model turn: its thoughts, its text, then its calls; the results recorded on the
calls (`result`: functionResponse parts) form the tool message after it.

What a recording cannot carry: thoughts are only summaries (`subject`, `description`), no thought
signature; the tool definitions are not logged; long tool output may be cut short; and the order of text
and calls within a turn is not kept (text is placed first).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from ... import jsonpolicy
from ...conversation import Conversation, Media, Message, Meta, Reasoning, Text, ToolCall, ToolResult
from ...errors import InputError, ParseError
from ..blocks import Calls, media
from ..readers import RawRecord, open_bytes
from .lines import first_objects, json_lines

NAME = "gemini-cli"
MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
_NOTICES = frozenset({"info", "error", "warning"})  # the CLI's own notices: not turns of the conversation


@dataclass
class Recording:
    source: str
    messages: list[dict]  # the message records left after replaying the log, in order
    lines: dict[str, int]  # message id -> the line of its last write
    metadata: dict = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def detect(path: str | Path) -> bool:
    name = str(path)
    if name.endswith((".jsonl", ".jsonl.gz")):
        head = first_objects(path, 1)
        return bool(head) and "sessionId" in head[0] and "projectHash" in head[0] and "type" not in head[0]
    if name.endswith((".json", ".json.gz")):
        try:
            with open_bytes(path) as stream:
                start = stream.read(4096)
        except OSError:
            return False
        return start.lstrip()[:1] == b"{" and b'"projectHash"' in start and b'"sessionId"' in start
    return False


def read_recording(path: str | Path, limit: int) -> Iterator[RawRecord]:
    source = f"{path}:1"
    try:
        if str(path).endswith((".json", ".json.gz")):
            yield RawRecord(source, _document(path, limit))
        else:
            yield RawRecord(source, _replay(path, limit))
    except InputError as exc:
        yield RawRecord(exc.source or source, None, exc)


def _document(path: str | Path, limit: int) -> Recording:
    with open_bytes(path) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"recording is over the limit of {limit:,} bytes", source=f"{path}:1", code="record_too_large")
    try:
        value = jsonpolicy.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", source=f"{path}:1", code="invalid_json") from None
    messages = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(messages, list):
        raise InputError("a recording needs a 'messages' array", source=f"{path}:1", code="invalid_line")
    meta = {k: v for k, v in value.items() if k != "messages"}
    return Recording(f"{path}:1", [m for m in messages if isinstance(m, dict)], {}, meta)


def _replay(path: str | Path, limit: int) -> Recording:
    order: dict[str, dict] = {}  # insertion-ordered upserts
    lines: dict[str, int] = {}
    metadata: dict = {}
    skipped: Counter[str] = Counter()
    notes: list[str] = []
    for line in json_lines(path, limit):
        where = f"{path}:{line.number}"
        value = line.value
        if value is None:
            if line.last:
                notes.append(f"{where}: the last line is cut off ({line.problem}); left out")
                continue
            raise InputError(f"line is not a JSON object ({line.problem}): the messages after it cannot be trusted",
                             source=where, code="invalid_line")
        if isinstance(value.get("$rewindTo"), str):
            ids = list(order)
            target = value["$rewindTo"]
            drop = ids[ids.index(target):] if target in order else ids
            if target not in order:
                notes.append(f"{where}: $rewindTo an unknown message '{target}' clears the history")
            for key in drop:
                del order[key]
        elif "$set" in value:
            patch = value["$set"] if isinstance(value["$set"], dict) else {}
            if isinstance(patch.get("messages"), list):
                order = {m["id"]: m for m in patch["messages"] if isinstance(m, dict) and isinstance(m.get("id"), str)}
                lines = {k: line.number for k in order}
            metadata.update({k: v for k, v in patch.items() if k != "messages"})
        elif isinstance(value.get("id"), str) and "type" in value:
            order[value["id"]] = value  # an upsert: a later write of the same id replaces it in place
            lines[value["id"]] = line.number
        elif "sessionId" in value and not metadata:
            metadata.update({k: v for k, v in value.items() if k != "messages"})
            for m in value.get("messages") or []:
                if isinstance(m, dict) and isinstance(m.get("id"), str):
                    order[m["id"]] = m
                    lines[m["id"]] = line.number
        else:
            skipped["unknown"] += 1
            notes.append(f"{where}: line of unknown kind (keys {', '.join(sorted(value)[:5])}) skipped")
    return Recording(f"{path}:1", list(order.values()), lines, metadata, dict(skipped), notes)


def to_conversation(recording: Recording, *, strict: bool = False) -> Conversation:
    calls = Calls()
    messages: list[Message] = []
    skipped = Counter(recording.skipped)
    notes = list(recording.notes)
    models: list[str] = []
    thoughts = results = 0
    for i, record in enumerate(recording.messages):
        kind = record.get("type") if isinstance(record.get("type"), str) else None
        record_id = record.get("id") if isinstance(record.get("id"), str) else None
        path = f"$.messages[{i}]"
        if kind in _NOTICES or kind not in MESSAGE_TYPES:
            skipped[str(kind)] += 1
            if kind not in MESSAGE_TYPES:
                notes.append(f"message {record_id} (line {recording.lines.get(record_id or '', '?')}) of "
                             f"unknown type {kind!r} skipped")
            continue
        content = _content(record.get("content"), f"{path}.content")
        origin = {NAME: {k: v for k, v in (("id", record_id), ("line", recording.lines.get(record_id or "")),
                                          ("timestamp", record.get("timestamp")), ("tokens", record.get("tokens")))
                         if v is not None}}
        if kind == "user":
            if content:
                messages.append(Message("user", tuple(content), extras=origin))
            continue
        blocks: list = []
        for thought in record.get("thoughts") or []:
            if isinstance(thought, dict):
                subject, text = thought.get("subject"), thought.get("description")
                blocks.append(Reasoning(summary=(": ".join(s for s in (subject, text) if isinstance(s, str) and s),)))
                thoughts += 1
        blocks += content
        answers: list[ToolResult] = []
        for j, call in enumerate(record.get("toolCalls") or []):
            where = f"{path}.toolCalls[{j}]"
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ParseError("a tool call needs a 'name'", path=where)
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            blocks.append(calls.call(call["name"], call.get("args"), call_id))
            if call.get("result") is not None:
                answers.append(_result(calls, call, call_id, f"{where}.result"))
                results += 1
        if isinstance(record.get("model"), str) and record["model"] not in models:
            models.append(record["model"])
        messages.append(Message("assistant", tuple(blocks), extras=origin))
        if answers:
            messages.append(Message("tool", tuple(answers)))
    lacks = []
    if thoughts:
        lacks.append("source_reasoning_summary_only")
    if any(isinstance(b, ToolCall) for m in messages for b in m.blocks):
        lacks.append("source_no_tool_list")
        notes.append("Gemini CLI recordings do not log the tool definitions, nor the order of text and calls in a turn")
    if results:
        lacks.append("source_tool_output_truncated")
    meta = recording.metadata
    extras = {k: meta[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated", "summary", "kind",
                                   "directories") if meta.get(k) is not None}
    return Conversation(messages=tuple(messages), meta=Meta(
        source=recording.source, provider=NAME, shape=NAME, model=models[-1] if models else None,
        created=meta.get("startTime") if isinstance(meta.get("startTime"), str) else None,
        notes=tuple(notes), lacks=tuple(lacks)),
        extras={NAME: {**extras, "models": models, "skipped": dict(sorted(skipped.items()))}})


def _content(value: Any, path: str) -> list:
    """PartListUnion: a string, a part, or a list of them (text, inlineData, fileData)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [Text(value)]
    parts = value if isinstance(value, list) else [value]
    out: list = []
    for k, part in enumerate(parts):
        if isinstance(part, str):
            out.append(Text(part))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(Text(part["text"]))
        elif isinstance(part, dict) and isinstance(part.get("inlineData"), dict):
            blob = part["inlineData"]
            out.append(media(None, blob.get("mimeType"), data=blob.get("data")))
        elif isinstance(part, dict) and isinstance(part.get("fileData"), dict):
            ref = part["fileData"]
            out.append(media(None, ref.get("mimeType"), url=ref.get("fileUri")))
        else:
            raise ParseError("a content part must be text, inlineData or fileData", path=f"{path}[{k}]")
    return out


def _result(calls: Calls, call: dict, call_id: str | None, path: str) -> ToolResult:
    parts = call["result"] if isinstance(call["result"], list) else [call["result"]]
    failed = call.get("status") in ("error", "cancelled")
    pieces: list[Text | Media] = []
    output: Any = None
    for k, part in enumerate(parts):
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and set(body) <= {"output", "error"} and isinstance(body.get("output", body.get("error")), str):
                failed = failed or "error" in body
                pieces.append(Text(body.get("output", body.get("error"))))
            else:
                output = body
        else:
            pieces += _content(part, f"{path}[{k}]")
    if output is not None and not pieces:
        return calls.result(call_id, output, is_error=failed, name=call["name"])
    return calls.result(call_id, pieces, is_error=failed, name=call["name"])


__all__ = ["NAME", "Recording", "detect", "read_recording", "to_conversation"]
