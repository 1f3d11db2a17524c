"""OpenAI Chat Completions streams: `chat.completion.chunk` objects, then `data: [DONE]`.

Each choice's `delta` is folded into a `message`: strings concatenate (content, refusal,
reasoning_content), lists extend (annotations), tool_calls merge by `index` with their `arguments`
kept as the concatenated string the non-streamed API returns. The usage chunk (empty `choices`) and
the last non-null finish_reason win. The result has `object: "chat.completion"`.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import Exchange, invalid, need_dict, own, provider_error, truncated
from .framing import DONE, Event

NAME = "openai-chat"
_TOP_SKIP = frozenset({"choices", "usage", "object", "obfuscation"})


def claims(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if data.get("object") == "chat.completion.chunk":
        return True
    choices = data.get("choices")
    return isinstance(choices, list) and all(isinstance(c, dict) and "delta" in c for c in choices) and (
        bool(choices) or "prompt_filter_results" in data or "usage" in data)


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value == [] or value == {}


class _Choice:
    def __init__(self, index: int):
        self.index = index
        self.message: dict[str, Any] = {}
        self.calls: list[dict] = []
        self.by_index: dict[int, int] = {}  # tool call index -> position of its latest call in `calls`
        self.function_call: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.logprobs: dict | None = None
        self.other: dict[str, Any] = {}

    def feed(self, event: Event, choice: dict) -> None:
        delta = choice.get("delta")
        if delta is not None:
            for key, value in need_dict(event, delta, "'delta'").items():
                if key == "tool_calls":
                    for fragment in value or ():
                        self._call(event, need_dict(event, fragment, "a tool_calls fragment"))
                elif key == "function_call":
                    self._legacy_call(event, need_dict(event, value, "'function_call'"))
                else:
                    _fold(self.message, key, value)
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
        logprobs = choice.get("logprobs")
        if isinstance(logprobs, dict):
            if self.logprobs is None:
                self.logprobs = {}
            for key, value in logprobs.items():
                _fold(self.logprobs, key, value)
        for key, value in choice.items():
            if key not in ("index", "delta", "finish_reason", "logprobs") and not _empty(value):
                self.other[key] = own(value)

    def _call(self, event: Event, fragment: dict) -> None:
        index = fragment.get("index")
        call_id = fragment.get("id")
        position = self.by_index.get(index) if isinstance(index, int) else None
        if position is None and index is None:
            # Some OpenAI-compatible servers omit `index`: match by id, else continue the last call.
            known = [i for i, c in enumerate(self.calls) if call_id and c.get("id") == call_id]
            position = known[0] if known else (len(self.calls) - 1 if self.calls and not call_id else None)
        elif position is not None and call_id and self.calls[position].get("id") not in (None, "", call_id):
            position = None  # a new id on a reused index: a new call (servers that always send index 0)
        if position is None:
            position = len(self.calls)
            self.calls.append({})
            if isinstance(index, int):
                self.by_index[index] = position
        call = self.calls[position]
        for key, value in fragment.items():
            if key == "index":
                continue
            if key == "function":
                function = call.setdefault("function", {})
                for fkey, fvalue in need_dict(event, value, "'function'").items():
                    if fkey == "name" and isinstance(fvalue, str):
                        # Sent once by OpenAI; a repeat of the same name is not a continuation.
                        if function.get("name") != fvalue:
                            function["name"] = (function.get("name") or "") + fvalue
                    else:
                        _fold(function, fkey, fvalue)
            elif key in ("id", "type"):
                if value and not call.get(key):
                    call[key] = value
            else:
                _fold(call, key, value)

    def _legacy_call(self, event: Event, fragment: dict) -> None:
        if self.function_call is None:
            self.function_call = {}
        for key, value in fragment.items():
            _fold(self.function_call, key, value)

    def result(self) -> dict:
        message = {"role": self.message.pop("role", None) or "assistant"}
        content = self.message.pop("content", None)
        # The non-streamed API answers content null when the turn is only tool calls.
        message["content"] = None if content == "" and self.calls else content
        message["refusal"] = self.message.pop("refusal", None)
        message.update(self.message)
        if self.calls:
            for call in self.calls:
                call.setdefault("type", "function")
                call.setdefault("function", {}).setdefault("arguments", "")
            message["tool_calls"] = self.calls
        if self.function_call is not None:
            message["function_call"] = self.function_call
        out = {"index": self.index, "message": message, "logprobs": self.logprobs,
               "finish_reason": self.finish_reason}
        out.update(self.other)
        return out


def _fold(target: dict, key: str, value: Any) -> None:
    """Merge one delta field: strings concatenate, lists extend, anything else replaces."""
    if value is None:
        target.setdefault(key, None)
        return
    current = target.get(key)
    if isinstance(value, str) and isinstance(current, str):
        target[key] = current + value
    elif isinstance(value, list) and isinstance(current, list):
        current.extend(own(value))
    else:
        target[key] = own(value)


class _Completion:
    def __init__(self, first: Event):
        self.first = first.index
        self.last = first.index
        self.top: dict[str, Any] = {}
        self.choices: dict[int, _Choice] = {}
        self.usage: Any = None
        self.saw_done = False
        self.notes: list[str] = []

    @property
    def id(self) -> str | None:
        return self.top.get("id") or None

    def finished(self) -> bool:
        return bool(self.choices) and all(c.finish_reason is not None for c in self.choices.values())

    def feed(self, event: Event, chunk: dict) -> None:
        self.last = event.index
        for key, value in chunk.items():
            if key in _TOP_SKIP:
                continue
            # Azure's first chunk carries placeholders ("" id, created 0): the first real value wins.
            if key not in self.top or (_empty(self.top[key]) and not _empty(value)):
                self.top[key] = own(value)
        if chunk.get("usage") is not None:
            self.usage = own(chunk["usage"])
        choices = chunk.get("choices")
        if choices is None:
            return
        if not isinstance(choices, list):
            raise invalid(event, "'choices' must be an array")
        for position, choice in enumerate(choices):
            choice = need_dict(event, choice, f"choices[{position}]")
            index = choice.get("index", position)
            if not isinstance(index, int):
                raise invalid(event, f"choices[{position}].index must be an integer")
            self.choices.setdefault(index, _Choice(index)).feed(event, choice)

    def result(self) -> Exchange:
        body: dict[str, Any] = {"id": self.top.pop("id", None), "object": "chat.completion",
                                "created": self.top.pop("created", None), "model": self.top.pop("model", None),
                                "choices": [self.choices[i].result() for i in sorted(self.choices)],
                                "usage": self.usage}
        body.update(self.top)
        return Exchange(body=body, first=self.first, last=self.last, notes=self.notes)


def reassemble(events: Sequence[Event], *, require_done: bool) -> list[Exchange]:
    """`require_done`: the framing keeps `[DONE]` (raw SSE), so its absence means the log was cut."""
    done: list[Exchange] = []
    current: _Completion | None = None
    for event in events:
        data = event.data
        if data is DONE:
            if current is None:
                raise invalid(event, "[DONE] before any chunk")
            current.saw_done = True
            current.last = event.index
            continue
        if not isinstance(data, dict):
            raise invalid(event, "a Chat Completions chunk must be a JSON object")
        if "error" in data and "choices" not in data:
            raise provider_error(event, data["error"])
        if current is not None:
            new_id = data.get("id") or None
            other = new_id is not None and current.id is not None and new_id != current.id
            if current.saw_done or (other and current.finished()):
                done.append(_close(current, require_done=False))
                current = None
            elif other:
                current.notes.append(f"{event.where()}: completion {current.id} was abandoned unfinished; "
                                     f"chunks of {new_id} replaced it")
                notes = current.notes
                current = _Completion(event)
                current.notes.extend(notes)
        if current is None:
            current = _Completion(event)
        current.feed(event, data)
    if current is None:
        raise truncated(events[-1] if events else None, "the stream has no chunks")
    done.append(_close(current, require_done=require_done, last=events[-1]))
    return done


def _close(current: _Completion, *, require_done: bool, last: Event | None = None) -> Exchange:
    if not current.saw_done and (require_done or not current.finished()):
        at = last if last is not None else Event(current.last, None)
        missing = "[DONE]" if current.finished() else "a finish_reason on every choice"
        raise truncated(at, f"the stream ends at event {at.index} without {missing}: it was cut short")
    if not current.choices:
        raise truncated(Event(current.last, None), "the stream has no choices")
    if not current.finished():
        current.notes.append("[DONE] arrived before a finish_reason on every choice")
    return current.result()
