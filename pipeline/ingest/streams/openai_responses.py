"""OpenAI Responses streams: response.created ... output items and their deltas ... response.completed.

Two builds run side by side. From the deltas: items from `output_item.added`, filled by text,
argument, summary and code deltas, replaced by `output_item.done`. From the end: the `response` of
`response.completed` (or `.incomplete`), which is authoritative and preferred; when it carries no
output (some proxies send an empty list) the delta build supplies it. Items are keyed by
`output_index`: item ids are not stable across events in every proxy (GitHub Copilot rotates them).
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import Exchange, invalid, need_dict, need_int, own, provider_error, truncated
from .framing import DONE, Event

NAME = "openai-responses"
_SNAPSHOTS = frozenset({"response.created", "response.in_progress", "response.queued"})
_TERMINAL = frozenset({"response.completed", "response.incomplete"})

# delta event -> (container of the item holding the string, index field of the container, field).
# Container None: the field is on the item itself.
_DELTAS: dict[str, tuple[str | None, str | None, str]] = {
    "response.output_text.delta": ("content", "content_index", "text"),
    "response.refusal.delta": ("content", "content_index", "refusal"),
    "response.reasoning_text.delta": ("content", "content_index", "text"),
    "response.reasoning_summary_text.delta": ("summary", "summary_index", "text"),
    "response.function_call_arguments.delta": (None, None, "arguments"),
    "response.custom_tool_call_input.delta": (None, None, "input"),
    "response.mcp_call_arguments.delta": (None, None, "arguments"),
    "response.code_interpreter_call_code.delta": (None, None, "code"),
}
# done event -> (container, index field, item field, event field holding the full value)
_DONES: dict[str, tuple[str | None, str | None, str, str]] = {
    "response.output_text.done": ("content", "content_index", "text", "text"),
    "response.refusal.done": ("content", "content_index", "refusal", "refusal"),
    "response.reasoning_text.done": ("content", "content_index", "text", "text"),
    "response.reasoning_summary_text.done": ("summary", "summary_index", "text", "text"),
    "response.function_call_arguments.done": (None, None, "arguments", "arguments"),
    "response.custom_tool_call_input.done": (None, None, "input", "input"),
    "response.mcp_call_arguments.done": (None, None, "arguments", "arguments"),
    "response.code_interpreter_call_code.done": (None, None, "code", "code"),
}
_PART_ADDED = {"response.content_part.added": ("content", "content_index"),
               "response.reasoning_summary_part.added": ("summary", "summary_index")}
_PART_DONE = {"response.content_part.done": ("content", "content_index"),
              "response.reasoning_summary_part.done": ("summary", "summary_index")}
_DEFAULT_PART = {"response.output_text.delta": "output_text", "response.refusal.delta": "refusal",
                 "response.reasoning_text.delta": "reasoning_text",
                 "response.reasoning_summary_text.delta": "summary_text"}


def claims(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("type"), str) and data["type"].startswith("response.")


class _Response:
    def __init__(self, first: Event):
        self.first = first.index
        self.last = first.index
        self.snapshot: dict | None = None  # latest created/in_progress response
        self.final: dict | None = None  # the completed/incomplete response
        self.items: dict[int, dict] = {}  # output_index -> item built from added + deltas + done
        self.delta_items: dict[int, dict] = {}  # output_index -> item from added + deltas only
        self.notes: list[str] = []
        self.sequence: int | None = None

    def feed(self, event: Event, data: dict) -> None:
        self.last = event.index
        kind = data["type"]
        number = data.get("sequence_number")
        if isinstance(number, int) and not isinstance(number, bool):
            if self.sequence is not None and number > self.sequence + 1:
                # Events were left out (a trimmed log, a resumed background stream): the delta build is
                # incomplete, and only the final snapshot can be trusted.
                self.notes.append(f"{event.where()}: sequence_number jumps from {self.sequence} to {number}; "
                                  "events are missing")
            self.sequence = number
        if kind in _SNAPSHOTS:
            self.snapshot = own(need_dict(event, data.get("response"), "'response'"))
            return
        if kind in _TERMINAL:
            self.final = own(need_dict(event, data.get("response"), "'response'"))
            return
        if kind == "response.output_item.added":
            index = need_int(event, data.get("output_index"), "'output_index'")
            item = need_dict(event, data.get("item"), "'item'")
            self.items[index] = own(item)
            self.delta_items[index] = own(item)
            return
        if kind == "response.output_item.done":
            index = need_int(event, data.get("output_index"), "'output_index'")
            self.items[index] = own(need_dict(event, data.get("item"), "'item'"))
            self.delta_items.setdefault(index, own(self.items[index]))
            return
        if kind in _PART_ADDED or kind in _PART_DONE:
            container, field = (_PART_ADDED.get(kind) or _PART_DONE[kind])
            for item in self._targets(event, data, deltas=kind in _PART_ADDED):
                parts = item.setdefault(container, [])
                at = need_int(event, data.get(field), f"'{field}'")
                part = own(need_dict(event, data.get("part"), "'part'"))
                while len(parts) <= at:
                    parts.append(None)
                if kind in _PART_ADDED and parts[at] is not None:
                    continue
                parts[at] = part
            return
        if kind in _DELTAS:
            container, field, name = _DELTAS[kind]
            delta = data.get("delta")
            if not isinstance(delta, str):
                raise invalid(event, f"'delta' of {kind} must be a string")
            for item in self._targets(event, data):
                holder = self._holder(event, data, item, container, field, _DEFAULT_PART.get(kind))
                holder[name] = (holder.get(name) or "") + delta
            return
        if kind in _DONES:
            container, field, name, source = _DONES[kind]
            if source in data:
                for item in self._targets(event, data, deltas=False):
                    holder = self._holder(event, data, item, container, field, None)
                    if isinstance(holder.get(name), str) and holder[name] and holder[name] != data[source]:
                        self.notes.append(f"{event.where()}: {kind} differs from the deltas before it; "
                                          "the done value was kept")
                    holder[name] = own(data[source])
            return
        if kind == "response.output_text.annotation.added":
            for item in self._targets(event, data):
                holder = self._holder(event, data, item, "content", "content_index", "output_text")
                annotations = holder.setdefault("annotations", [])
                at = data.get("annotation_index", len(annotations))
                if isinstance(at, int) and at < len(annotations):
                    annotations[at] = own(data.get("annotation"))
                else:
                    annotations.append(own(data.get("annotation")))
            return
        # Progress events of hosted tools (web_search_call.searching, shell_call_command.delta, ...):
        # their item arrives whole in output_item.done, which is what the build keeps.

    def _targets(self, event: Event, data: dict, *, deltas: bool = True) -> list[dict]:
        """The running item, and the delta-only item too unless this event carries a finished value."""
        index = need_int(event, data.get("output_index"), "'output_index'")
        if index not in self.items:
            raise invalid(event, f"{data['type']} for output item {index}, which was never added")
        return [self.items[index], self.delta_items[index]] if deltas else [self.items[index]]

    @staticmethod
    def _holder(event: Event, data: dict, item: dict, container: str | None, field: str | None,
                default_type: str | None) -> dict:
        if container is None:
            return item
        parts = item.setdefault(container, [])
        at = need_int(event, data.get(field), f"'{field}'")
        while len(parts) <= at:
            parts.append(None)
        if parts[at] is None:
            # Deltas may come without a part.added event (reasoning text): start the part here.
            parts[at] = {"type": default_type} if default_type else {}
        return parts[at]

    def result(self) -> Exchange:
        indexes = sorted(self.items)
        built = [self.items[i] for i in indexes]
        from_deltas = own(self.snapshot) if self.snapshot is not None else {}
        from_deltas["output"] = [self.delta_items[i] for i in indexes]
        if self.final is None:
            body = own(self.snapshot) if self.snapshot is not None else {}
            body["output"] = built
        else:
            body = self.final
            output = body.get("output")
            if not output and built:
                self.notes.append("the final response carried no output items; they were rebuilt from the events")
                body["output"] = built
            elif isinstance(output, list) and len(output) != len(built) and built:
                self.notes.append(f"the final response lists {len(output)} output items, the events "
                                  f"{len(built)}; the final response was kept")
        return Exchange(body=body, first=self.first, last=self.last, notes=self.notes, from_deltas=from_deltas)


def reassemble(events: Sequence[Event]) -> list[Exchange]:
    done: list[Exchange] = []
    current: _Response | None = None
    for event in events:
        data = event.data
        if data is DONE:
            continue  # OpenRouter ends Responses streams with [DONE] too
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise invalid(event, "a Responses stream event must be an object with a 'type'")
        kind = data["type"]
        if kind == "error":
            raise provider_error(event, data.get("error", data))
        if kind == "response.failed":
            response = data.get("response") if isinstance(data.get("response"), dict) else {}
            raise provider_error(event, response.get("error") or {"message": "response.failed"})
        if current is not None and current.final is not None:
            if kind in _SNAPSHOTS:
                done.append(current.result())
                current = None
            else:
                raise invalid(event, f"{kind} after the response was complete")
        if current is None:
            current = _Response(event)
        current.feed(event, data)
    if current is None:
        raise truncated(events[-1] if events else None, "the stream has no events")
    if current.final is None:
        last = events[-1]
        raise truncated(last, f"the stream ends at event {last.index} without response.completed: it was cut short")
    done.append(current.result())
    return done
