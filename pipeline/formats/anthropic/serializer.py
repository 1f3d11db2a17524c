"""Canonical -> Anthropic: request bodies (system, tools, model and max_tokens, other providers'
parameters), bare message lists and response objects; blocks and messages are written in `writer`."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from msgspec import UNSET
from msgspec.structs import replace

from ... import jsonpolicy
from ...conversation import (CUSTOM_INPUT, PROVIDERS, Conversation, Media, Message, Tool, ToolCall,
                             custom_input_schema)
from ...errors import ShapeError
from ...ledger import Ledger
from ..base import RESPONSE_FIELD, SHAPES, ledger_foreign_extras
from ..shared_params import foreign_model_reason, same_vendor
from .blocks import NAME
from .writer import BlockWriter, blocks_out, message_fields, plain_text, write_messages

_PLACEHOLDER_SCHEMA = {"type": "object", "properties": {}}
# Written (with a ledger entry) when a conversation of another origin does not say.
DEFAULT_MAX_TOKENS = 4096
DEFAULT_MODEL = "claude-sonnet-4-5"


def serialize(conv: Conversation, shape: str = "request", ledger: Ledger | None = None) -> Any:
    if ledger is None:
        ledger = Ledger(NAME)
    # Top-level parameters of other providers are mapped (or ledgered) by _foreign_params below; the
    # walk reports every other foreign field and Opaque block.
    ledger_foreign_extras(replace(conv, extras={}) if conv.extras else conv, NAME, ledger)
    writer = BlockWriter(ledger, same_origin=conv.meta.provider == NAME)
    match shape:
        case "request":
            return _request(conv, writer, ledger)
        case "messages":
            if conv.system or conv.developer:
                ledger.add("dropped", "$.system", "a bare message list has no place for system instructions")
            return write_messages(conv, writer, ledger)
        case "response":
            return _response(conv, writer, ledger)
        case _:
            raise ShapeError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}")


def _request(conv: Conversation, writer: BlockWriter, ledger: Ledger) -> dict:
    own = conv.extras.get(NAME)
    body: dict[str, Any] = dict(own) if own else {}
    if "model" not in body and conv.meta.model is not None:
        if same_vendor(conv.meta.provider, NAME):
            body["model"] = conv.meta.model
        elif not any("model" in values for values in conv.extras.values()):  # else ledgered with that field
            ledger.add("dropped", "$.meta.model", foreign_model_reason(conv.meta.model, conv.meta.provider, NAME))
    _foreign_params(conv.extras, body, ledger)
    if own is None:  # a conversation of another origin: fill what Anthropic requires
        if "model" not in body:
            body["model"] = DEFAULT_MODEL
            ledger.add("synthesized", "$", f"no model known; anthropic requires one: wrote {DEFAULT_MODEL}")
        if "max_tokens" not in body:
            body["max_tokens"] = DEFAULT_MAX_TOKENS
            ledger.add("synthesized", "$", f"anthropic requires max_tokens; wrote {DEFAULT_MAX_TOKENS}")
    form = conv.form.get(NAME) or {}
    if form.get("system") == "str" and not conv.developer and plain_text(conv.system):
        body["system"] = conv.system[0].text  # the string shorthand, even when empty
    else:
        system = _system(conv, writer, ledger)
        if system or "system" in form:
            body["system"] = system
    if conv.tools or "tools" in form:
        body["tools"] = [t for ti, tool in enumerate(conv.tools) if (t := _tool_out(tool, ti, ledger)) is not None]
    body["messages"] = write_messages(conv, writer, ledger)
    if own is None and not body["messages"] and body.get("system"):
        # Anthropic needs at least one message: instructions alone become the user's turn.
        body["messages"] = [{"role": "user", "content": body.pop("system")}]
        ledger.add("moved", "$.system", "a conversation of instructions only: sent as the user turn, "
                   "since anthropic requires at least one message")
    return body


def _system(conv: Conversation, writer: BlockWriter, ledger: Ledger) -> list[dict]:
    out: list[dict] = []
    for name, blocks in (("system", conv.system), ("developer", conv.developer)):
        for bi, block in enumerate(blocks):
            path = f"$.{name}[{bi}]"
            if isinstance(block, Media):
                ledger.add("dropped", path, "anthropic system prompts hold text only")
                continue
            if name == "developer":
                ledger.add("folded", path, "anthropic has no developer instructions: folded into system")
            if writer.keep_text(block, path):
                out.append(writer.text(block, path))
    return out


def _tool_out(tool: Tool, ti: int, ledger: Ledger) -> dict | None:
    path = f"$.tools[{ti}]"
    own = tool.extras.get(NAME) or {}
    form = tool.form.get(NAME) or {}
    match tool.kind:
        case "hosted":
            if not own:
                ledger.add("dropped", path, f"hosted tool '{tool.name}' of another provider has no anthropic equivalent")
                return None
            out = {} if form.get("name") == "absent" else {"name": tool.name}
            out.update(own)
            return out
        case "function" | "custom":
            if form.get("input_schema") == "builtin" and own.get("type") is not None:
                return {"name": tool.name, **own}  # a client tool of Anthropic's: its type gives the schema
            parameters = tool.parameters
            if tool.kind == "custom":
                ledger.add("folded", path, f"anthropic has no free-form tools: '{tool.name}' takes its text as "
                                           f"a string field '{CUSTOM_INPUT}'")
                parameters = custom_input_schema()
            elif parameters is UNSET:
                ledger.add("synthesized", path, "anthropic requires input_schema: wrote an empty object schema")
                parameters = _PLACEHOLDER_SCHEMA
            out = {"name": tool.name, "input_schema": parameters}
            if tool.description is not None or form.get("description") == "null":
                out["description"] = tool.description
            out.update(own)
            return out
        case _:
            raise AssertionError(tool.kind)


# --- other providers' request parameters -------------------------------------------------------------

def _foreign_params(extras: dict, body: dict, ledger: Ledger) -> None:
    """Map other providers' request parameters that have a clear Anthropic equivalent; ledger the rest.
    Parameters Anthropic already has (from its own extras) win."""
    for provider, values in extras.items():
        if provider == NAME or provider not in PROVIDERS:  # not a wire format's: where the log came from
            continue
        # parallel_tool_calls last: it amends the tool_choice mapped from the same provider.
        for key, value in sorted(values.items(), key=lambda kv: kv[0] == "parallel_tool_calls"):
            mapped = _map_param(provider, key, value, body, ledger)
            if not mapped:
                ledger.add("dropped", "$", f"{provider} field '{key}' is empty: nothing {NAME} could carry"
                           if value == {} else f"{provider} field '{key}' has no equivalent in {NAME}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _put(body: dict, key: str, value: Any) -> bool:
    body.setdefault(key, value)
    return True


def _map_param(provider: str, key: str, value: Any, body: dict, ledger: Ledger) -> bool:
    if key == "model" and isinstance(value, str):
        if same_vendor(provider, NAME):
            return _put(body, "model", value)
        ledger.add("dropped", "$", foreign_model_reason(value, provider, NAME))
        return True
    if key == "stream" and isinstance(value, bool):
        return _put(body, "stream", value)
    if provider in ("openai-chat", "openai-responses"):
        match key:
            case "max_tokens" | "max_completion_tokens" | "max_output_tokens" if _is_int(value):
                return _put(body, "max_tokens", value)
            case "temperature" if _is_number(value):
                return _temperature(value, body, ledger, f"{provider} field 'temperature'")
            case "top_p" if _is_number(value):
                return _put(body, "top_p", value)
            case "stop" if isinstance(value, str) or _is_strings(value):
                return _put(body, "stop_sequences", [value] if isinstance(value, str) else list(value))
            case "tool_choice":
                choice = _openai_tool_choice(value)
                return choice is not None and _tool_choice(body, choice)
            case "parallel_tool_calls" if isinstance(value, bool):
                choice = body.get("tool_choice") or {"type": "auto"}
                if not value and choice.get("type") != "none":
                    body["tool_choice"] = {**choice, "disable_parallel_tool_use": True}
                return True
        return False
    if provider == "gemini" and key in ("generationConfig", "generation_config") and isinstance(value, dict) and value:
        for sub, v in value.items():
            if not _gemini_generation(sub, v, body, ledger):
                ledger.add("dropped", "$", f"gemini field '{key}.{sub}' has no equivalent in {NAME}")
        return True
    if provider == "gemini" and key in ("toolConfig", "tool_config") and isinstance(value, dict):
        for sub, v in value.items():
            choice = _gemini_tool_choice(v) if sub in ("functionCallingConfig", "function_calling_config") else None
            if choice is None:
                ledger.add("dropped", "$", f"gemini field '{key}.{sub}' has no equivalent in {NAME}")
            else:
                _tool_choice(body, choice)
        return True
    return False


def _temperature(value: float, body: dict, ledger: Ledger, what: str) -> bool:
    clamped = min(max(value, 0), 1)
    if clamped != value:
        ledger.add("folded", "$", f"{what} {value} is outside anthropic's range 0-1: wrote {clamped}")
    return _put(body, "temperature", clamped)


def _gemini_generation(key: str, value: Any, body: dict, ledger: Ledger) -> bool:
    match key:
        case "maxOutputTokens" | "max_output_tokens" if _is_int(value):
            return _put(body, "max_tokens", value)
        case "temperature" if _is_number(value):
            return _temperature(value, body, ledger, "gemini field 'temperature'")
        case "topP" | "top_p" if _is_number(value):
            return _put(body, "top_p", value)
        case "topK" | "top_k" if _is_int(value):
            return _put(body, "top_k", value)
        case "stopSequences" | "stop_sequences" if _is_strings(value):
            return _put(body, "stop_sequences", list(value))
    return False


def _tool_choice(body: dict, choice: dict) -> bool:
    body.setdefault("tool_choice", choice)
    return True


def _openai_tool_choice(value: Any) -> dict | None:
    if isinstance(value, str):
        return {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}.get(value)
    if isinstance(value, dict) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else value.get("name")
        if isinstance(name, str):
            return {"type": "tool", "name": name}
    return None


def _gemini_tool_choice(config: Any) -> dict | None:
    if not isinstance(config, dict):
        return None
    mode = config.get("mode")
    if not isinstance(mode, str):
        return None
    names = config.get("allowedFunctionNames", config.get("allowed_function_names"))
    if mode == "ANY" and isinstance(names, list) and len(names) == 1 and isinstance(names[0], str):
        return {"type": "tool", "name": names[0]}
    if names:
        return None  # a subset of tools has no Anthropic equivalent
    return {"AUTO": {"type": "auto"}, "ANY": {"type": "any"}, "NONE": {"type": "none"}}.get(mode)


# --- response objects ------------------------------------------------------------------------------

_STOP_REASONS = frozenset({"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
                           "model_context_window_exceeded", "compaction"})
_FOREIGN_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                 "content_filter": "refusal", "STOP": "end_turn", "MAX_TOKENS": "max_tokens",
                 "SAFETY": "refusal", "completed": "end_turn"}
_USAGE_IN = {"prompt_tokens": "input_tokens", "promptTokenCount": "input_tokens", "input_tokens": "input_tokens",
             "completion_tokens": "output_tokens", "candidatesTokenCount": "output_tokens",
             "output_tokens": "output_tokens"}


def _response(conv: Conversation, writer: BlockWriter, ledger: Ledger) -> dict:
    last = max((i for i, m in enumerate(conv.messages) if m.role == "assistant"), default=None)
    for i in range(len(conv.messages)):
        if i != last:
            ledger.add("dropped", f"$.messages[{i}]", "a response object holds only the last assistant turn")
    if conv.system or conv.developer:
        ledger.add("dropped", "$.system", "a response object has no system instructions")
    if last is None:
        message, mi = Message(role="assistant"), 0
    else:
        message, mi = conv.messages[last], last
        message_fields(message, f"$.messages[{mi}]", ledger)
    content = blocks_out([(mi, bi, b) for bi, b in enumerate(message.blocks)], writer)
    meta = conv.meta
    # Unprefixed keys too: conversations stored before the prefix was used.
    own = {k.removeprefix(RESPONSE_FIELD): v for k, v in (message.extras.get(NAME) or {}).items()}
    own_meta = meta.provider == NAME  # stop reason and usage written by Anthropic itself
    body: dict[str, Any] = {"type": "message", "role": "assistant"}
    if meta.response_id is not None:
        body["id"] = meta.response_id
    elif "id" not in own:
        digest = hashlib.blake2b(jsonpolicy.dumps(content, option=orjson.OPT_SORT_KEYS), digest_size=12).hexdigest()
        body["id"] = f"msg_{digest}"
        ledger.add("synthesized", "$.meta.response_id", "response had no id; wrote one derived from its content")
    if meta.model is not None:
        body["model"] = meta.model
    elif "model" not in own:
        body["model"] = DEFAULT_MODEL
        ledger.add("synthesized", "$.meta.model", f"no model known; wrote {DEFAULT_MODEL}")
    body["content"] = content
    stop = meta.stop_reason
    # Anthropic's own stop reason is written as it came, even one newer than this list.
    if stop is not None and not own_meta:
        mapped = stop if stop in _STOP_REASONS else _FOREIGN_STOP.get(stop)
        if mapped == "end_turn" and any(isinstance(b, ToolCall) for b in message.blocks):
            mapped = "tool_use"
        if mapped is None:
            ledger.add("dropped", "$.meta.stop_reason", f"stop reason '{stop}' has no anthropic equivalent")
        stop = mapped
    if stop is None and "stop_reason" not in own:
        stop = "tool_use" if any(isinstance(b, ToolCall) for b in message.blocks) else "end_turn"
        ledger.add("synthesized", "$.meta.stop_reason", f"wrote stop_reason '{stop}' from the message content")
    if stop is not None:
        body["stop_reason"] = stop
    if (message.form.get(NAME) or {}).get("stop_sequence") != "absent":
        body["stop_sequence"] = None
    if meta.usage is not UNSET:
        body["usage"] = meta.usage if own_meta else _usage(meta.usage, ledger)
    body.update(own)
    return body


def _usage(usage: Any, ledger: Ledger) -> Any:
    if not isinstance(usage, dict):
        ledger.add("dropped", "$.meta.usage", "usage is not an object")
        return {}
    out: dict[str, Any] = {}
    for key, value in usage.items():
        target = _USAGE_IN.get(key)
        if target is not None and isinstance(value, int):
            out[target] = value
        else:
            ledger.add("dropped", "$.meta.usage", f"usage field '{key}' has no anthropic equivalent")
    return out
