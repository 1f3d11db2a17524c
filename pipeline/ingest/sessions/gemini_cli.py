"""Gemini CLI chat recordings (`~/.gemini/tmp/<project_hash>/chats/session-<time>-<id>.jsonl`, subagents
under `chats/<parent_id>/`), as gemini-cli's ChatRecordingService writes them
(packages/core/src/services/chatRecordingService.ts): a first line of session metadata (`sessionId`,
`projectHash`, `startTime`, ...), then message records `{"id", "timestamp", "type": user | gemini | info |
error | warning, "content", "toolCalls", "thoughts", "tokens", "model"}`. The file is an upsert log: a
message is written again, whole, each time its tool calls, results or tokens change; `{"$set": {...}}`
patches the metadata (its `messages`, when present, replace the list); `{"$rewindTo": id}` drops that
message and everything after it. The older recordings are one JSON document with `messages`.

A `gemini` record is one model turn: its thoughts, its text, then its calls; the results recorded on the
calls (`result`: functionResponse parts) form the tool message after it. Newer CLIs rewrite the list from
the history they send the model (`$set.messages`): a gemini record's content then holds the model's own
parts (thoughts, signed text and calls, in order) and the tool answers become user records of
functionResponse parts; a call or an answer logged both ways is read once.

What a recording cannot carry: thoughts are only summaries (`subject`, `description`), no thought
signature, unless the record holds the model's parts; the tool definitions are not logged; long tool
output may be cut short; and the order of text and calls within a turn is not kept (text is placed first)
unless the record holds the model's parts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from ... import jsonpolicy
from ...conversation import Conversation, Media, Message, Meta, Opaque, Reasoning, Text, ToolCall, ToolResult
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
        elif isinstance(value.get("id"), str):
            order[value["id"]] = value  # an upsert: a later write of the same id replaces it in place
            lines[value["id"]] = line.number
        elif isinstance(value.get("sessionId"), str) and isinstance(value.get("projectHash"), str):
            # The metadata line; a later one (a resumed or migrated session) updates it, as the CLI reads it.
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
    unordered = False
    answered: set[str] = set()  # call ids whose result is already read
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
        blocks, replies = _parts(record.get("content"), f"{path}.content", calls)
        origin = {NAME: {k: v for k, v in (("id", record_id), ("line", recording.lines.get(record_id or "")),
                                          ("timestamp", record.get("timestamp")), ("tokens", record.get("tokens")))
                         if v is not None}}
        if kind == "user":
            answers = []
            for part, where in replies:  # a tool turn synced from the history: answers not read yet
                reply = _get(part, "functionResponse", "function_response")
                reply_id = reply.get("id") if isinstance(reply.get("id"), str) else None
                if reply_id is None or reply_id not in answered:
                    if not isinstance(reply.get("name"), str):
                        raise ParseError("a functionResponse needs a 'name'", path=where)
                    answers.append(_result(calls, {"name": reply["name"], "result": [part]}, reply_id, where))
                    answered.update([reply_id] if reply_id else [])
            if answers:
                results += len(answers)
                messages.append(Message("tool", tuple(answers)))
            if blocks:
                messages.append(Message("user", tuple(blocks), extras=origin))
            continue
        if replies:
            raise ParseError("a model turn cannot hold a functionResponse", path=replies[0][1])
        logged = {b.provider_id for b in blocks if isinstance(b, ToolCall) and b.provider_id}
        if not any(isinstance(b, Reasoning) for b in blocks):  # the model's own thoughts beat their summaries
            summaries = [Reasoning(summary=(": ".join(s for s in (t.get("subject"), t.get("description"))
                                                      if isinstance(s, str) and s),))
                         for t in record.get("thoughts") or [] if isinstance(t, dict)]
            thoughts += len(summaries)
            blocks = summaries + blocks
        answers = []
        for j, call in enumerate(record.get("toolCalls") or []):
            where = f"{path}.toolCalls[{j}]"
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ParseError("a tool call needs a 'name'", path=where)
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            if call_id is None or call_id not in logged:
                unordered = unordered or any(isinstance(b, Text) for b in blocks)
                blocks.append(calls.call(call["name"], call.get("args"), call_id))
            if call.get("result") is not None and (call_id is None or call_id not in answered):
                answers.append(_result(calls, call, call_id, f"{where}.result"))
                answered.update([call_id] if call_id else [])
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
        notes.append("Gemini CLI recordings do not log the tool definitions")
    if unordered:
        notes.append("the order of text and calls in a turn is not logged: text placed first")
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


def _get(obj: dict, camel: str, snake: str) -> Any:
    return obj[camel] if camel in obj else obj.get(snake)


def _parts(value: Any, path: str, calls: Calls) -> tuple[list, list[tuple[dict, str]]]:
    """PartListUnion (a string, a part, or a list of them) as blocks, with its functionResponse parts
    (and their paths) apart: only a user record holds them, as the answers of a tool turn."""
    if value is None or value == "":
        return [], []
    if isinstance(value, str):
        return [Text(value)], []
    blocks: list = []
    replies: list[tuple[dict, str]] = []
    for k, part in enumerate(value if isinstance(value, list) else [value]):
        where = f"{path}[{k}]" if isinstance(value, list) else path
        if isinstance(part, str):
            blocks.append(Text(part))
            continue
        if not isinstance(part, dict):
            raise ParseError("a content part must be a string or an object", path=where)
        signature = _get(part, "thoughtSignature", "thought_signature")
        signature = signature if isinstance(signature, str) else None
        call = _get(part, "functionCall", "function_call")
        blob = _get(part, "inlineData", "inline_data")
        ref = _get(part, "fileData", "file_data")
        if isinstance(part.get("text"), str):
            thought = part.get("thought") is True
            blocks.append(Reasoning(text=part["text"], signature=signature, origin="gemini") if thought
                          else Text(part["text"], signature=signature))
        elif isinstance(call, dict) and isinstance(call.get("name"), str):
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            blocks.append(calls.call(call["name"], call.get("args"), call_id, signature=signature))
        elif isinstance(_get(part, "functionResponse", "function_response"), dict):
            replies.append((part, where))
        elif isinstance(blob, dict):
            blocks.append(media(None, _get(blob, "mimeType", "mime_type"), data=blob.get("data")))
        elif isinstance(ref, dict):
            blocks.append(media(None, _get(ref, "mimeType", "mime_type"), url=_get(ref, "fileUri", "file_uri")))
        elif signature is not None and set(part) <= {"thoughtSignature", "thought_signature", "thought"}:
            blocks.append(Reasoning(signature=signature, origin="gemini"))  # signed state without text
        elif part:  # executableCode and the like: kept whole, for Gemini alone
            blocks.append(Opaque(provider="gemini", item_type=next(iter(part)), payload=part))
        else:
            raise ParseError("a content part must hold data (text, inlineData, functionCall...)", path=where)
    return blocks, replies


def _result(calls: Calls, call: dict, call_id: str | None, path: str) -> ToolResult:
    parts = call["result"] if isinstance(call["result"], list) else [call["result"]]
    failed = call.get("status") in ("error", "cancelled")
    pieces: list[Text | Media] = []
    output: Any = None
    for k, part in enumerate(parts):
        where = f"{path}[{k}]"
        response = _get(part, "functionResponse", "function_response") if isinstance(part, dict) else None
        inner: Any = part
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and set(body) <= {"output", "error"} and isinstance(body.get("output", body.get("error")), str):
                failed = failed or "error" in body
                pieces.append(Text(body.get("output", body.get("error"))))
            elif body is not None:
                output = body
            inner = response.get("parts") or []  # media a tool returned inside its response (Gemini 3)
            where = f"{where}.functionResponse.parts"
        blocks, replies = _parts(inner, where, calls)
        if replies or not all(isinstance(b, (Text, Media)) for b in blocks):
            raise ParseError("a tool result holds text, media and function responses only", path=where)
        pieces += blocks
    if output is not None and not pieces:
        return calls.result(call_id, output, is_error=failed, name=call["name"])
    return calls.result(call_id, pieces, is_error=failed, name=call["name"],
                        **({"output": output} if output is not None else {}))


__all__ = ["NAME", "Recording", "detect", "read_recording", "to_conversation"]
