"""Hugging Face Session Trace Simple Format (STS-Format, huggingface.co/docs/hub/session-traces-format):
JSONL, a header `{"type": "session", "harness", "id", "name"}`, then one `{"type": "message", "message":
{"role", "content", "reasoningContent", "toolCalls": [{"id", "function": {"name", "arguments"}}],
"toolCallId", "timestamp", "model"}}` per line. One file is one conversation.

What the format cannot carry: reasoning is text only (no signature or encrypted state), and no tool
definitions are part of it."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from ...conversation import Conversation, Message, Meta, Reasoning, Text, ToolCall
from ...errors import InputError, ParseError
from ..blocks import Calls
from ..readers import RawRecord
from .lines import first_objects, json_lines

NAME = "hf-sts"
_ROLES = frozenset({"user", "assistant", "system", "tool"})


@dataclass
class StsSession:
    source: str
    header: dict
    messages: list[tuple[int, dict]]  # (line, message object)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def detect(path: str | Path) -> bool:
    if not str(path).endswith((".jsonl", ".jsonl.gz")):
        return False
    head = first_objects(path, 1)
    return bool(head) and head[0].get("type") == "session" and "harness" in head[0] and "id" in head[0]


def read_session(path: str | Path, limit: int) -> Iterator[RawRecord]:
    source = f"{path}:1"
    header: dict = {}
    messages: list[tuple[int, dict]] = []
    skipped: Counter[str] = Counter()
    notes: list[str] = []
    for line in json_lines(path, limit):
        where = f"{path}:{line.number}"
        value = line.value
        if value is None:
            if line.last:
                notes.append(f"{where}: the last line is cut off ({line.problem}); left out")
                continue
            yield RawRecord(source, None, InputError(f"line {line.number} is not a JSON object ({line.problem}); the "
                                                     "session is left out", source=where, code="invalid_line"))
            return
        kind = value.get("type")
        if kind == "session" and not header:
            header = value
        elif kind == "message" and isinstance(value.get("message"), dict):
            messages.append((line.number, value["message"]))
        else:
            skipped[str(kind)] += 1
            notes.append(f"{where}: line of type {kind!r} skipped (STS has session and message lines)")
    yield RawRecord(source, StsSession(source, header, messages, dict(skipped), notes))


def to_conversation(session: StsSession, *, strict: bool = False) -> Conversation:
    calls = Calls()
    system: list[Text] = []
    messages: list[Message] = []
    models: list[str] = []
    for i, (line, item) in enumerate(session.messages):
        path = f"$.messages[{i}]"
        role = item.get("role")
        if not isinstance(role, str) or role not in _ROLES:
            raise ParseError(f"line {line}: unknown role {role!r}; known: {', '.join(sorted(_ROLES))}",
                             path=f"{path}.role")
        content = item.get("content")
        if content is not None and not isinstance(content, str):
            raise ParseError(f"line {line}: 'content' must be text", path=f"{path}.content")
        text = [Text(content)] if content else []
        extras = {NAME: {"line": line, **({"timestamp": item["timestamp"]} if "timestamp" in item else {})}}
        if role == "system" and not messages:
            system.extend(text)
            continue
        if role == "tool":
            call_id = item.get("toolCallId") if isinstance(item.get("toolCallId"), str) else None
            messages.append(Message("tool", (calls.result(call_id, text),), extras=extras))
            continue
        blocks: list = []
        if role == "assistant":
            if isinstance(item.get("reasoningContent"), str) and item["reasoningContent"]:
                blocks.append(Reasoning(text=item["reasoningContent"]))
            blocks += text
            blocks += _calls(item.get("toolCalls"), calls, f"{path}.toolCalls", line)
            if isinstance(item.get("model"), str) and item["model"] not in models:
                models.append(item["model"])
        else:
            blocks = text
        messages.append(Message(role, tuple(blocks), extras=extras))
    lacks = []
    notes = list(session.notes)
    if any(isinstance(b, Reasoning) for m in messages for b in m.blocks):
        lacks.append("source_reasoning_unsigned")
    if any(isinstance(b, ToolCall) for m in messages for b in m.blocks):
        lacks.append("source_no_tool_list")
        notes.append("STS sessions carry no tool definitions")
    header = session.header
    keep = {k: header[k] for k in ("harness", "id", "name") if k in header}
    return Conversation(messages=tuple(messages), system=tuple(system), meta=Meta(
        source=session.source, provider=NAME, shape=NAME, model=models[-1] if models else None,
        created=_first_time(session.messages), notes=tuple(notes), lacks=tuple(lacks)),
        extras={NAME: {**keep, "skipped": session.skipped}})


def _calls(value: Any, calls: Calls, path: str, line: int) -> list:
    out = []
    for k, call in enumerate(value or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ParseError(f"line {line}: a tool call needs function.name", path=f"{path}[{k}]")
        out.append(calls.call(function["name"], function.get("arguments"),
                              call.get("id") if isinstance(call.get("id"), str) else None))
    return out


def _first_time(messages: list[tuple[int, dict]]) -> str | None:
    for _, item in messages:
        stamp = item.get("timestamp")
        if isinstance(stamp, (int, float)) and not isinstance(stamp, bool):
            moment = datetime.fromtimestamp(stamp / 1000, tz=timezone.utc)
            return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(stamp) % 1000:03d}Z"
    return None
