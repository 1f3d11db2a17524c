"""Validation internals: the per-conversation index the rules share, the JSON Schema rules, the
provider replay rules, and provider paths. The registry and the generic rules are in validator.py."""

from __future__ import annotations

import hashlib
import warnings
from functools import lru_cache
from typing import Any, Iterator

import orjson
from msgspec import UNSET

from .. import jsonpolicy
from ..conversation import Conversation, Media, Opaque, Reasoning, Text, ToolCall, ToolResult

Where = tuple[int, int]  # (message index, block index); (-1, i) for the conversation or tool i
Found = tuple[str, Where, str, str, dict]  # code, where, path, message, extra Issue fields


def block_path(mi: int, bi: int) -> str:
    return f"$.messages[{mi}].blocks[{bi}]"


# isinstance against a block class is slow when it does not match (their metaclass sends Python through
# __instancecheck__): a block's class is read from its exact type, with isinstance only for a subclass.
# The block classes are unrelated, so a block is an instance of one of them at most.
_BLOCK_TYPES = (Text, Media, ToolCall, ToolResult, Reasoning, Opaque)
_EXACT_BLOCK_TYPES = frozenset(_BLOCK_TYPES)


def block_kind(block: Any) -> type:
    """The block class `block` is an instance of (its own type when none)."""
    kind = type(block)
    if kind in _EXACT_BLOCK_TYPES:
        return kind
    return next((t for t in _BLOCK_TYPES if isinstance(block, t)), kind)


class Context:
    """Indexes built once per conversation and shared by the rules."""

    def __init__(self, conv: Conversation):
        self.conv = conv
        self.provider = conv.meta.provider
        self.tools = {tool.name: (ti, tool) for ti, tool in enumerate(conv.tools)}
        self.calls: dict[str, tuple[Where, ToolCall]] = {}  # canonical id -> first call with it
        self.call_list: list[tuple[Where, ToolCall]] = []
        self.results: list[tuple[Where, ToolResult]] = []
        # Found in the same pass, for the rules that read only these: the index of each assistant
        # message and every reasoning block, in conversation order.
        self.assistant: list[int] = []
        self.reasoning: list[tuple[int, int, Reasoning]] = []
        messages = conv.messages
        n = len(messages)
        # A turn is a run of consecutive messages with one role. turn_end[mi]: the first message after
        # mi's turn; next_assistant[mi]: the first assistant message after mi itself (n when none). For
        # pairing, consecutive assistant messages are separate turns: the providers refuse a call whose
        # result comes after another assistant message.
        self.turn_end = turn_end = [n] * n
        self.next_assistant = next_assistant = [n] * n
        roles = [message.role for message in messages]
        for mi in range(n - 2, -1, -1):
            turn_end[mi] = turn_end[mi + 1] if roles[mi + 1] == roles[mi] else mi + 1
            next_assistant[mi] = mi + 1 if roles[mi + 1] == "assistant" else next_assistant[mi + 1]
        for mi, message in enumerate(messages):
            if roles[mi] == "assistant":
                self.assistant.append(mi)
            for bi, block in enumerate(message.blocks):
                kind = type(block)
                if kind not in _EXACT_BLOCK_TYPES:
                    kind = block_kind(block)
                if kind is ToolCall:
                    self.call_list.append(((mi, bi), block))
                    self.calls.setdefault(block.id, ((mi, bi), block))
                elif kind is ToolResult:
                    self.results.append(((mi, bi), block))
                elif kind is Reasoning:
                    self.reasoning.append((mi, bi, block))

    def provider_path(self, where: Where) -> str | None:
        return provider_path(self.conv, where)


# --- JSON Schema ----------------------------------------------------------------------------------

