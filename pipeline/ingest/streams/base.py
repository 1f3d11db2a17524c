"""What the per-provider reassemblers share: the result of one exchange and the error helpers."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ...errors import InputError
from .framing import Event


@dataclass
class Exchange:
    """One request's streamed response, rebuilt. `body` is what the non-streamed API returns;
    `from_deltas` (Responses only) is the same object built from the delta events alone, before the
    final `response.completed` snapshot replaced it, so that tests can check the two agree."""

    body: dict
    first: int  # index of the first and last event that belonged to this exchange
    last: int
    notes: list[str] = field(default_factory=list)
    from_deltas: dict | None = None


def own(value: Any) -> Any:
    """A deep copy: the result never shares mutable state with the caller's chunks."""
    return copy.deepcopy(value)


def invalid(event: Event, message: str) -> InputError:
    return InputError(message, path=event.where(), code="invalid_stream")


def truncated(event: Event | None, message: str) -> InputError:
    path = event.where() if event is not None else "$.events"
    return InputError(message, path=path, code="truncated_stream")


def provider_error(event: Event, error: Any) -> InputError:
    """The provider reported an error inside the stream: there is no response to rebuild."""
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or error.get("status") or "error"
        message = error.get("message") or ""
    else:
        kind, message = "error", str(error)
    return InputError(f"the stream carries a provider error ({kind}): {message}".rstrip(": "),
                      path=event.where(), code="stream_error")


def need_dict(event: Event, value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise invalid(event, f"{what} must be an object, got {type(value).__name__}")
    return value


def need_int(event: Event, value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise invalid(event, f"{what} must be a non-negative integer, got {value!r}")
    return value


def need_str(event: Event, value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise invalid(event, f"{what} must be a string, got {type(value).__name__}")
    return value
