"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`): one `{"timestamp", "type",
"payload"}` per line, as codex-rs writes its RolloutItem (protocol crate): `session_meta` (id, cwd,
cli_version, instructions), `response_item` (a Responses API item: message, reasoning, function_call,
function_call_output, custom_tool_call, local_shell_call, web_search_call, ...), `turn_context` (the model
and settings of a turn), `event_msg` (UI events that repeat what the items hold: skipped, counted) and
`compacted` (the history was summarized: `message`, and in newer versions the `replacement_history`).

The items are what the model saw, so they form a Responses request body for the openai-responses codec.
Two codex-rs spellings are made the API's first: a `function_call_output` whose `output` is the object
`{"content", "content_items"?, "success"?}` (older versions) becomes its text (or its content items), and
`success: false` marks the result an error; a `ghost_snapshot` item (the harness's git snapshot, never
sent to the model) is skipped and counted. An item the codec refuses is named by its rollout line.
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
from ...conversation import Block, Conversation, Reasoning, ToolCall, ToolResult, iter_blocks
from ...errors import InputError, SftprepError
from ..readers import RawRecord
from .lines import first_objects, json_lines

NAME = "codex"
LINE_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg"})
_SESSION_KEYS = ("id", "cwd", "cli_version", "originator", "source", "model_provider", "git")
# Response items codex-rs records for itself, never sent to the model.
_HARNESS_ITEMS = frozenset({"ghost_snapshot"})


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
    # Where each item of `body["input"]` was read: (line number, JSON path of the item on that line).
    item_lines: list[tuple[int, str]] = field(default_factory=list)
    # call_ids of outputs logged with success false (a list: a rejected window is written out as JSON)
    failed_calls: list[str] = field(default_factory=list)


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
        self._start(1)

    def _start(self, line: int) -> None:
        self.first_line, self.items = line, []
        self.item_lines: list[tuple[int, str]] = []
        self.failed_calls: list[str] = []
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
            if not isinstance(payload.get("type"), str):
                self._break(number, "a response_item payload needs a 'type'")
            elif payload["type"] in _HARNESS_ITEMS:
                self.skipped[f"response_item:{payload['type']}"] += 1
            else:
                self.items.append(self._item(payload))
                self.item_lines.append((number, "$.payload"))
        elif kind == "compacted":
            yield from self.emit(number - 1)
            history = payload.get("replacement_history")
            summary = payload.get("message")
            self.window += 1
            self._start(number)
            if isinstance(history, list) and history:
                for k, item in enumerate(history):
                    if isinstance(item, dict) and item.get("type") not in _HARNESS_ITEMS:
                        self.items.append(self._item(item))
                        self.item_lines.append((number, f"$.payload.replacement_history[{k}]"))
            elif isinstance(summary, str) and summary:
                self.items.append({"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": summary}]})
                self.item_lines.append((number, "$.payload.message"))
            self.notes.append(f"{self.path}:{number}: starts after a compaction; opens with "
                              + ("the replacement history" if isinstance(history, list) and history else "its summary"))
        elif kind == "event_msg":
            self.skipped[f"event_msg:{payload.get('type', '?')}"] += 1
        else:
            self.skipped[str(kind) if kind is not None else "untyped"] += 1
            self.notes.append(f"{self.path}:{number}: line of unknown type {kind!r} skipped")

    def _item(self, payload: dict) -> dict:
        """The item as the Responses API takes it: an output object (older codex-rs) becomes its text."""
        output = payload.get("output")
        if payload.get("type") != "function_call_output" or not isinstance(output, dict) or "content" not in output:
            return payload
        if output.get("success") is False and isinstance(payload.get("call_id"), str):
            self.failed_calls.append(payload["call_id"])
        items = output.get("content_items")
        return {**payload, "output": items if isinstance(items, list) else output["content"]}

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
                                            dict(sorted(self.skipped.items())), self.notes, self.timestamp,
                                            self.item_lines, self.failed_calls))


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
    try:
        conv = formats.parse(window.body, "openai-responses", "request", strict=strict)
    except SftprepError as exc:
        raise _at_line(exc, window) from None
    conv = replace(conv, messages=tuple(replace(m, blocks=tuple(_block(b, window.failed_calls) for b in m.blocks))
                                        for m in conv.messages))
    lacks: tuple[str, ...] = ()
    notes = list(window.notes)
    if any(isinstance(b, ToolCall) for _, _, b in iter_blocks(conv)):
        lacks = ("source_no_tool_list",)
        notes.append("Codex rollouts do not log the tool definitions the model was given")
    if any(isinstance(b, Reasoning) and b.encrypted is None and b.item_id is None for _, _, b in iter_blocks(conv)):
        lacks += ("source_reasoning_unsigned",)
        notes.append("Codex logs reasoning without encrypted_content (and never its item id) as text only")
    meta = replace(conv.meta, source=window.source, shape=NAME, created=window.first_timestamp,
                   model=window.models[-1] if window.models else conv.meta.model,
                   notes=conv.meta.notes + tuple(notes), lacks=conv.meta.lacks + lacks)
    extras = {**conv.extras, NAME: {"session": window.session, "window": window.window, "models": window.models,
                                    "skipped": window.skipped, "last_line": window.last_line}}
    return replace(conv, meta=meta, extras=extras)


def _at_line(exc: SftprepError, window: CodexWindow) -> SftprepError:
    """An error in the request body built from the window, made an error at the rollout line of its item."""
    head, sep, rest = exc.path.partition("]")
    if sep and head.startswith("$.input[") and head[8:].isdigit() and int(head[8:]) < len(window.item_lines):
        line, path = window.item_lines[int(head[8:])]
        exc.source = f"{window.source.rsplit(':', 1)[0]}:{line}"
        exc.path = path + rest
    return exc


def _block(block: Block, failed: list[str]) -> Block:
    """A result codex-rs logged with `success: false` is an error."""
    if isinstance(block, ToolResult) and block.provider_id in failed:
        return replace(block, is_error=True)
    return block


__all__ = ["NAME", "CodexWindow", "detect", "read_rollout", "to_conversation"]