def check_schema_rules(ctx: Context) -> Iterator[Found]:
    """invalid_tool_schema once per broken tool schema; arguments_schema per call that breaks a valid one."""
    usable: dict[str, tuple[int, bytes | None, Any]] = {}  # tool name -> (index, schema digest, validator)
    checked = [(name, ti, tool.parameters) for name, (ti, tool) in ctx.tools.items()
               if tool.kind == "function" and tool.parameters is not UNSET and tool.parameters is not None]
    for (name, ti, _), (digest, validator, problem) in zip(checked, _schema_entries([s for _, _, s in checked])):
        if problem is not None:
            yield ("invalid_tool_schema", (-1, ti), f"$.tools[{ti}].parameters",
                   f"schema of tool '{name}' is not valid JSON Schema ({problem}): fix it, calls to it go unchecked",
                   {})
            continue
        usable[name] = (ti, digest, validator)
    for where, call in ctx.call_list:
        if call.kind != "function" or not isinstance(call.arguments, dict) or call.name not in usable:
            continue
        ti, digest, validator = usable[call.name]
        try:
            error = _arguments_error(digest, validator, call.arguments)
        except Exception as exc:  # noqa: BLE001  a schema can fail only when applied (unresolvable $ref, bad regex)
            del usable[call.name]
            yield ("invalid_tool_schema", (-1, ti), f"$.tools[{ti}].parameters",
                   f"schema of tool '{call.name}' cannot be applied ({_short(str(exc) or type(exc).__name__)}): "
                   "fix it, calls to it go unchecked", {})
            continue
        if error is not None:
            at, message = error
            yield ("arguments_schema", where, block_path(*where) + ".arguments" + at[1:],
                   f"arguments of '{call.name}' break its schema at {at}: {_short(message)}: fix the "
                   "arguments (or the schema)", {})


def _arguments_error(schema_digest: bytes | None, validator: Any, arguments: dict) -> tuple[str, str] | None:
    """(JSON path, message) of the most relevant error, or None. Logged agent sessions repeat the same
    calls many times over: answers are kept, by schema and arguments (as JSON, key order kept, which can
    change the message), up to _ANSWERS_MAX of them, oldest out first."""
    if schema_digest is None:
        return _first_error(validator, arguments)
    try:
        args_key = jsonpolicy.dumps(arguments)
    except TypeError:  # not plain JSON data (a huge int): checked every time
        return _first_error(validator, arguments)
    if len(args_key) > _ARGUMENTS_MAX:
        return _first_error(validator, arguments)
    key = (schema_digest, args_key)
    answer = _ANSWERS.get(key, _UNKNOWN)
    if answer is _UNKNOWN:
        answer = _first_error(validator, arguments)
        _ANSWERS[key] = answer
        if len(_ANSWERS) > _ANSWERS_MAX:
            _ANSWERS.pop(next(iter(_ANSWERS)), None)
    return answer


_ANSWERS: dict[tuple[bytes, bytes], Any] = {}
_ANSWERS_MAX = 8192
_ARGUMENTS_MAX = 4096  # bytes of arguments JSON; larger ones are checked every time
_UNKNOWN = object()


def _first_error(validator: Any, instance: Any) -> tuple[str, str] | None:
    from jsonschema.exceptions import best_match
    error = best_match(validator.iter_errors(instance))
    return None if error is None else (error.json_path, error.message)


def compiled(schema: Any) -> tuple[bytes | None, Any, str | None]:
    """(cache key, validator, None) or (cache key, None, what is wrong). Schemas repeat across a dataset:
    cached by content, the key being canonical JSON (None when the schema is not plain JSON data)."""
    try:
        key = jsonpolicy.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return (None, *_compile(schema))
    return (key, *_compile_cached(key))


def _schema_entries(schemas: list) -> list[tuple[bytes | None, Any, str | None]]:
    """`_schema_entry` of each schema; a log's conversations share one tool list, so the whole list
    is looked up first, by its JSON."""
    try:
        raw = jsonpolicy.dumps(schemas)
    except TypeError:
        return [_schema_entry(schema) for schema in schemas]
    entries = _TOOL_SETS.get(raw)
    if entries is None:
        entries = _TOOL_SETS[raw] = [_schema_entry(schema) for schema in schemas]
        if len(_TOOL_SETS) > _TOOL_SETS_MAX:
            _TOOL_SETS.pop(next(iter(_TOOL_SETS)), None)
    return entries


