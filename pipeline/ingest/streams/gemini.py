"""Gemini `streamGenerateContent` streams: each chunk is a GenerateContentResponse.

Per candidate, the parts of all chunks are joined the way the non-streamed API returns them:
consecutive text parts of the same kind (thought or not) become one part, which keeps the
`thoughtSignature` that came with one of them (Gemini 3 sends it on a trailing empty text part); two
signed runs stay apart. The empty unsigned text parts that only carry a finishReason are dropped.
Function calls stay whole, except Vertex's streamed arguments (`willContinue` / `partialArgs`), which
are assembled into `args`. The last finishReason, usageMetadata and safety ratings win.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from .base import Exchange, invalid, need_dict, own, provider_error, truncated
from .framing import DONE, Event

NAME = "gemini"
_TEXT_KEYS = frozenset({"text", "thought", "thoughtSignature", "thought_signature"})
_CANDIDATE_FIRST = ("content", "finishReason", "index")


def claims(data: Any) -> bool:
    return isinstance(data, dict) and any(k in data for k in (
        "candidates", "usageMetadata", "promptFeedback", "usage_metadata", "prompt_feedback"))


def is_partial(data: Any) -> bool:
    """A chunk from the middle of a stream: candidates, none finished yet. A chunk that finishes is a
    whole response too (a one-chunk stream is one), so only this tells a stream from a response."""
    candidates = data.get("candidates") if isinstance(data, dict) else None
    return (isinstance(candidates, list) and bool(candidates) and all(isinstance(c, dict) for c in candidates)
            and all(_get(c, "finishReason", "finish_reason") is None for c in candidates))  # null: not yet


# The SDKs' snake_case spellings of what a streamed call says (the API accepts both).
_CALL_CAMEL = {"will_continue": "willContinue", "partial_args": "partialArgs", "json_path": "jsonPath",
               "string_value": "stringValue", "number_value": "numberValue", "bool_value": "boolValue",
               "null_value": "nullValue"}


def _camel(obj: dict, keep_nulls: bool = False) -> dict:
    # JSON null is an unset field (SDK dumps write one for each), except a partial argument's nullValue.
    return {_CALL_CAMEL.get(k, k): v for k, v in obj.items() if keep_nulls or v is not None}


def _get(obj: dict, camel: str, snake: str) -> Any:
    return obj[camel] if camel in obj else obj.get(snake)


def _signature(part: dict) -> str | None:
    return _get(part, "thoughtSignature", "thought_signature")


def _is_text(part: dict) -> bool:
    return isinstance(part.get("text"), str) and set(part) <= _TEXT_KEYS


def _number(value: Any) -> Any:
    # Struct values are doubles on the wire; the non-streamed JSON shows whole numbers as integers.
    return int(value) if isinstance(value, float) and value.is_integer() else value


_PATH_TOKEN = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def _path(event: Event, text: Any) -> list[str | int]:
    if not isinstance(text, str) or not text.startswith("$"):
        raise invalid(event, f"partialArgs jsonPath must start with '$', got {text!r}")
    tokens: list[str | int] = []
    pos = 1
    while pos < len(text):
        match = _PATH_TOKEN.match(text, pos)
        if match is None:
            raise invalid(event, f"unsupported partialArgs jsonPath {text!r} at column {pos + 1}")
        name, index, single, double = match.groups()
        tokens.append(int(index) if index is not None else next(t for t in (name, single, double) if t is not None))
        pos = match.end()
    if not tokens:
        raise invalid(event, "a partialArgs jsonPath names the whole arguments object")
    return tokens


class _StreamedCall:
    """A Vertex function call whose arguments arrive as partialArgs across chunks."""

    def __init__(self, part: dict, call: dict):
        self.part = own({k: v for k, v in part.items() if k not in ("functionCall", "function_call")})
        self.call: dict[str, Any] = {k: own(v) for k, v in call.items()
                                     if k not in ("willContinue", "partialArgs", "args")}
        self.args: dict[str, Any] = own(call.get("args")) if isinstance(call.get("args"), dict) else {}
        self.continuing: set[tuple] = set()

    def apply(self, event: Event, partial: Any) -> None:
        partial = _camel(need_dict(event, partial, "a partialArgs entry"), keep_nulls=True)
        tokens = _path(event, partial.get("jsonPath"))
        if partial.get("stringValue") is not None:
            value: Any = partial["stringValue"]
        elif partial.get("numberValue") is not None:
            value = _number(partial["numberValue"])
        elif partial.get("boolValue") is not None:
            value = partial["boolValue"]
        elif "nullValue" in partial:  # JSON null or "NULL_VALUE": the one value that is null
            value = None
        else:
            raise invalid(event, f"partialArgs entry for {partial.get('jsonPath')} has no value")
        key = tuple(tokens)
        holder: Any = self.args
        for here, nxt in zip(tokens, tokens[1:]):
            empty: Any = [] if isinstance(nxt, int) else {}
            if isinstance(here, int):
                if not isinstance(holder, list):
                    raise invalid(event, f"jsonPath {partial.get('jsonPath')} indexes a non-array")
                while len(holder) <= here:
                    holder.append(None)
                if holder[here] is None:
                    holder[here] = empty
                holder = holder[here]
            else:
                if not isinstance(holder, dict):
                    raise invalid(event, f"jsonPath {partial.get('jsonPath')} names a field of a non-object")
                holder = holder.setdefault(here, empty)
        last = tokens[-1]
        if isinstance(last, int):
            if not isinstance(holder, list):
                raise invalid(event, f"jsonPath {partial.get('jsonPath')} indexes a non-array")
            while len(holder) <= last:
                holder.append(None)
            current = holder[last]
        else:
            if not isinstance(holder, dict):
                raise invalid(event, f"jsonPath {partial.get('jsonPath')} names a field of a non-object")
            current = holder.get(last)
        if key in self.continuing and isinstance(current, str) and isinstance(value, str):
            value = current + value  # a string streamed in pieces: willContinue marked the earlier ones
        holder[last] = value
        if partial.get("willContinue"):
            self.continuing.add(key)
        else:
            self.continuing.discard(key)

    def finish(self) -> dict:
        call = self.call
        call["args"] = self.args
        return {"functionCall": call, **self.part}


class _Candidate:
    def __init__(self, index: int):
        self.index = index
        self.parts: list[dict] = []
        self.role: str | None = None
        self.content_other: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.fields: dict[str, Any] = {}
        self.streamed: _StreamedCall | None = None
        self.dropped_empty = False

    def feed(self, event: Event, candidate: dict) -> None:
        content = candidate.get("content")
        if isinstance(content, dict):
            for key, value in content.items():
                if key == "role":
                    self.role = value or self.role
                elif key == "parts":
                    if not isinstance(value, list):
                        raise invalid(event, "'content.parts' must be an array")
                    for part in value:
                        self._part(event, need_dict(event, part, "a part"))
                else:
                    self.content_other[key] = own(value)
        for key, value in candidate.items():
            if key in ("content", "index"):
                continue
            if key in ("finishReason", "finish_reason"):
                if value is not None:
                    self.finish_reason = value
                continue
            if key in ("citationMetadata", "citation_metadata") and isinstance(value, dict):
                merged = self.fields.setdefault(key, {})
                for ckey, cvalue in value.items():
                    if isinstance(cvalue, list):
                        merged.setdefault(ckey, []).extend(own(cvalue))
                    else:
                        merged[ckey] = own(cvalue)
                continue
            if value is not None:
                self.fields[key] = own(value)

    def _part(self, event: Event, part: dict) -> None:
        part = {k: v for k, v in part.items() if v is not None}  # null is an unset field (SDK dumps)
        call = _get(part, "functionCall", "function_call")
        if isinstance(call, dict):
            call = _camel(call)
            if not call:
                self._close_streamed()  # the empty functionCall ends a streamed call; alone it says nothing
                return
            if "name" not in call and self.streamed is not None:
                # A continuation of the open call: more partialArgs, or a bare willContinue marker.
                for partial in call.get("partialArgs") or ():
                    self.streamed.apply(event, partial)
                self.streamed.part.update(own({k: v for k, v in part.items()
                                               if k not in ("functionCall", "function_call")}))
                if not call.get("willContinue"):
                    self._close_streamed()
                return
            if "name" not in call and call.get("partialArgs") is not None:
                raise invalid(event, "partialArgs without a function call that announced willContinue")
            self._close_streamed()
            if call.get("willContinue"):
                self.streamed = _StreamedCall(part, call)
                for partial in call.get("partialArgs") or ():
                    self.streamed.apply(event, partial)
                return
            self.parts.append(own(part))
            return
        self._close_streamed()
        if _is_text(part):
            self._text(part)
        else:
            self.parts.append(own(part))

    def _close_streamed(self) -> None:
        # Some streams end a streamed call without the empty terminal functionCall: the next part or
        # the end of the stream closes it.
        if self.streamed is not None:
            self.parts.append(self.streamed.finish())
            self.streamed = None

    def _text(self, part: dict) -> None:
        signature = _signature(part)
        thought = bool(part.get("thought"))
        if part["text"] == "" and signature is None and not thought:
            self.dropped_empty = True
            return
        previous = self.parts[-1] if self.parts else None
        if (previous is not None and _is_text(previous) and bool(previous.get("thought")) == thought
                and not (signature is not None and _signature(previous) is not None)):
            previous["text"] += part["text"]
            if signature is not None:
                previous["thoughtSignature" if "thoughtSignature" in part else "thought_signature"] = signature
            return
        self.parts.append(own(part))

    def result(self) -> dict:
        self._close_streamed()
        parts = self.parts
        if not parts and self.dropped_empty:
            parts = [{"text": ""}]
        out: dict[str, Any] = {}
        if parts or self.role or self.content_other:
            out["content"] = {"parts": parts, "role": self.role or "model", **self.content_other}
        if self.finish_reason is not None:
            out["finishReason"] = self.finish_reason
        out["index"] = self.index
        out.update(self.fields)
        return out


class _Response:
    def __init__(self, first: Event):
        self.first = first.index
        self.last = first.index
        self.candidates: dict[int, _Candidate] = {}
        self.top: dict[str, Any] = {}
        self.blocked = False
        self.notes: list[str] = []

    @property
    def id(self) -> str | None:
        return _get(self.top, "responseId", "response_id")

    def finished(self) -> bool:
        if self.blocked:
            return True
        return bool(self.candidates) and all(c.finish_reason is not None for c in self.candidates.values())

    def feed(self, event: Event, chunk: dict) -> None:
        self.last = event.index
        for key, value in chunk.items():
            if key == "candidates":
                if not isinstance(value, list):
                    raise invalid(event, "'candidates' must be an array")
                for position, candidate in enumerate(value):
                    candidate = need_dict(event, candidate, f"candidates[{position}]")
                    index = candidate.get("index", position)
                    if not isinstance(index, int):
                        raise invalid(event, f"candidates[{position}].index must be an integer")
                    self.candidates.setdefault(index, _Candidate(index)).feed(event, candidate)
            elif key in ("responseId", "response_id", "modelVersion", "model_version", "createTime", "create_time"):
                self.top.setdefault(key, value)
            elif value is not None:
                self.top[key] = own(value)  # usageMetadata, promptFeedback, ...: the last one wins
                if key in ("promptFeedback", "prompt_feedback") and isinstance(value, dict) and (
                        _get(value, "blockReason", "block_reason")):
                    self.blocked = True

    def result(self) -> Exchange:
        body: dict[str, Any] = {}
        if self.candidates:
            body["candidates"] = [self.candidates[i].result() for i in sorted(self.candidates)]
        body.update(self.top)
        return Exchange(body=body, first=self.first, last=self.last, notes=self.notes)


def _has_parts(chunk: dict) -> bool:
    for candidate in chunk.get("candidates") or ():
        content = candidate.get("content") if isinstance(candidate, dict) else None
        if isinstance(content, dict) and content.get("parts"):
            return True
    return False


def reassemble(events: Sequence[Event]) -> list[Exchange]:
    done: list[Exchange] = []
    current: _Response | None = None
    for event in events:
        data = event.data
        if data is DONE:
            continue
        if not isinstance(data, dict):
            raise invalid(event, "a Gemini stream chunk must be a JSON object")
        if "error" in data and "candidates" not in data:
            raise provider_error(event, data["error"])
        if current is not None:
            new_id = _get(data, "responseId", "response_id")
            other = new_id is not None and current.id is not None and new_id != current.id
            if current.finished() and (other or (new_id is None and _has_parts(data))):
                done.append(current.result())
                current = None
            elif other:
                current.notes.append(f"{event.where()}: response {current.id} was abandoned unfinished; "
                                     f"chunks of {new_id} replaced it")
                notes = current.notes
                current = _Response(event)
                current.notes.extend(notes)
        if current is None:
            current = _Response(event)
        current.feed(event, data)
    if current is None:
        raise truncated(events[-1] if events else None, "the stream has no chunks")
    if not current.finished():
        last = events[-1]
        raise truncated(last, f"the stream ends at event {last.index} without a finishReason: it was cut short")
    done.append(current.result())
    return done
