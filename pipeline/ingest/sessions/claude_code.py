"""Claude Code session logs (`~/.claude/projects/**/*.jsonl`): one JSON event per line.

Events of type "user" / "assistant" carry an Anthropic message in `message`. Claude Code writes one
assistant response over several lines that share `message.id`, one content block per line, and may
write the tool results of its first calls before the lines of its later calls: the blocks of one id
are merged back into one assistant message, and the results that came in between go to the user
message after it, which is the order the API saw. Consecutive user events form one user message.
Message lines on branches the session left (a rewind, a retry: see `claude_branches`) are skipped.
Everything else (file-history-snapshot, progress, system, summary, queue-operation, ...) is skipped
and counted by type.

The result is an Anthropic request body (`{"model", "messages"}`) for the anthropic codec, plus the
session's metadata and, per message, which lines and events it came from. A session file and each of
its subagent files (`<session>/subagents/*.jsonl`) is one conversation, read line by line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import msgspec

from ... import jsonpolicy
from ...conversation import Conversation, ToolResult
from ...errors import InputError, ParseError
from ...formats import anthropic
from .claude_branches import Graph, abandoned, parent_of

NAME = "claude-code"
MESSAGE_TYPES = frozenset({"user", "assistant"})
# Non-message event types seen in Claude Code logs; others are skipped and counted the same way.
OTHER_TYPES = frozenset({"file-history-snapshot", "progress", "summary", "system", "queue-operation",
                         "attachment", "custom-title", "tag", "agent-name"})
# Per-event flags worth keeping with the blocks they came with.
FLAGS = ("isSidechain", "isMeta", "isCompactSummary", "isVisibleInTranscriptOnly", "isApiErrorMessage")
SYNTHETIC_MODEL = "<synthetic>"  # assistant messages Claude Code wrote itself (API errors, interruptions)


@dataclass(frozen=True)
class SessionNote:
    """Something a reader of the session should know; `level` "warning" does not stop the read."""

    source: str  # file:line
    code: str
    message: str
    level: str = "warning"


@dataclass
class MessageSource:
    """Where one message of the body came from. `lines[i]` is the log line of content block i;
    `flags` maps a flag (isMeta, isCompactSummary, ...) to the indexes of the blocks that carried it."""

    lines: list[int] = field(default_factory=list)
    uuids: list[str] = field(default_factory=list)
    timestamps: list[str] = field(default_factory=list)
    flags: dict[str, list[int]] = field(default_factory=dict)
    message_id: str | None = None  # the API message id (assistant)
    request_id: str | None = None
    model: str | None = None

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"lines": self.lines, "uuids": self.uuids}
        if self.timestamps:
            out["timestamps"] = [self.timestamps[0], self.timestamps[-1]]
        for key in ("flags", "message_id", "request_id", "model"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out


@dataclass
class SessionResult:
    source: str
    body: dict  # {"model": ..., "messages": [...]}: an Anthropic request body
    sources: list[MessageSource]  # aligned with body["messages"]
    skipped: dict[str, int]  # non-message events by type
    session_id: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    version: str | None = None
    agent_id: str | None = None
    is_sidechain: bool = False  # a subagent's log
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    models: list[str] = field(default_factory=list)
    tool_use_results: dict[str, Any] = field(default_factory=dict)  # tool_use_id -> toolUseResult
    compactions: list[int] = field(default_factory=list)  # message indexes holding a compact summary
    notes: list[SessionNote] = field(default_factory=list)
    lines: int = 0

    def meta(self) -> dict:
        """The session's metadata, for a conversation's meta and extras."""
        out = {"session_id": self.session_id, "cwd": self.cwd, "git_branch": self.git_branch,
               "version": self.version, "agent_id": self.agent_id, "is_sidechain": self.is_sidechain,
               "first_timestamp": self.first_timestamp, "last_timestamp": self.last_timestamp,
               "models": self.models, "skipped": self.skipped, "compactions": self.compactions}
        return {k: v for k, v in out.items() if v not in (None, [], {}, False)}


class _Turn:
    def __init__(self, role: str):
        self.role = role
        self.content: list[dict] = []
        self.string: str | None = None  # a user turn that is one event with string content
        self.events = 0
        self.source = MessageSource()

    def add(self, blocks: list[dict] | str, event: dict, line: int) -> None:
        start = len(self.content) + (1 if self.string is not None else 0)
        if isinstance(blocks, str):
            if self.events == 0:
                self.string = blocks
            else:
                self._unstring()
                self.content.append({"type": "text", "text": blocks})
            count = 1
        else:
            self._unstring()
            self.content.extend(blocks)
            count = len(blocks)
        self.events += 1
        src = self.source
        src.lines.extend([line] * count)
        if isinstance(event.get("uuid"), str) and event["uuid"] not in src.uuids:
            src.uuids.append(event["uuid"])
        if isinstance(event.get("timestamp"), str):
            src.timestamps.append(event["timestamp"])
        for flag in FLAGS:
            if event.get(flag):
                src.flags.setdefault(flag, []).extend(range(start, start + count))

    def _unstring(self) -> None:
        if self.string is not None:
            self.content.insert(0, {"type": "text", "text": self.string})
            self.string = None

    def message(self) -> dict:
        return {"role": self.role, "content": self.string if self.string is not None else self.content}


class _Reader:
    def __init__(self, source: str):
        self.source = source
        self.messages: list[dict] = []
        self.sources: list[MessageSource] = []
        self.assistant: _Turn | None = None  # open assistant turn: later lines may share its id
        self.assistant_id: str | None = None
        self.user: _Turn | None = None  # user events since the open assistant turn (or the last flush)
        self.closed_ids: set[str] = set()
        self.skipped: Counter[str] = Counter()
        self.result = SessionResult(source=source, body={}, sources=self.sources, skipped={})
        self.side: bool | None = None  # isSidechain of the first message event
        self.timestamps: list[str] = []

    def where(self, line: int) -> str:
        return f"{self.source}:{line}"

    def event(self, event: dict, line: int) -> None:
        kind = event.get("type")
        if not isinstance(kind, str):
            kind = None  # a list or an object where the type goes: an event of no known type
        if isinstance(event.get("timestamp"), str):
            self.timestamps.append(event["timestamp"])
        if kind not in MESSAGE_TYPES:
            self.skipped[kind if isinstance(kind, str) else "unknown"] += 1
            return
        side = bool(event.get("isSidechain"))
        if self.side is None:
            self.side = side
        elif side != self.side:
            # Older Claude Code versions wrote subagent turns into the main log: they are another
            # conversation, not turns of this one.
            self.skipped["sidechain"] += 1
            return
        self._session_fields(event)
        message = event.get("message")
        if not isinstance(message, dict):
            raise ParseError(f"a '{kind}' event must carry a 'message' object", path="$.message",
                             source=self.where(line))
        content = message.get("content")
        if isinstance(content, list):
            for i, block in enumerate(content):
                if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                    raise ParseError("a content block must be an object with a 'type'",
                                     path=f"$.message.content[{i}]", source=self.where(line))
            blocks: list[dict] | str = content  # parsed here from the line: nobody else holds it
        elif isinstance(content, str):
            blocks = content
        else:
            raise ParseError("'message.content' must be a string or an array", path="$.message.content",
                             source=self.where(line))
        if kind == "assistant":
            self._assistant(event, message, blocks, line)
        else:
            self._user(event, blocks, line)

    def _session_fields(self, event: dict) -> None:
        r = self.result
        for attr, key in (("session_id", "sessionId"), ("cwd", "cwd"), ("git_branch", "gitBranch"),
                          ("version", "version"), ("agent_id", "agentId")):
            if getattr(r, attr) is None and isinstance(event.get(key), str) and event[key]:
                setattr(r, attr, event[key])

    def _assistant(self, event: dict, message: dict, blocks: list[dict] | str, line: int) -> None:
        message_id = message.get("id") if isinstance(message.get("id"), str) else None
        if not (self.assistant is not None and message_id is not None and message_id == self.assistant_id):
            self._flush()
            if message_id is not None and message_id in self.closed_ids:
                self.result.notes.append(SessionNote(self.where(line), "split_message",
                                                     f"message {message_id} continues after another turn; "
                                                     "kept as a new assistant turn"))
            self.assistant = _Turn("assistant")
            self.assistant_id = message_id
            src = self.assistant.source
            src.message_id = message_id
            src.request_id = event.get("requestId") if isinstance(event.get("requestId"), str) else None
            model = message.get("model")
            src.model = model if isinstance(model, str) else None
            if src.model and src.model != SYNTHETIC_MODEL and src.model not in self.result.models:
                self.result.models.append(src.model)
        self.assistant.add(blocks, event, line)
        if self.assistant.source.model == SYNTHETIC_MODEL:
            self.assistant.source.flags["synthetic"] = list(range(len(self.assistant.content)))

    def _user(self, event: dict, blocks: list[dict] | str, line: int) -> None:
        if self.user is None:
            self.user = _Turn("user")
        self.user.add(blocks, event, line)
        sidecar = event.get("toolUseResult")
        if sidecar is not None and isinstance(blocks, list):
            for block in blocks:
                if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                    self.result.tool_use_results[block["tool_use_id"]] = sidecar
        if event.get("isCompactSummary"):
            # The index the user message will have once emitted.
            index = len(self.messages) + (1 if self.assistant is not None else 0)
            if index not in self.result.compactions:
                self.result.compactions.append(index)

    def _flush(self) -> None:
        if self.assistant is not None:
            self._emit(self.assistant)
            if self.assistant_id is not None:
                self.closed_ids.add(self.assistant_id)
            self.assistant, self.assistant_id = None, None
        if self.user is not None:
            self._emit(self.user)
            self.user = None

    def _emit(self, turn: _Turn) -> None:
        self.messages.append(turn.message())
        self.sources.append(turn.source)

    def finish(self, lines: int) -> SessionResult:
        self._flush()
        r = self.result
        real = [s.model for s in self.sources if s.model and s.model != SYNTHETIC_MODEL]
        r.body = {"model": real[-1] if real else None, "messages": self.messages}
        r.skipped = dict(sorted(self.skipped.items()))
        r.is_sidechain = bool(self.side)
        if self.timestamps:
            r.first_timestamp, r.last_timestamp = min(self.timestamps), max(self.timestamps)
        r.lines = lines
        if r.body["model"] is None:
            del r.body["model"]
        return r


def read_session(lines: Iterable[tuple[int, str]], source: str) -> SessionResult:
    """Read one session log from (line number, line text) pairs.

    A line that is not a JSON object is an error naming file:line, unless it is the last line: a
    session being written, or copied mid-write, ends in a partial line, which becomes a warning note
    while the rest of the session is kept."""
    reader = _Reader(source)
    broken: tuple[int, str] | None = None
    last = 0
    # Message lines wait until the whole tree is known: only then does it say which are live.
    pending: list[tuple[dict, int]] = []
    graph: Graph = {}
    repeated = False
    for number, text in lines:
        last = number
        if not text.strip():
            continue
        if broken is not None:
            raise InputError(f"line is not a JSON object: {broken[1]}", source=reader.where(broken[0]),
                             code="invalid_line")
        try:
            event = jsonpolicy.loads(text)
        except jsonpolicy.JsonPolicyError as exc:
            broken = (number, str(exc))
            continue
        if not isinstance(event, dict):
            broken = (number, f"a JSON {type(event).__name__}, not an object")
            continue
        uuid = event.get("uuid")
        if isinstance(uuid, str):
            repeated = repeated or uuid in graph
            graph[uuid] = parent_of(event)
        if isinstance(event.get("type"), str) and event["type"] in MESSAGE_TYPES:
            pending.append((event, number))
        else:
            reader.event(event, number)
    _read_live(reader, pending, graph, repeated)
    result = reader.finish(last)
    if broken is not None:
        result.notes.append(SessionNote(reader.where(broken[0]), "truncated_line",
                                        f"the last line is cut off ({broken[1]}); it was left out"))
    return result


def _read_live(reader: _Reader, pending: list[tuple[dict, int]], graph: Graph, repeated: bool) -> None:
    """Feed the message lines of the live branch to the reader; count and note those of abandoned ones."""
    side = bool(pending[0][0].get("isSidechain")) if pending else False
    own = [(e, n) for e, n in pending if bool(e.get("isSidechain")) == side]
    dead = {own[i][1] for i in abandoned([e for e, _ in own], graph, repeated)}
    for event, number in pending:
        if number not in dead:
            reader.event(event, number)
    if dead:
        reader.skipped["abandoned_branch"] = len(dead)
        lines = sorted(dead)
        shown = ", ".join(map(str, lines[:8])) + (", ..." if len(lines) > 8 else "")
        reader.result.notes.append(SessionNote(reader.where(lines[0]), "abandoned_branch", f"{len(lines)} message "
                                   f"line(s) on branches the conversation left (rewound or retried) were left out: lines {shown}"))


def detect_session(first_lines: Iterable[str]) -> bool:
    """Whether these first lines of a file look like a Claude Code session log. Never raises."""
    try:
        for count, text in enumerate(first_lines):
            if count >= 8:
                return False
            if not text.strip():
                continue
            try:
                event = jsonpolicy.loads(text)
            except ValueError:
                continue
            if not isinstance(event, dict):
                return False
            kind = event.get("type")
            if kind in MESSAGE_TYPES:
                return isinstance(event.get("message"), dict) and ("sessionId" in event or "uuid" in event)
            if kind in OTHER_TYPES:
                return "sessionId" in event or "snapshot" in event or "leafUuid" in event or "operation" in event
            return False
    except Exception:  # a detector answers, it does not fail
        return False
    return False


def session_files(path: str | Path) -> list[Path]:
    """A session log and its subagents' logs: each is one conversation."""
    path = Path(path)
    return [path, *sorted((path.parent / path.stem / "subagents").glob("*.jsonl"))]


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, 1):
            yield number, text