def _schema_entry(schema: Any) -> tuple[bytes | None, Any, str | None]:
    """(digest of the canonical key, validator, problem), as `compiled`. Every conversation of a log
    carries the same tool list: looked up by the schema's JSON in its own key order, which is cheaper to
    write than the sorted key, and the same bytes mean the same schema."""
    try:
        raw = jsonpolicy.dumps(schema)
    except TypeError:
        return (None, *_compile(schema))
    entry = _ENTRIES.get(raw)
    if entry is None:
        key, validator, problem = compiled(schema)
        entry = (None if key is None else hashlib.blake2b(key, digest_size=16).digest(), validator, problem)
        _ENTRIES[raw] = entry
        if len(_ENTRIES) > _ENTRIES_MAX:
            _ENTRIES.pop(next(iter(_ENTRIES)), None)
    return entry


_ENTRIES: dict[bytes, tuple[bytes | None, Any, str | None]] = {}
_TOOL_SETS: dict[bytes, list[tuple[bytes | None, Any, str | None]]] = {}
_ENTRIES_MAX = 1024
_TOOL_SETS_MAX = 256  # keys are whole schema lists: kept fewer


@lru_cache(maxsize=1024)
def _compile_cached(key: bytes) -> tuple[Any, str | None]:
    return _compile(jsonpolicy.loads(key))


def _compile(schema: Any) -> tuple[Any, str | None]:
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, (dict, bool)):
        return None, f"a schema is an object, got {type(schema).__name__}"
    schema = _openapi_types(schema)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unknown $schema falls back to 2020-12 with a warning
            cls = validators.validator_for(schema, default=Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema), None
    except SchemaError as exc:
        where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        return None, _short(f"{where or 'root'}: {exc.message}")
    except Exception as exc:  # noqa: BLE001  any other failure of the library means the same: unusable
        return None, _short(str(exc) or type(exc).__name__)


_OPENAPI_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}


def _openapi_types(schema: Any) -> Any:
    """Gemini writes OpenAPI-style schemas (`"type": "OBJECT"`, `nullable`): lower-case a copy so a JSON
    Schema validator reads them as meant. Other schemas come back as they are."""
    if not _has_openapi_types(schema):
        return schema

    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: fix(v) for k, v in node.items()}
        kind = node.get("type")
        if isinstance(kind, str) and kind in _OPENAPI_TYPES:
            out["type"] = [kind.lower(), "null"] if node.get("nullable") is True else kind.lower()
        return out

    return fix(schema)


