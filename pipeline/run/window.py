"""Long conversations split into windows (`[shape] long = "window"`): rows that each fit `max_tokens`,
every one with the system prompt and tools, training only its own new assistant turns.

Cuts fall only on boundaries: message counts k where every call in messages[:k] has its result in
messages[:k], so no row holds a call without its result or a result without its call (the end of the
conversation is a boundary too: a trailing unanswered call stays where the log left it). A unit is the
run of messages between two neighbouring boundaries. Windows are chosen greedily: from where the previous
one stopped, as many whole units as fit; then up to `overlap` earlier units go in front as context, their
assistant turns given weight 0 (masked), as many as still fit. So every assistant turn is trained in
exactly one window, except a unit that alone (with system prompt and tools) exceeds the limit: it is
lost, and reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Iterator, TypeVar

from msgspec.structs import replace

from ..conversation import Conversation, Message, ToolCall, ToolResult
from ..errors import SftprepError

R = TypeVar("R")  # whatever the measure returns beside the token count (the render result)


@dataclass(frozen=True)
class Window(Generic[R]):
    conversation: Conversation  # messages[context:end], context turns at weight 0
    context: int  # first message of the row (masked context from here to `start`)
    start: int  # first message whose assistant turns this row trains
    end: int
    result: R


@dataclass(frozen=True)
class Lost:
    start: int
    end: int
    tokens: int | None  # the unit alone, with system prompt and tools; None: it did not render
    assistant_turns: int


@dataclass(frozen=True)
class Plan(Generic[R]):
    windows: list[Window[R]]
    lost: list[Lost]


Measure = Callable[[Conversation], tuple[int, R]]  # conversation -> (token count, render result)


def closed_points(conv: Conversation) -> Iterator[tuple[int, Message, bool]]:
    """(k, messages[k-1], whether every call in messages[:k] has its result in messages[:k])."""
    open_calls: set[str] = set()
    for k, message in enumerate(conv.messages, start=1):
        for block in message.blocks:
            if isinstance(block, ToolCall):
                open_calls.add(block.id)
            elif isinstance(block, ToolResult) and block.call_id is not None:
                open_calls.discard(block.call_id)
        yield k, message, not open_calls


def boundaries(conv: Conversation) -> list[int]:
    """0, every message count k with no call in messages[:k] waiting for its result, and the end."""
    n = len(conv.messages)
    return [0] + [k for k, _, closed in closed_points(conv) if closed or k == n]


def window_conversation(conv: Conversation, context: int, start: int, end: int) -> Conversation:
    """messages[context:end] with the assistant turns before `start` masked (weight 0)."""
    messages = tuple(_masked(m) if i < start else m
                     for i, m in enumerate(conv.messages[context:end], start=context))
    return replace(conv, messages=messages)


def plan_windows(conv: Conversation, limit: int, overlap: int, measure: Measure) -> Plan:
    """The windows of `conv` (see the module doc). `measure` renders a conversation and returns its token
    count; one that does not render (SftprepError) counts as not fitting."""
    cuts = boundaries(conv)

    def fits(context: int, start: int, end: int):
        window = window_conversation(conv, context, start, end)
        try:
            tokens, result = measure(window)
        except SftprepError:
            return None, None
        return (Window(window, context, start, end, result) if tokens <= limit else None), tokens

    windows: list[Window] = []
    lost: list[Lost] = []
    i = 0  # index in cuts of the next untrained message
    while i < len(cuts) - 1:
        start = cuts[i]
        best, best_j = None, None
        lo, hi = i + 1, len(cuts) - 1  # binary search: tokens grow with the end
        while lo <= hi:
            mid = (lo + hi) // 2
            found, _ = fits(start, start, cuts[mid])
            if found is not None:
                best, best_j, lo = found, mid, mid + 1
            else:
                hi = mid - 1
        if best is None:
            _, tokens = fits(start, start, cuts[i + 1])
            turns = sum(m.role == "assistant" and m.weight != 0 for m in conv.messages[start:cuts[i + 1]])
            lost.append(Lost(start, cuts[i + 1], tokens, turns))
            i += 1
            continue
        for back in range(min(overlap, i), 0, -1):  # the most context that still fits
            found, _ = fits(cuts[i - back], start, best.end)
            if found is not None:
                best = found
                break
        if any(m.role == "assistant" and m.weight != 0 for m in conv.messages[start:best.end]):
            windows.append(best)
        i = best_j
    return Plan(windows, lost)


def _masked(message: Message) -> Message:
    return replace(message, weight=0) if message.role == "assistant" and message.weight != 0 else message
