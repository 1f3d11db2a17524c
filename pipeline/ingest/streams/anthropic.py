"""Anthropic Messages streams: message_start, content_block_start/delta/stop, message_delta, message_stop.

The rebuilt object is the `message` of message_start with its content filled from the block events,
`input_json_delta` fragments joined and parsed into `input`, and message_delta's stop fields and usage
merged in. Several messages in one log (an agent loop logged as one file) are several exchanges.
"""

from __future__ import annotations

from typing import Any, Sequence

from ... import jsonpolicy
from .base import Exchange, invalid, need_dict, need_int, need_str, own, provider_error, truncated
from .framing import DONE, Event

NAME = "anthropic"
EVENT_TYPES = frozenset({"message_start", "content_block_start", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop", "ping"})


def claims(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    kind = data.get("type")
    if kind in EVENT_TYPES:
        return True
    # Anthropic's error event: {"type": "error", "error": {"type": "overloaded_error", ...}}
    return kind == "error" and isinstance(data.get("error"), dict) and "sequence_number" not in data


class _Message:
    def __init__(self, start: Event, message: dict):
        self.start = start
        self.message = own(message)
        content = self.message.get("content")
        # message_start normally has empty content; a few proxies put whole blocks there already.
        self.blocks: dict[int, dict] = dict(enumerate(content)) if isinstance(content, list) else {}
        self.open: dict[int, Event] = {}
        self.started: set[int] = set()
        self.json_parts: dict[int, list[str]] = {}
        self.notes: list[str] = []
        self.stopped = False
        self.last = start.index

    def feed(self, event: Event) -> None:
        data = event.data
        kind = data.get("type")
        self.last = event.index
        match kind:
            case "content_block_start":
                index = need_int(event, data.get("index"), "'index'")
                if index in self.started:
                    raise invalid(event, f"content block {index} started twice")
                self.started.add(index)
                self.blocks[index] = own(need_dict(event, data.get("content_block"), "'content_block'"))
                self.open[index] = event
            case "content_block_delta":
                self._delta(event, self._open_block(event), need_dict(event, data.get("delta"), "'delta'"))
            case "content_block_stop":
                index = self._index_of_open(event)
                self._close(event, index)
            case "message_delta":
                delta = data.get("delta")
                if isinstance(delta, dict):
                    self.message.update(own(delta))
                usage = data.get("usage")
                if isinstance(usage, dict):
                    merged = dict(self.message.get("usage") or {})
                    merged.update(own(usage))
                    self.message["usage"] = merged
                for key, value in data.items():
                    if key not in ("type", "delta", "usage"):
                        self.message[key] = own(value)  # context_management and future fields
            case "message_stop":
                if self.open:
                    first = min(self.open)
                    raise invalid(event, f"message_stop while content block {first} is still open")
                self.stopped = True
            case "ping":
                pass
            case _:
                self.notes.append(f"{event.where()}: ignored unknown event type {kind!r}")

    def _index_of_open(self, event: Event) -> int:
        index = need_int(event, event.data.get("index"), "'index'")
        if index not in self.open:
            raise invalid(event, f"content block {index} was never started (or already stopped)")
        return index

    def _open_block(self, event: Event) -> tuple[int, dict]:
        index = self._index_of_open(event)
        return index, self.blocks[index]

    def _delta(self, event: Event, target: tuple[int, dict], delta: dict) -> None:
        index, block = target
        kind = delta.get("type")
        match kind:
            case "text_delta" | "thinking_delta" | "signature_delta":
                key = kind.removesuffix("_delta")
                block[key] = (block.get(key) or "") + need_str(event, delta.get(key), f"'{key}'")
            case "input_json_delta":
                # Any block may stream its input so (newer server tools too), not only the known ones.
                parts = self.json_parts.setdefault(index, [])
                parts.append(need_str(event, delta.get("partial_json"), "'partial_json'"))
            case "citations_delta":
                if not isinstance(block.get("citations"), list):
                    block["citations"] = []  # text blocks may start with "citations": null
                block["citations"].append(own(delta.get("citation")))
            case _:
                # Newer block kinds stream a string field the same way (compaction_delta -> content).
                fields = {k: v for k, v in delta.items() if k != "type"}
                if not fields or not all(isinstance(v, str) for v in fields.values()):
                    raise invalid(event, f"unknown delta type {kind!r} that is not a plain text fragment")
                for key, value in fields.items():
                    block[key] = (block.get(key) or "") + value
                self.notes.append(f"{event.where()}: appended unknown delta {kind!r} to field(s) {', '.join(fields)}")

    def _close(self, event: Event, index: int) -> None:
        del self.open[index]
        parts = self.json_parts.pop(index, None)
        if parts is None:
            return
        raw = "".join(parts)
        if not raw.strip():
            return  # no fragments: the start block's input ({} for a call without arguments) stands
        try:
            value = jsonpolicy.loads(raw)
        except jsonpolicy.JsonPolicyError as exc:
            raise invalid(event, f"the input of {self.blocks[index].get('type')} block {index} is not valid JSON "
                                 f"once its fragments are joined: {exc.msg} (column {exc.colno})") from None
        if not isinstance(value, dict):
            raise invalid(event, f"the input of block {index} is a JSON {type(value).__name__}, not an object")
        self.blocks[index]["input"] = value

    def result(self) -> Exchange:
        indexes = sorted(self.blocks)
        if indexes != list(range(len(indexes))):
            raise invalid(self.start, f"content block indexes are not contiguous: {indexes}")
        body = self.message
        body["content"] = [self.blocks[i] for i in indexes]
        return Exchange(body=body, first=self.start.index, last=self.last, notes=self.notes)


def reassemble(events: Sequence[Event]) -> list[Exchange]:
    done: list[Exchange] = []
    current: _Message | None = None
    for event in events:
        data = event.data
        if data is DONE:
            continue
        if not isinstance(data, dict):
            raise invalid(event, "an Anthropic stream event must be a JSON object")
        kind = data.get("type")
        if kind == "error":
            raise provider_error(event, data.get("error"))
        if kind == "message_start":
            message = need_dict(event, data.get("message"), "'message'")
            if current is not None and not current.stopped:
                if message.get("id") == current.message.get("id"):
                    current.notes.append(f"{event.where()}: ignored a repeated message_start for {message.get('id')}")
                    continue
                # A retry spliced into the same log: the first attempt never finished.
                notes = current.notes + [f"{event.where()}: message {current.message.get('id')} was abandoned "
                                         f"unfinished at events[{current.last}]; a new message_start replaced it"]
                current = _Message(event, message)
                current.notes.extend(notes)
                continue
            if current is not None:
                done.append(current.result())
            current = _Message(event, message)
            continue
        if current is None:
            if kind == "ping":
                continue
            raise invalid(event, f"{kind!r} event before message_start")
        if current.stopped:
            if kind == "ping":
                continue
            raise invalid(event, f"{kind!r} event after message_stop")
        current.feed(event)
    if current is None:
        raise truncated(events[-1] if events else None, "the stream has no message_start")
    if not current.stopped:
        last = events[-1]
        raise truncated(last, f"the stream ends at event {last.index} without message_stop: it was cut short")
    done.append(current.result())
    return done
