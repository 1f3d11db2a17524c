"""Structural validation of canonical conversations: rules with stable codes.

Each rule has a code, a default severity and a one-line description (RULES). `validate(conv, config)`
returns the issues found, each with a JSON path into the canonical conversation
(`$.messages[3].blocks[1]`) and a one-line message saying what is wrong and what to do. A config can set
any code to error, warning or off. Validation reads the conversation only: the types are frozen and no
rule builds a changed copy.

Provider replay rules (codes starting `anthropic_`, `gemini_`, `openai_chat_`) apply only when
`conv.meta.provider` is that provider: they encode what that API rejects on replay, not what is wrong
everywhere.

Decisions worth knowing:
- A call left unanswered by the very end of the conversation is a warning (`unanswered_call_at_end`): a
  logged exchange whose response is a call ends that way and is a fine example of calling. A call still
  unanswered when the next assistant message starts (consecutive assistant messages are separate turns
  here: the providers refuse a result after another assistant message), or when other turns follow, is
  an error.
- Anthropic thinking signatures that are placeholders (Claude Code logs write `[REDACTED_SIGNATURE]`) are
  present but not genuine: the thinking text is real and trainable, but the block cannot be replayed to the
  API. That is its own warning, `reasoning_placeholder_state`, not `reasoning_without_state`. A genuine
  signature is base64 of at least 32 characters; anything else counts as a placeholder.
- Gemini's documented `skip_thought_signature_validator` dummy is accepted as a signature (the API does).
- A rule that holds for some models only names them (`Rule.models`): `gemini_call_signature` is a Gemini 3
  requirement, so gemini-2.x conversations and those naming no model are not checked by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal, Mapping, NamedTuple, assert_never

from msgspec import UNSET, Struct

from ..conversation import Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ..errors import ConfigError, SftprepError
from ..suggest import did_you_mean
from .flattened import FAMILIES, find_flattened
from .rules import Context, Found, Where, block_kind, block_path, check_schema_rules, provider_rules

Severity = Literal["error", "warning", "off"]
SEVERITIES: tuple[str, ...] = ("error", "warning", "off")


class Rule(NamedTuple):
    code: str
    severity: Severity  # the default
    description: str
    provider: str | None = None  # applies only to conversations read from this provider
    # Applies only when the conversation's model matches (re.search on `meta.model`); a requirement of
    # some models of a provider, not of the API. A conversation naming no model is not checked.
    models: str | None = None

    def applies_to(self, conv: Conversation) -> bool:
        if self.models is None:
            return True
        return conv.meta.model is not None and re.search(self.models, conv.meta.model) is not None


# The registry: stable codes, their default severity, one line each. Order is the report order.
RULES: dict[str, Rule] = {r.code: r for r in (
    Rule("orphan_result", "error", "a tool result that answers no earlier call"),
    Rule("duplicate_result", "error", "a call answered by more than one result"),
    Rule("unanswered_call", "error", "a call with no result before the next assistant turn or before later turns"),
    Rule("unanswered_call_at_end", "warning", "a call with no result because the conversation ends there"),
    Rule("duplicate_call_id", "error", "two calls share a call id while the first is still unanswered"),
    Rule("reused_call_id", "warning", "a call id reused after its first call was answered (pairs by order)"),
    Rule("result_name_mismatch", "error", "a result names a different tool than the call it answers"),
    Rule("arguments_not_object", "error", "call arguments are invalid JSON, an array or a scalar"),
    Rule("call_in_user_turn", "error", "a tool call in a message that is not the assistant's"),
    Rule("result_in_assistant_turn", "error", "a tool result inside an assistant (or system) message"),
    Rule("no_tool_list", "warning", "the conversation calls tools but defines none"),
    Rule("unknown_tool", "error", "a call to a tool missing from the tool list"),
    Rule("arguments_schema", "error", "call arguments that do not satisfy the tool's JSON Schema"),
    Rule("invalid_tool_schema", "warning", "a tool's parameter schema is not a valid JSON Schema"),
    Rule("empty_assistant_turn", "error", "an assistant message with no content"),
    Rule("reasoning_without_state", "error", "reasoning without the replay state its provider needs"),
    Rule("reasoning_placeholder_state", "warning", "reasoning whose replay state is a placeholder, not genuine"),
    Rule("anthropic_blank_text", "error", "an empty or whitespace-only text block (Anthropic rejects it)",
         "anthropic"),
    Rule("anthropic_results_first", "error", "tool_result blocks must open their user message", "anthropic"),
    Rule("anthropic_thinking_first", "error", "with thinking on, a tool-using assistant turn starts with thinking",
         "anthropic"),
    Rule("gemini_response_turn", "error", "function responses must all be in the user turn right after the calls",
         "gemini"),
    # Gemini 3 refuses a function call replayed without its signature; gemini-2.x does not need one.
    Rule("gemini_call_signature", "error", "the first function call of a step must carry the thoughtSignature "
         "(Gemini 3 models)", "gemini", models=r"(?:^|/)gemini-3(?:[.-]|$)"),
    Rule("openai_chat_tool_order", "error", "tool messages must follow the assistant message that called them",
         "openai-chat"),
    Rule("flattened_tool_call", "error", "a tool call written as text instead of a call block"),
    # What a log source (trace, session, batch file) could not carry: `conv.meta.lacks` names them.
    Rule("source_reasoning_unsigned", "warning", "the source logs reasoning as text only, without its replay state"),
    Rule("source_reasoning_not_logged", "warning", "the source has no place for reasoning: any thinking is absent"),
    Rule("source_reasoning_summary_only", "warning", "the source logs only summaries of the model's thoughts"),
    Rule("source_tool_output_truncated", "warning", "the source may cut tool output short"),
    Rule("source_no_tool_list", "warning", "the source never logs the tool definitions the model saw"),
)}


class Issue(Struct, frozen=True, omit_defaults=True):
    code: str
    severity: Literal["error", "warning"]
    path: str  # into the canonical conversation, e.g. $.messages[3].blocks[1]
    message: str
    provider_path: str | None = None  # the same place in the provider's record, when derivable
    span: tuple[int, int] | None = None  # character offsets in the text (flattened_tool_call)
    family: str | None = None  # the syntax family (flattened_tool_call)


@dataclass(frozen=True)
class ValidateConfig:
    """Per-code severity overrides; codes not named keep their default."""

    severity: Mapping[str, Severity] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for code, level in self.severity.items():
            if code not in RULES:
                raise ConfigError(f"unknown validation code '{code}'{did_you_mean(code, RULES)}; valid: {', '.join(RULES)}",
                                  code="unknown_rule")
            if level not in SEVERITIES:
                raise ConfigError(f"severity for '{code}' must be one of {', '.join(SEVERITIES)}, got '{level}'",
                                  code="bad_severity")

    @classmethod
    def from_overrides(cls, items: Iterable[str]) -> "ValidateConfig":
        """From `CODE=error|warning|off` strings, as given on the command line."""
        severity: dict[str, Severity] = {}
        for item in items:
            code, sep, level = item.partition("=")
            if not sep:
                raise ConfigError(f"expected CODE=error|warning|off, got '{item}'", code="bad_severity")
            severity[code.strip()] = level.strip()  # type: ignore[assignment]
        return cls(severity)

    def level(self, code: str) -> Severity:
        return self.severity.get(code, RULES[code].severity)


DEFAULT = ValidateConfig()
_ORDER = {code: n for n, code in enumerate(RULES)}


def has_errors(issues: Iterable[Issue]) -> bool:
    return any(i.severity == "error" for i in issues)


def validate(conv: Conversation, config: ValidateConfig | None = None) -> list[Issue]:
    """The issues of one conversation, ordered by where they are (conversation-wide first)."""
    config = config or DEFAULT
    ctx = Context(conv)
    found: list[tuple[tuple[int, int], int, Issue]] = []
    for code, where, path, message, extra in _all_rules(ctx, config):
        level = config.level(code)
        if level == "off" or not RULES[code].applies_to(conv):
            continue
        issue = Issue(code, level, path, message, provider_path=ctx.provider_path(where), **extra)
        found.append((where, _ORDER[code], issue))
    found.sort(key=lambda t: (t[0], t[1]))
    return [issue for _, _, issue in found]


# --- the rules ----------------------------------------------------------------------------------

def _all_rules(ctx: Context, config: ValidateConfig) -> Iterator[Found]:
    on = lambda code: config.level(code) != "off"  # noqa: E731
    yield from _pairing(ctx)
    yield from _placement(ctx)
    yield from _arguments(ctx)
    yield from _tool_list(ctx)
    if on("arguments_schema") or on("invalid_tool_schema"):
        yield from check_schema_rules(ctx)
    yield from _turns(ctx)
    yield from provider_rules(ctx)
    if on("flattened_tool_call"):
        yield from _flattened(ctx)
    yield from _source_lacks(ctx)


def _source_lacks(ctx: Context) -> Iterator[Found]:
    source = ctx.conv.meta.shape or "the source"
    for code in ctx.conv.meta.lacks:
        if code in RULES and code.startswith("source_"):
            yield (code, (-1, -1), "$.meta.lacks",
                   f"{source}: {RULES[code].description}; a row from it cannot teach what is missing (log it "
                   "elsewhere, or accept the gap)", {})


def _continues(result: ToolResult) -> bool:
    """A result that announces more for its call: a Gemini non-blocking call answers as a generator,
    each response but the last saying `willContinue`."""
    extras = result.extras.get("gemini") or {}
    return True in (extras.get("functionResponse.willContinue"), extras.get("functionResponse.will_continue"))


def _pairing(ctx: Context) -> Iterator[Found]:
    answered: dict[str, Where] = {}
    results_for: dict[str, list[Where]] = {}  # call id -> where its results are, for the unanswered check
    for where, result in ctx.results:
        if result.call_id is not None:
            results_for.setdefault(result.call_id, []).append(where)
        if result.kind == "hosted":
            continue
        call = ctx.calls.get(result.call_id) if result.call_id is not None else None
        if call is None or call[0] >= where:
            shown = result.provider_id or result.call_id
            about = f"result for call id '{shown}'" if shown else "result without a call id"
            yield ("orphan_result", where, block_path(*where),
                   f"{about} answers no earlier call: drop it, or restore the call it answers", {})
            continue
        if result.call_id in answered:
            first = answered[result.call_id]
            yield ("duplicate_result", where, block_path(*where),
                   f"call '{call[1].name}' was already answered at {block_path(*first)}: keep one result", {})
        elif not _continues(result):
            answered[result.call_id] = where
        if result.name is not None and result.name != call[1].name:
            yield ("result_name_mismatch", where, block_path(*where),
                   f"result names '{result.name}' but answers a call to '{call[1].name}': fix the name or the pairing",
                   {})
    # Unanswered: no result between the call and the next assistant turn.
    n = len(ctx.conv.messages)
    for where, call in ctx.call_list:
        if call.kind == "hosted":
            continue
        mi = where[0]
        limit = ctx.next_assistant[mi]
        if any(where < r < (limit, -1) for r in results_for.get(call.id, ())):
            continue
        path = block_path(*where)
        if ctx.turn_end[mi] == n and limit == n:
            yield ("unanswered_call_at_end", where, path,
                   f"call to '{call.name}' ends the conversation unanswered: fine for a response, "
                   "else add its result", {})
        elif limit == mi + 1:
            yield ("unanswered_call", where, path,
                   f"call to '{call.name}' is followed by another assistant message at $.messages[{limit}] "
                   "before its result (providers refuse that history): put the result right after the call, "
                   "or drop the call", {})
        elif limit < n:
            yield ("unanswered_call", where, path,
                   f"call to '{call.name}' has no result before the assistant turn at $.messages[{limit}]: "
                   "add the result or drop the call", {})
        else:
            yield ("unanswered_call", where, path,
                   f"call to '{call.name}' has no result though the conversation goes on: add the result "
                   "or drop the call", {})
    # Duplicate ids. A provider id reused after its first call was answered still pairs by order (a
    # warning: Anthropic rejects it on replay); reused while that call is pending, pairing is a guess.
    answered_at = {cid: min(ws) for cid, ws in results_for.items()}
    seen_provider: dict[str, tuple[Where, ToolCall]] = {}
    seen_canonical: dict[str, Where] = {}
    for where, call in ctx.call_list:
        if call.provider_id is not None:
            earlier = seen_provider.get(call.provider_id)
            seen_provider[call.provider_id] = (where, call)
            if earlier is not None:
                first_where, first = earlier
                done = first.id != call.id and answered_at.get(first.id, (len(ctx.conv.messages), 0)) < where
                yield ("reused_call_id" if done else "duplicate_call_id", where, block_path(*where),
                       f"call id '{call.provider_id}' was already used at {block_path(*first_where)}"
                       + (" (answered before this call): providers that need unique ids reject it; give each "
                          "call its own id" if done else ": results cannot be paired reliably; give each call "
                          "its own id"), {})
                continue
        if call.id in seen_canonical:
            yield ("duplicate_call_id", where, block_path(*where),
                   f"canonical call id '{call.id}' is also used at {block_path(*seen_canonical[call.id])}: "
                   "regenerate ids with pipeline.ids.CallIds", {})
            continue
        seen_canonical[call.id] = where


def _placement(ctx: Context) -> Iterator[Found]:
    for where, call in ctx.call_list:
        role = ctx.conv.messages[where[0]].role
        if role != "assistant":
            yield ("call_in_user_turn", where, block_path(*where),
                   f"call to '{call.name}' sits in a {role} message: move it to the assistant turn before", {})
    for where, result in ctx.results:
        role = ctx.conv.messages[where[0]].role
        if role in ("assistant", "system", "developer") and result.kind != "hosted":
            yield ("result_in_assistant_turn", where, block_path(*where),
                   f"tool result sits in a{'n' if role == 'assistant' else ''} {role} message: move it to the "
                   "user/tool turn after the call", {})


def _arguments(ctx: Context) -> Iterator[Found]:
    for where, call in ctx.call_list:
        if call.kind != "function":
            continue  # custom tools take free-form text; hosted tools belong to the provider
        path = block_path(*where)
        if not call.arguments_valid:
            raw = call.raw_arguments or ""
            what = "an empty string" if not raw.strip() else f"invalid JSON ({_preview(raw)})"
            yield ("arguments_not_object", where, path,
                   f"arguments of '{call.name}' are {what}: repair them into a JSON object or drop the call", {})
        elif call.arguments is not UNSET and not isinstance(call.arguments, dict):
            yield ("arguments_not_object", where, path,
                   f"arguments of '{call.name}' are {_json_kind(call.arguments)}, not an object: wrap them in an "
                   "object keyed by parameter name", {})


def _tool_list(ctx: Context) -> Iterator[Found]:
    calls = [(w, c) for w, c in ctx.call_list if c.kind != "hosted"]
    if not calls:
        return
    if not ctx.tools:
        if ctx.conv.meta.shape == "response":
            return  # a response never carries the tool list: its request does
        yield ("no_tool_list", (-1, -1), "$.tools",
               f"{len(calls)} call(s) but no tool definitions: add the tools, a model cannot learn when to call "
               "a tool it was never shown", {})
        return
    for where, call in calls:
        if call.name not in ctx.tools:
            yield ("unknown_tool", where, block_path(*where),
                   f"'{call.name}' is not in the tool list ({_names(ctx.tools)}): add its definition or drop "
                   "the call", {})


def _turns(ctx: Context) -> Iterator[Found]:
    # Empty turns, then reasoning: `validate` orders the issues by place, and no two share place and code.
    messages = ctx.conv.messages
    for mi in ctx.assistant:
        if _is_empty(messages[mi]):
            stop = ctx.conv.meta.stop_reason
            why = f" (the response stopped with '{stop}')" if stop and mi == len(messages) - 1 else ""
            yield ("empty_assistant_turn", (mi, -1), f"$.messages[{mi}]",
                   f"assistant message has no content{why}: drop the turn, or restore what the model said", {})
    uses_tools = bool(ctx.call_list or ctx.results)
    for mi, bi, block in ctx.reasoning:
        yield from _reasoning_state(ctx, mi, bi, block, uses_tools)


def _is_empty(message: Message) -> bool:
    for block in message.blocks:
        kind = block_kind(block)  # not a class pattern: each one that fails to match is a slow isinstance
        if kind is Text:
            if block.text.strip():
                return False
        elif kind is Media or kind is ToolCall or kind is ToolResult or kind is Opaque:
            return False
        elif kind is Reasoning:
            if block.text or block.summary or block.redacted or block.encrypted or block.signature:
                return False
        else:
            assert_never(block)
    return True


def _reasoning_state(ctx: Context, mi: int, bi: int, block: Reasoning, uses_tools: bool) -> Iterator[Found]:
    if "source_reasoning_unsigned" in ctx.conv.meta.lacks:
        return  # the source never logs the state: said once, as that warning, not as an error per block
    origin = block.origin or ctx.provider
    path = block_path(mi, bi)
    if origin == "anthropic":
        if block.redacted:
            return
        if not block.signature:
            if uses_tools:
                yield ("reasoning_without_state", (mi, bi), path,
                       "Anthropic thinking without a signature cannot be replayed in a tool-using conversation: "
                       "keep the signature from the log, or drop the thinking block", {})
        elif not _genuine_signature(block.signature):
            yield ("reasoning_placeholder_state", (mi, bi), path,
                   f"thinking signature {_preview(block.signature)} is a placeholder: fine to train on, but "
                   "this block cannot be replayed to Anthropic", {})
    elif origin == "openai-responses":
        if uses_tools and block.item_id is None and block.encrypted is None:
            yield ("reasoning_without_state", (mi, bi), path,
                   "OpenAI reasoning item has neither an id nor encrypted_content, so it cannot be replayed "
                   "around its function calls: log with include=['reasoning.encrypted_content']", {})


def _genuine_signature(signature: str) -> bool:
    return len(signature) >= 32 and _B64.fullmatch(signature) is not None


def _flattened(ctx: Context) -> Iterator[Found]:
    names = set(ctx.tools)
    for mi in ctx.assistant:  # only assistant text is trained as model output
        for bi, block in enumerate(ctx.conv.messages[mi].blocks):
            if block_kind(block) is not Text:
                continue
            for f in find_flattened(block.text, names):
                what = f"call to '{f.name}'" if f.name else "call"
                yield ("flattened_tool_call", (mi, bi), block_path(mi, bi),
                       f"text holds a {what} as {FAMILIES[f.family]} at chars {f.start}-{f.end}: "
                       "make it a tool call block, or drop the record",
                       {"span": (f.start, f.end), "family": f.family})


# --- small helpers --------------------------------------------------------------------------------

_B64 = re.compile(r"[A-Za-z0-9+/=_\-]+")


def _preview(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, (int, float)) else f"a {type(value).__name__}"


def _names(tools: Mapping[str, Any], limit: int = 6) -> str:
    names = list(tools)
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def error_issue(exc: SftprepError) -> Issue:
    """A record that could not be read or parsed, as an issue: always an error, under the error's code."""
    return Issue(exc.code, "error", exc.path, exc.message)
