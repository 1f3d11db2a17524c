"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`): one `{"timestamp", "type",
"payload"}` per line, as codex-rs writes its RolloutItem (protocol crate): `session_meta` (id, cwd,
cli_version, instructions), `response_item` (a Responses API item: message, reasoning, function_call,
function_call_output, custom_tool_call, local_shell_call, web_search_call, ...), `turn_context` (the model
and settings of a turn), `event_msg` (UI events that repeat what the items hold: skipped, counted) and
`compacted` (the history was summarized: `message`, and in newer versions the `replacement_history`).

The items are what the model saw, so they form a Responses request body for the openai-responses codec.
A compaction is a boundary: the model after it never saw the items before it, so each window between
compactions is its own conversation, the later ones opening with the replacement history (or the
summary as a user message). The file is read line by line; one window is in memory at a time.

What a rollout cannot carry: the tool definitions the model was given are not logged
(`source_no_tool_list`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from msgspec.structs import replace

from ... import formats
from ...conversation import Conversation, ToolCall, iter_blocks
from ...errors import InputError
from ..readers import RawRecord
from .lines import first_objects, json_lines

NAME = "codex"
LINE_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg"})
_SESSION_KEYS = ("id", "cwd", "cli_version", "originator", "source", "model_provider", "git")


@dataclass
class CodexWindow:
    """The items between two compactions (or the file's ends): one conversation."""

    source: str  # FILE:LINE of the window's first line
    body: dict  # an OpenAI Responses request body
    window: int  # 0 for the first, 1 after the first compaction, ...
    last_line: int
    session: dict = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    first_timestamp: str | None = None


def detect(path: str | Path) -> bool:
    if not str(path).endswith((".jsonl", ".jsonl.gz")):
        return False
    head = first_objects(path, 2)
    return bool(head) and str(head[0].get("type")) in LINE_TYPES and isinstance(head[0].get("payload"), dict)


class _Reader:
    def __init__(self, path: str | Path):
        self.path = str(path)
        self.session: dict = {}
        self.instructions: str | None = None
        self.window = 0
        self._start(1, [])

    def _start(self, line: int, items: list) -> None:
        self.first_line, self.items = line, items
        self.models: list[str] = []
        self.skipped: Counter[str] = Counter()
        self.notes: list[str] = []
        self.broken: tuple[int, str] | None = None
        self.timestamp: str | None = None

    def line(self, number: int, value: dict) -> Iterator[RawRecord]:
        kind, payload = value.get("type"), value.get("payload")
        kind = kind if isinstance(kind, str) else None
        if self.timestamp is None and isinstance(value.get("timestamp"), str):
            self.timestamp = value["timestamp"]
        if kind in LINE_TYPES and not isinstance(payload, dict):
            self._break(number, f"a '{kind}' line needs a 'payload' object")
        elif kind == "session_meta":
            self.session.update({k: payload[k] for k in _SESSION_KEYS if payload.get(k) is not None})
            base = payload.get("base_instructions")
            text = base.get("text") if isinstance(base, dict) else payload.get("instructions")
            if isinstance(text, str) and text:
                self.instructions = text
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model not in self.models:
                self.models.append(model)
        elif kind == "response_item":
            if isinstance(payload.get("type"), str):
                self.items.append(payload)
            else:
                self._break(number, "a response_item payload needs a 'type'")
        elif kind == "compacted":
            yield from self.emit(number - 1)
            history = payload.get("replacement_history")
            summary = payload.get("message")
            if isinstance(history, list) and history:
                carried = [item for item in history if isinstance(item, dict)]
            elif isinstance(summary, str) and summary:
                carried = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]}]
            else:
                carried = []
            self.window += 1
            self._start(number, carried)
            self.notes.append(f"{self.path}:{number}: starts after a compaction; opens with "
                              + ("the replacement history" if isinstance(history, list) and history else "its summary"))
        elif kind == "event_msg":
            self.skipped[f"event_msg:{payload.get('type', '?')}"] += 1
        else:
            self.skipped[str(kind) if kind is not None else "untyped"] += 1
            self.notes.append(f"{self.path}:{number}: line of unknown type {kind!r} skipped")

    def _break(self, number: int, why: str) -> None:
        if self.broken is None:
            self.broken = (number, why)

    def emit(self, last_line: int, *, final: bool = False) -> Iterator[RawRecord]:
        source = f"{self.path}:{self.first_line}"
        if self.broken is not None:
            number, why = self.broken
            yield RawRecord(source, None, InputError(f"line {number}: {why}; this window of the rollout is left out",
                                                     source=f"{self.path}:{number}", code="invalid_line"))
            return
        if not self.items and not (final and self.window == 0):
            return
        body: dict[str, Any] = {"input": self.items}
        if self.models:
            body = {"model": self.models[-1], **body}
        if self.instructions:
            body["instructions"] = self.instructions
        yield RawRecord(source, CodexWindow(source, body, self.window, last_line, dict(self.session), self.models,
                                            dict(sorted(self.skipped.items())), self.notes, self.timestamp))


def read_rollout(path: str | Path, limit: int) -> Iterator[RawRecord]:
    """One record per window of the rollout (see the module docstring)."""
    reader = _Reader(path)
    last = 0
    for line in json_lines(path, limit):
        last = line.number
        if line.value is None:
            if line.last:
                reader.notes.append(f"{reader.path}:{line.number}: the last line is cut off ({line.problem}); left out")
            else:
                reader._break(line.number, line.problem or "not a JSON object")
            continue
        yield from reader.line(line.number, line.value)
    yield from reader.emit(last, final=True)


def to_conversation(window: CodexWindow, *, strict: bool = False) -> Conversation:
    conv = formats.parse(window.body, "openai-responses", "request", strict=strict)
    lacks: tuple[str, ...] = ()
    notes = list(window.notes)
    if any(isinstance(b, ToolCall) for _, _, b in iter_blocks(conv)):
        lacks = ("source_no_tool_list",)
        notes.append("Codex rollouts do not log the tool definitions the model was given")
    meta = replace(conv.meta, source=window.source, shape=NAME, created=window.first_timestamp,
                   model=window.models[-1] if window.models else conv.meta.model,
                   notes=conv.meta.notes + tuple(notes), lacks=conv.meta.lacks + lacks)
    extras = {**conv.extras, NAME: {"session": window.session, "window": window.window, "models": window.models,
                                    "skipped": window.skipped, "last_line": window.last_line}}
    return replace(conv, meta=meta, extras=extras)


__all__ = ["NAME", "CodexWindow", "detect", "read_rollout", "to_conversation"]
