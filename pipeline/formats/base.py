"""What every codec shares: detection results, path-naming field access, call pairing, id rules,
and the walk that ledgers another provider's extras."""

from __future__ import annotations

import re
from collections import defaultdict, deque
from typing import Any, NamedTuple

from ..conversation import PROVIDERS, Conversation, Opaque, Slots, ToolResult
from ..errors import ParseError
from ..ledger import Ledger

SHAPES = ("request", "messages", "response")


class Detection(NamedTuple):
    format: str
    shape: str  # one of SHAPES
    certain: bool  # True when a feature only this format has was seen


# --- field access that names the JSON path on failure -------------------------------------------

def expect(value: Any, kind: type | tuple[type, ...], path: str, what: str = "value") -> Any:
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ParseError(f"{what} must be {_article(names)}, got {_type_name(value)}", path=path)
    return value


def require(obj: dict, key: str, kind: type | tuple[type, ...], path: str) -> Any:
    if key not in obj:
        raise ParseError(f"missing required field '{key}'", path=path)
    return expect(obj[key], kind, f"{path}.{key}", f"'{key}'")


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _article(names: str) -> str:
    plain = {"dict": "an object", "list": "an array", "str": "a string", "bool": "a boolean",
             "int": "an integer", "float": "a number"}
    return " or ".join(plain.get(n, n) for n in names.split(" or "))


def unknown_keys(obj: dict, known: frozenset[str] | set[str]) -> dict[str, Any]:
    """The keys a parser does not model, to keep in `extras`."""
    return {k: v for k, v in obj.items() if k not in known}


def slot(slots: Slots, provider: str) -> dict[str, Any]:
    return slots.get(provider) or {}


def slots_with(provider: str, values: dict[str, Any] | None) -> Slots:
    """A Slots dict holding `values` under `provider`, or empty when there is nothing to keep."""
    return {provider: values} if values else {}


# --- pairing calls and results -------------------------------------------------------------------

class CallIndex:
    """Maps the provider's call ids (or, for providers without ids, names in order) to canonical ids
    while a parser walks a conversation front to back."""

    def __init__(self) -> None:
        self._by_provider_id: dict[str, str] = {}
        self._pending_by_id: dict[str, deque[str]] = {}  # unanswered calls per provider id, oldest first
        self._pending_by_name: dict[str, deque[str]] = defaultdict(deque)
        self.names: dict[str, str] = {}  # canonical id -> tool name

    def add(self, canonical_id: str, name: str, provider_id: str | None) -> None:
        if provider_id is not None:
            self._by_provider_id[provider_id] = canonical_id
            self._pending_by_id.setdefault(provider_id, deque()).append(canonical_id)
        self._pending_by_name[name].append(canonical_id)
        self.names[canonical_id] = name

    def by_id(self, provider_id: str | None) -> str | None:
        if provider_id is None:
            return None
        # Several unanswered calls sharing one id (a provider reusing ids in a turn): answer them in
        # order rather than all to the last one; otherwise the latest call with that id.
        pending = self._pending_by_id.get(provider_id)
        canonical_id = pending.popleft() if pending else self._by_provider_id.get(provider_id)
        if canonical_id is not None:
            name = self.names[canonical_id]
            queue = self._pending_by_name[name]
            if canonical_id in queue:
                queue.remove(canonical_id)
        return canonical_id

    def by_name(self, name: str) -> tuple[str | None, bool]:
        """The oldest unanswered call of that name, and whether the choice was ambiguous (several
        unanswered calls of that name were pending, so only their order tells them apart)."""
        queue = self._pending_by_name.get(name)
        if not queue:
            return None, False
        ambiguous = len(queue) > 1
        return queue.popleft(), ambiguous


# --- ids on the way out ---------------------------------------------------------------------------

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def outgoing_id(provider_id: str | None, canonical_id: str, pattern: re.Pattern[str] | None = None,
                max_len: int | None = None) -> tuple[str, bool]:
    """The id to write for a call or result: the provider's own when the target accepts it, else the
    canonical one. The bool says whether the original id was replaced (worth a ledger entry)."""
    if provider_id is not None:
        ok = (pattern is None or pattern.match(provider_id)) and (max_len is None or len(provider_id) <= max_len)
        if ok:
            return provider_id, False
        return canonical_id, True
    return canonical_id, False


# --- what another provider's data becomes in a target -----------------------------------------

def ledger_result_name(ledger: Ledger, path: str, result: ToolResult, target: str,
                       named_by_source: bool = False) -> None:
    """A tool name another format's log wrote on a result (Chat `tool` messages and Responses outputs
    may carry one; Gemini's always do: `named_by_source`) that `target` writes nowhere: the call still
    names the tool, but a round trip loses the field. Names parsers derive from the call are no loss."""
    chat_named = (result.form.get("openai-chat") or {}).get("name") is True
    responses_named = "openai-responses" in result.form and result.name is not None
    if (chat_named and target != "openai-chat") or (responses_named and target != "openai-responses") \
            or (named_by_source and result.name is not None):
        ledger.add("dropped", path, f"the result's tool name '{result.name}' has no field in {target} "
                                    "(its call names the tool)")


# A key of a message's extras that starts with this is a field of the response object the message was read
# from (Anthropic's stop_sequence, container...), not of the message: a request has no place for it.
RESPONSE_FIELD = "$"


def ledger_foreign_extras(conv: Conversation, target: str, ledger: Ledger) -> None:
    """One 'dropped' entry per field that another provider kept in `extras`, and per Opaque block
    of another provider: the target has no place for either."""

    def visit(slots: Slots, path: str) -> None:
        for provider, values in slots.items():
            # Only wire formats' data can be lost in a conversion; log provenance (a session log's
            # line numbers and uuids) is about where the record came from, not what it says.
            if provider != target and provider in PROVIDERS:
                for key, value in values.items():
                    own = key.startswith(RESPONSE_FIELD)
                    field = f"{provider} {'response ' if own else ''}field '{key[len(RESPONSE_FIELD):] if own else key}'"
                    ledger.add("dropped", path, f"{field} is empty: nothing {target} could carry"
                               if value == {} else f"{field} has no equivalent in {target}")

    visit(conv.extras, "$")
    for ti, tool in enumerate(conv.tools):
        visit(tool.extras, f"$.tools[{ti}]")
    for name, blocks in (("system", conv.system), ("developer", conv.developer)):
        for bi, block in enumerate(blocks):
            visit(block.extras, f"$.{name}[{bi}]")
    for mi, message in enumerate(conv.messages):
        visit(message.extras, f"$.messages[{mi}]")
        for bi, block in enumerate(message.blocks):
            path = f"$.messages[{mi}].blocks[{bi}]"
            if isinstance(block, Opaque):
                if block.provider != target:
                    ledger.add("dropped", path, f"{block.provider} item '{block.item_type}' has no equivalent in {target}")
                continue
            visit(block.extras, path)
            for inner_i, inner in enumerate(getattr(block, "content", ()) or ()):
                visit(inner.extras, f"{path}.content[{inner_i}]")