def _has_openapi_types(node: Any) -> bool:
    if isinstance(node, dict):
        kind = node.get("type")
        return (isinstance(kind, str) and kind in _OPENAPI_TYPES) or any(_has_openapi_types(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_openapi_types(v) for v in node)
    return False


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --- provider replay rules -----------------------------------------------------------------------

def provider_rules(ctx: Context) -> Iterator[Found]:
    match ctx.provider:
        case "anthropic":
            yield from _anthropic_blank_text(ctx)
            yield from _anthropic_results_first(ctx)
            yield from _anthropic_thinking_first(ctx)
        case "gemini":
            yield from _gemini_response_turn(ctx)
            yield from _gemini_call_signature(ctx)
        case "openai-chat":
            yield from _openai_chat_tool_order(ctx)
        case _:
            return


def _blank(block: Any) -> bool:
    return isinstance(block, Text) and not block.text.strip()


def _anthropic_blank_text(ctx: Context) -> Iterator[Found]:
    for mi, message in enumerate(ctx.conv.messages):
        for bi, block in enumerate(message.blocks):
            if _blank(block) and message.blocks:
                # A message that is nothing but blank text is already an empty turn (or a blank prompt).
                if len(message.blocks) == 1 and message.role == "assistant":
                    continue
                yield ("anthropic_blank_text", (mi, bi), block_path(mi, bi),
                       "text block is empty or whitespace only; Anthropic rejects it on replay: drop the block", {})


def _anthropic_results_first(ctx: Context) -> Iterator[Found]:
    for mi, message in enumerate(ctx.conv.messages):
        if message.role == "assistant":
            continue
        other_seen = False
        for bi, block in enumerate(message.blocks):
            if isinstance(block, ToolResult):
                if other_seen:
                    yield ("anthropic_results_first", (mi, bi), block_path(mi, bi),
                           "tool_result comes after other content in its user message; Anthropic requires "
                           "tool_result blocks first: move the text or images after them", {})
                    break
            else:
                other_seen = True


def _assistant_turns(ctx: Context) -> Iterator[tuple[int, int]]:
    """(first, end) message indexes of each run of assistant messages."""
    n = len(ctx.conv.messages)
    mi = 0
    while mi < n:
        if ctx.conv.messages[mi].role == "assistant":
            yield mi, ctx.turn_end[mi]
            mi = ctx.turn_end[mi]
        else:
            mi += 1


def _turn_blocks(ctx: Context, first: int, end: int) -> list[tuple[Where, Any]]:
    return [((mi, bi), b) for mi in range(first, end) for bi, b in enumerate(ctx.conv.messages[mi].blocks)]


def _anthropic_thinking_first(ctx: Context) -> Iterator[Found]:
    thinking = (ctx.conv.extras.get("anthropic") or {}).get("thinking")
    # Only "enabled" obliges: with "adaptive" the model may choose not to think.
    enabled = isinstance(thinking, dict) and thinking.get("type") == "enabled"
    n = len(ctx.conv.messages)
    tool_turns = []
    for first, end in _assistant_turns(ctx):
        blocks = _turn_blocks(ctx, first, end)
        if any(isinstance(b, ToolCall) for _, b in blocks):
            tool_turns.append((first, end, blocks))
    for i, (first, end, blocks) in enumerate(tool_turns):
        has_reasoning = any(isinstance(b, Reasoning) for _, b in blocks)
        shown = [(w, b) for w, b in blocks if not _blank(b)]  # blank text has its own code
        if has_reasoning and not isinstance(shown[0][1], Reasoning):
            where = shown[0][0]
            yield ("anthropic_thinking_first", where, block_path(*where),
                   "thinking is not the first block of this tool-using assistant turn: move the thinking "
                   "block(s) before text and tool_use", {})
        elif not has_reasoning and enabled and i == len(tool_turns) - 1 and end < n:
            # The API checks the last assistant turn of a tool loop: replaying it without thinking fails.
            where = blocks[0][0] if blocks else (first, 0)
            yield ("anthropic_thinking_first", where, block_path(*where),
                   "thinking is enabled but the last tool-using assistant turn has no thinking block: "
                   "restore it from the log, or drop the thinking setting", {})


def _gemini_response_turn(ctx: Context) -> Iterator[Found]:
    messages = ctx.conv.messages
    n = len(messages)
    for first, end in _assistant_turns(ctx):
        calls = [(w, b) for w, b in _turn_blocks(ctx, first, end) if isinstance(b, ToolCall) and b.kind != "hosted"]
        if not calls or end >= n:
            continue
        answering = sum(isinstance(b, ToolResult) for b in messages[end].blocks)
        if answering != len(calls):
            where = calls[0][0]
            yield ("gemini_response_turn", where, block_path(*where),
                   f"{len(calls)} function call(s) but the next turn holds {answering} function response(s); "
                   "Gemini wants one response per call in the user turn right after: regroup the responses", {})


def _signed(block: Any) -> bool:
    return bool(getattr(block, "signature", None))


def _gemini_call_signature(ctx: Context) -> Iterator[Found]:
    messages = ctx.conv.messages
    uses_signatures = any(_signed(b) for m in messages for b in m.blocks
                          if isinstance(b, (ToolCall, Text, Reasoning)))
    if not uses_signatures:
        return
    # The API checks the current turn only: the steps after the last user message that is not all results.
    start = 0
    for mi, message in enumerate(messages):
        if message.role == "user" and any(isinstance(b, (Text, Media)) for b in message.blocks):
            start = mi + 1
    for mi in range(start, len(messages)):
        if messages[mi].role != "assistant":
            continue
        calls = [(bi, b) for bi, b in enumerate(messages[mi].blocks) if isinstance(b, ToolCall)]
        if not calls or _signed(calls[0][1]):
            continue
        bi, call = calls[0]
        later = any(_signed(b) for _, b in calls[1:])
        why = "a later parallel call carries it, so the calls were reordered" if later else "it was dropped"
        yield ("gemini_call_signature", (mi, bi), block_path(mi, bi),
               f"first function call '{call.name}' of this step has no thoughtSignature ({why}): keep the "
               "signature on the call the model returned first", {})


def _openai_chat_tool_order(ctx: Context) -> Iterator[Found]:
    messages = ctx.conv.messages
    # Linear in messages and blocks: the message before each run of tool messages, and the call ids of
    # each assistant message, found once (100,000 parallel calls in one turn are seconds, not hours).
    before: list[int] = []
    last = -1
    for i, message in enumerate(messages):
        before.append(last)
        if message.role != "tool":
            last = i
    call_ids: dict[int, set[str]] = {}
    for where, result in ctx.results:
        mi = where[0]
        if messages[mi].role != "tool" or result.call_id is None or result.call_id not in ctx.calls:
            continue  # misplaced or orphan results have their own codes
        back = before[mi]
        if back >= 0 and messages[back].role == "assistant":
            if back not in call_ids:
                call_ids[back] = {b.id for b in messages[back].blocks if block_kind(b) is ToolCall}
            if result.call_id in call_ids[back]:
                continue
        call_at = ctx.calls[result.call_id][0]
        yield ("openai_chat_tool_order", where, block_path(*where),
               f"tool message answers the call at {block_path(*call_at)} but does not directly follow its "
               "assistant message: move it up, before any other message", {})


# --- provider paths ------------------------------------------------------------------------------

def provider_path(conv: Conversation, where: Where) -> str | None:
    """The JSON path of the same place in the provider's record, where the codec's layout makes it
    derivable (Anthropic and Gemini keep messages and blocks one to one; OpenAI Chat keeps messages one
    to one after the leading instructions); None otherwise."""
    mi, bi = where
    provider, shape = conv.meta.provider, conv.meta.shape
    if mi < 0:
        return f"$.tools[{bi}]" if provider == "anthropic" and shape == "request" and bi >= 0 else None
    if mi >= len(conv.messages):
        return None
    message = conv.messages[mi]
    match provider:
        case "anthropic":
            base = {"request": f"$.messages[{mi}]", "messages": f"$[{mi}]", "response": "$"}.get(shape or "")
            if base is None or bi < 0:
                return base
            if (message.form.get(provider) or {}).get("content") == "str":
                return f"{base}.content"
            return f"{base}.content[{bi}]"
        case "gemini":
            base = {"request": f"$.contents[{mi}]", "messages": f"$[{mi}]",
                    "response": "$.candidates[0].content"}.get(shape or "")
            return base if base is None or bi < 0 else f"{base}.parts[{bi}]"
        case "openai-chat":
            form = conv.form.get(provider) or {}
            lead = form.get("lead")
            k = mi + (len(lead) if isinstance(lead, list) else bool(conv.system) + bool(conv.developer))
            base = {"request": f"$.messages[{k}]", "messages": f"$[{k}]",
                    "response": "$.choices[0].message"}.get(shape or "")
            if base is None or bi < 0 or bi >= len(message.blocks):
                return base
            block = message.blocks[bi]
            layout = {} if isinstance(block, Opaque) else (block.form.get(provider) or {})
            if isinstance(block, ToolCall):
                if layout.get("legacy"):
                    return f"{base}.function_call"
                calls = sum(isinstance(b, ToolCall) and not (b.form.get(provider) or {}).get("legacy")
                            for b in message.blocks[:bi])
                return f"{base}.tool_calls[{calls}]"
            if isinstance(block, Reasoning):
                if layout.get("part") == "thinking":
                    return f"{base}.content"
                return f"{base}.{(layout.get('keys') or ['reasoning_content'])[0]}"
            if isinstance(block, Text) and layout.get("field"):
                return f"{base}.refusal"
            if isinstance(block, (Text, Media)) and message.role != "tool":
                return f"{base}.content"
            return base
        case _:
            return None