def read_session_file(path: str | Path) -> SessionResult:
    return read_session(numbered_lines(path), str(path))


def to_conversation(result: SessionResult, *, strict: bool = False) -> Conversation:
    """The session as a canonical conversation: the anthropic codec parses the body, and the session
    metadata goes to `meta` and to `extras["claude-code"]` (per message: lines, uuids, flags)."""
    conv = anthropic.parse(result.body, shape="request", strict=strict)

    def sidecar(block):
        # Claude Code's own record of a tool run (stdout, file contents...) rides on its result.
        if isinstance(block, ToolResult) and block.provider_id in result.tool_use_results:
            extras = {**block.extras, NAME: {"toolUseResult": result.tool_use_results[block.provider_id]}}
            return msgspec.structs.replace(block, extras=extras)
        return block

    messages = tuple(msgspec.structs.replace(m, blocks=tuple(sidecar(b) for b in m.blocks)) for m in conv.messages)
    if len(messages) == len(result.sources):
        messages = tuple(msgspec.structs.replace(m, extras={**m.extras, NAME: s.to_dict()})
                         for m, s in zip(messages, result.sources))
    notes = tuple(f"{n.source}: {n.message}" for n in result.notes)
    meta = msgspec.structs.replace(conv.meta, source=result.source, shape="session",
                                   created=result.first_timestamp, notes=conv.meta.notes + notes)
    extras = {**conv.extras, NAME: result.meta()}
    return msgspec.structs.replace(conv, messages=messages, meta=meta, extras=extras)


__all__ = ["NAME", "MessageSource", "SessionNote", "SessionResult", "detect_session", "numbered_lines",
           "read_session", "read_session_file", "session_files", "to_conversation"]
