"""OpenAI Chat Completions: request bodies, bare message lists and `chat.completion` response objects.

Layout hints that the canonical fields cannot express (content was a string or a list or null, a key
was present with null, the order of leading instruction messages) go to `form["openai-chat"]`, only
when they differ from what the serializer writes by default. Data without a canonical field goes to
`extras["openai-chat"]`; keys starting with `$` there are this codec's own containers (`$response`,
`$choice`, `$function`...), never wire keys of the same object.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, assert_never

import msgspec
import orjson
from msgspec import UNSET

from ..conversation import Conversation, Media, Message, Meta, Opaque, Reasoning, Text, Tool, ToolCall, ToolResult
from ..errors import ConversionError, ParseError
from ..ids import CallIds
from ..ledger import Ledger
from . import _openai_chat_blocks as blocks
from ._openai_chat_blocks import NAME, missing, opt_str, parse_part, req_dict, req_str, rest, wrong
from .base import SHAPES, CallIndex, Detection, ledger_foreign_extras

__all__ = ["NAME", "detect", "parse", "serialize"]

MAX_ID_LEN = 40  # OpenAI rejects longer tool call ids

# --- detect ---------------------------------------------------------------------------------------

# Top-level request keys only Chat Completions has (vs Anthropic Messages and Gemini).
_CHAT_ONLY_KEYS = frozenset((
    "max_completion_tokens", "n", "response_format", "stream_options", "reasoning_effort", "frequency_penalty",
    "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "seed", "parallel_tool_calls", "functions",
    "function_call", "modalities", "audio", "prediction", "web_search_options", "verbosity", "reasoning_format",
    "moderation", "store", "user", "prompt_cache_key", "safety_identifier",
))
# Top-level keys of the other request formats; Chat never has them.
_FOREIGN_KEYS = frozenset((
    "system", "contents", "input", "instructions", "anthropic_version", "stop_sequences", "top_k", "mcp_servers",
    "container", "context_management", "output_config", "generationConfig", "generation_config",
    "systemInstruction", "system_instruction", "toolConfig", "tool_config", "safetySettings", "safety_settings",
    "previous_response_id", "max_output_tokens", "thinking",
))
_CHAT_ONLY_MESSAGE_KEYS = ("tool_calls", "tool_call_id", "function_call", "refusal", "reasoning_content", "prefix")
_CHAT_PART_TYPES = frozenset(("image_url", "input_audio", "refusal"))
# Part types of Anthropic and Responses content: a list holding them is not Chat.
_FOREIGN_PART_TYPES = frozenset((
    "image", "document", "tool_use", "tool_result", "redacted_thinking", "server_tool_use", "search_result",
    "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result", "mcp_tool_use",
    "mcp_tool_result", "container_upload", "input_text", "output_text", "input_image", "input_file",
    "input_audio_file", "tool_reference", "tool_addition",
))


def detect(obj: Any) -> Detection | None:
    try:
        return _detect(obj)
    except Exception:  # detection is a guess over arbitrary JSON: never let it raise
        return None


def _detect(obj: Any) -> Detection | None:
    if isinstance(obj, list):
        found = _scan_messages(obj, in_request=False)
        if found is None or not obj:
            return None
        return Detection(NAME, "messages", found)
    if not isinstance(obj, dict):
        return None
    if obj.get("object") == "chat.completion":
        return Detection(NAME, "response", True)
    choices = obj.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
        return Detection(NAME, "response", True)
    messages = obj.get("messages")
    if not isinstance(messages, list):
        return None
    found = _scan_messages(messages, in_request=True)
    if found is None:
        return None
    tools = obj.get("tools")
    if isinstance(tools, list):
        for tool in tools:
            if isinstance(tool, dict):
                if "function" in tool or "custom" in tool:
                    found = True
                elif "name" in tool or "input_schema" in tool or "functionDeclarations" in tool \
                        or "function_declarations" in tool:
                    return None  # Anthropic, Responses and Gemini tools; Chat nests them under `function`
    if found:
        return Detection(NAME, "request", True)
    if any(key in obj for key in _FOREIGN_KEYS):
        return None
    return Detection(NAME, "request", any(key in obj for key in _CHAT_ONLY_KEYS))


def _scan_messages(messages: list, in_request: bool) -> bool | None:
    """None when some message is not a Chat message; else whether a Chat-only feature was seen."""
    certain = False
    for m in messages:
        if not isinstance(m, dict) or "type" in m or "parts" in m:
            return None
        role = m.get("role")
        # A mid-conversation `system` message is no proof: Anthropic accepts those too.
        if role == "tool" or role == "function" or (in_request and role == "developer"):
            certain = True
        elif role not in ("user", "assistant", "system", "developer"):
            return None
        if not certain:
            for key in _CHAT_ONLY_MESSAGE_KEYS:
                if key in m:
                    certain = True
                    break
        content = m.get("content")
        if isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                kind = part.get("type")
                if not isinstance(kind, str):
                    continue
                if kind in _CHAT_PART_TYPES or (kind == "file" and "file" in part):
                    certain = True
                elif kind in _FOREIGN_PART_TYPES or (kind == "thinking" and not isinstance(part.get("thinking"), list)):
                    return None
    return certain


# --- parse ----------------------------------------------------------------------------------------

_USER_KEYS = frozenset(("role", "content", "name", "weight"))
_ASSISTANT_KEYS = frozenset(("role", "content", "name", "weight", "tool_calls", "function_call", "refusal",
                             "audio", "reasoning_content", "reasoning"))
_TOOL_KEYS = frozenset(("role", "content", "tool_call_id", "name"))
_FUNCTION_KEYS = frozenset(("role", "content", "name"))
_CALL_KEYS = frozenset(("id", "type", "function", "custom"))
_CALL_FUNCTION_KEYS = frozenset(("name", "arguments"))
_CALL_CUSTOM_KEYS = frozenset(("name", "input"))
_LEGACY_NOTE = "legacy function_call/function messages: call ids synthesized, results matched by name and order"


class _Parser:
    __slots__ = ("strict", "ids", "index", "notes")

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.ids = CallIds()
        self.index = CallIndex()
        self.notes: list[str] = []

    # Messages -------------------------------------------------------------------------------------

    def message(self, m: Any, path: str) -> Message:
        if type(m) is not dict:
            raise wrong(path, "a message", "an object", m)
        role = m.get("role", UNSET)
        if role == "assistant":
            return self.assistant(m, path)
        if role == "user" or role == "system" or role == "developer":
            return self.plain(m, role, path)
        if role == "tool":
            return self.tool(m, path)
        if role == "function":
            return self.function(m, path)
        if role is UNSET:
            raise missing(path, "role")
        if type(role) is not str:
            raise wrong(f"{path}.role", "'role'", "a string", role)
        raise ParseError(f"unknown role '{role}' (expected system, developer, user, assistant, tool or function)",
                         path=f"{path}.role", code="unknown_role")

    def content(self, m: dict, path: str) -> tuple[list, str]:
        """The blocks of `content` and how it was written: string, list, null or absent."""
        content = m.get("content", UNSET)
        if type(content) is str:
            return ([Text(content)] if content else []), "string"
        if type(content) is list:
            cpath = f"{path}.content"
            strict = self.strict
            return [parse_part(part, f"{cpath}[{j}]", strict) for j, part in enumerate(content)], "list"
        if content is None:
            return [], "null"
        if content is UNSET:
            return [], "absent"
        raise wrong(f"{path}.content", "'content'", "a string, an array or null", content)

    def plain(self, m: dict, role: str, path: str) -> Message:
        found, mode = self.content(m, path)
        form: dict[str, Any] = {}
        if mode != _default_mode(found, role, False):
            form["content"] = mode
        name = opt_str(m, "name", path)
        weight = _weight(m, path)
        extras = _unknown(m, _USER_KEYS)
        _nulls(m, ("name", "weight"), form)
        return Message(role=role, blocks=tuple(found), name=name, weight=weight,
                       extras={NAME: extras} if extras else {}, form={NAME: form} if form else {})

    def assistant(self, m: dict, path: str) -> Message:
        out: list = []
        form: dict[str, Any] = {}
        reasoning = m.get("reasoning_content")
        alt = m.get("reasoning")
        if type(reasoning) is str:
            if type(alt) is str and alt == reasoning:
                out.append(Reasoning(text=reasoning, origin=NAME, form={NAME: {"keys": ["reasoning_content", "reasoning"]}}))
                alt = None
            else:
                out.append(Reasoning(text=reasoning, origin=NAME))
        elif reasoning is not None:
            raise wrong(f"{path}.reasoning_content", "'reasoning_content'", "a string", reasoning)
        if type(alt) is str:
            out.append(Reasoning(text=alt, origin=NAME, form={NAME: {"keys": ["reasoning"]}}))
        found, mode = self.content(m, path)
        out.extend(found)
        refusal = m.get("refusal")
        if type(refusal) is str:
            out.append(Text(refusal, extras={NAME: {"refusal": True}}, form={NAME: {"field": True}}))
        elif refusal is not None:
            raise wrong(f"{path}.refusal", "'refusal'", "a string", refusal)
        audio = m.get("audio")
        if type(audio) is dict:
            out.append(Opaque(provider=NAME, item_type="assistant.audio", payload=dict(audio)))
        elif audio is not None:
            raise wrong(f"{path}.audio", "'audio'", "an object", audio)
        calls = m.get("tool_calls")
        has_calls = False
        if type(calls) is list:
            cpath = f"{path}.tool_calls"
            for j, call in enumerate(calls):
                out.append(self.call(call, f"{cpath}[{j}]"))
            has_calls = bool(calls)
            if not calls:
                form["empty_calls"] = True
        elif calls is not None:
            raise wrong(f"{path}.tool_calls", "'tool_calls'", "an array", calls)
        legacy = m.get("function_call")
        if type(legacy) is dict:
            out.append(self.legacy_call(legacy, f"{path}.function_call"))
            has_calls = True
        elif legacy is not None:
            raise wrong(f"{path}.function_call", "'function_call'", "an object", legacy)
        if mode != _default_mode(found, "assistant", has_calls):
            form["content"] = mode
        name = opt_str(m, "name", path)
        weight = _weight(m, path)
        extras = _unknown(m, _ASSISTANT_KEYS)
        if type(m.get("reasoning")) not in (str, type(None)):
            extras = dict(extras or {}, reasoning=m["reasoning"])  # some servers send an object: keep it
        _nulls(m, ("refusal", "audio", "tool_calls", "function_call", "reasoning_content", "reasoning", "name",
                   "weight"), form)
        return Message(role="assistant", blocks=tuple(out), name=name, weight=weight,
                       extras={NAME: extras} if extras else {}, form={NAME: form} if form else {})

    def tool(self, m: dict, path: str) -> Message:
        provider_id = req_str(m, "tool_call_id", path)
        call_id = self.index.by_id(provider_id)
        result = self.result(m, path, call_id, provider_id, "id" if call_id is not None else None, "tool")
        extras = _unknown(m, _TOOL_KEYS)
        return Message(role="tool", blocks=(result,), extras={NAME: extras} if extras else {})

    def function(self, m: dict, path: str) -> Message:
        name = req_str(m, "name", path)
        call_id, ambiguous = self.index.by_name(name)
        if ambiguous and self.strict:
            raise ParseError(f"result of '{name}' matches several unanswered calls by name only",
                             path=path, code="ambiguous_pairing")
        self._note()
        result = self.result(m, path, call_id, None, "name_order" if call_id is not None else None, "function")
        extras = _unknown(m, _FUNCTION_KEYS)
        return Message(role="tool", blocks=(result,), extras={NAME: extras} if extras else {})

    def result(self, m: dict, path: str, call_id: str | None, provider_id: str | None, matched_by: Any,
               role: str) -> ToolResult:
        found, mode = self.content(m, path)
        for j, block in enumerate(found):
            if type(block) is not Text and type(block) is not Media:
                raise ParseError(f"a {role} message holds text parts only", path=f"{path}.content[{j}]",
                                 code="unknown_block")
        form: dict[str, Any] = {}
        if mode != _default_mode(found, "tool", False):
            form["content"] = mode
        name = m.get("name")
        if role == "tool":
            if name is not None:
                if type(name) is not str:
                    raise wrong(f"{path}.name", "'name'", "a string", name)
                form["name"] = True
            elif "name" in m:
                form["null"] = ["name"]
            elif call_id is not None:
                name = self.index.names.get(call_id)
        else:
            form["legacy"] = True
        return ToolResult(call_id=call_id, provider_id=provider_id, name=name, content=tuple(found),
                          matched_by=matched_by, form={NAME: form} if form else {})

    # Calls ------------------------------------------------------------------------------------------

    def call(self, call: Any, path: str) -> ToolCall | Opaque:
        if type(call) is not dict:
            raise wrong(path, "a tool call", "an object", call)
        kind = call.get("type", UNSET)
        form: dict[str, Any] = {}
        provider_id = call.get("id", UNSET)
        if provider_id is UNSET:
            form["no_id"] = True
            provider_id = None
        elif type(provider_id) is not str:
            raise wrong(f"{path}.id", "'id'", "a string", provider_id)
        extras = _unknown(call, _CALL_KEYS) or {}
        if kind == "function" or (kind is UNSET and "function" in call):
            if kind is UNSET:
                form["no_type"] = True
            fn = req_dict(call, "function", path)
            fpath = f"{path}.function"
            name = req_str(fn, "name", fpath)
            if "arguments" not in fn:
                raise missing(fpath, "arguments")
            raw = fn["arguments"]
            fn_rest = _unknown(fn, _CALL_FUNCTION_KEYS)
            if fn_rest:
                extras["$function"] = fn_rest
            return self._function_call(name, raw, f"{fpath}.arguments", provider_id, extras, form)
        if kind == "custom":
            custom = req_dict(call, "custom", path)
            cpath = f"{path}.custom"
            name = req_str(custom, "name", cpath)
            text = req_str(custom, "input", cpath)
            custom_rest = rest(custom, _CALL_CUSTOM_KEYS)
            if custom_rest:
                extras["$custom"] = custom_rest
            canonical = self.ids.new(name, text)
            self.index.add(canonical, name, provider_id)
            return ToolCall(id=canonical, name=name, arguments=text, provider_id=provider_id, kind="custom",
                            extras={NAME: extras} if extras else {}, form={NAME: form} if form else {})
        if kind is UNSET:
            raise missing(path, "type")
        if type(kind) is not str:
            raise wrong(f"{path}.type", "'type'", "a string", kind)
        if self.strict:
            raise ParseError(f"unknown tool call type '{kind}'", path=path, code="unknown_block")
        return Opaque(provider=NAME, item_type=kind, payload=dict(call), role_hint="call")

    def legacy_call(self, fc: dict, path: str) -> ToolCall:
        name = req_str(fc, "name", path)
        if "arguments" not in fc:
            raise missing(path, "arguments")
        extras = {"$function": rest(fc, _CALL_FUNCTION_KEYS)} if len(fc) > 2 else {}
        self._note()
        return self._function_call(name, fc["arguments"], f"{path}.arguments", None, extras, {"legacy": True})

    def _function_call(self, name: str, raw: Any, path: str, provider_id: str | None, extras: dict,
                       form: dict) -> ToolCall:
        if type(raw) is str:
            arguments, valid = _loads(raw)
            canonical = self.ids.new(name, arguments, raw_arguments=raw)
            call = ToolCall(id=canonical, name=name, arguments=arguments, raw_arguments=raw, arguments_valid=valid,
                            provider_id=provider_id, extras={NAME: extras} if extras else {},
                            form={NAME: form} if form else {})
        elif type(raw) is dict:
            # Some loggers store the parsed object; keep it and remember the layout.
            form["object_arguments"] = True
            canonical = self.ids.new(name, raw)
            call = ToolCall(id=canonical, name=name, arguments=dict(raw), provider_id=provider_id,
                            extras={NAME: extras} if extras else {}, form={NAME: form})
        else:
            raise wrong(path, "'arguments'", "a string", raw)
        self.index.add(canonical, name, provider_id)
        return call

    def _note(self) -> None:
        if not self.notes:
            self.notes.append(_LEGACY_NOTE)


_json = msgspec.json.Decoder()  # exact big integers, unlike orjson (which turns them into floats)


def _loads(raw: str) -> tuple[Any, bool]:
    try:
        return _json.decode(raw), True
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError):
        pass
    except RecursionError:
        return UNSET, False  # nested past any sane depth: the raw string stays the truth
    try:  # valid JSON that msgspec refuses, such as escaped lone surrogates
        return json.loads(raw, parse_constant=_reject_constant, parse_float=_finite), True
    except (ValueError, RecursionError):
        return UNSET, False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} overflows a double")
    return value


def _unknown(obj: dict, known: frozenset[str]) -> dict | None:
    """The keys a parser does not model, as a new dict; None (cheaply) when there are none."""
    if obj.keys() <= known:
        return None
    return {k: v for k, v in obj.items() if k not in known}


def _weight(m: dict, path: str) -> int | None:
    weight = m.get("weight")
    if weight is not None and type(weight) is not int:
        raise wrong(f"{path}.weight", "'weight'", "an integer", weight)
    return weight


def _nulls(m: dict, keys: tuple[str, ...], form: dict) -> None:
    """Remember optional keys written as null, so the round trip writes them again."""
    nulls = [k for k in keys if k in m and m[k] is None]
    if nulls:
        form["null"] = form.get("null", []) + nulls


def _default_mode(content: list | tuple, role: str, has_calls: bool) -> str:
    """How the serializer writes `content` (given the blocks or parts that go into it) when no form
    says otherwise: a lone plain text as a string, nothing as null beside calls, else a list."""
    if not content:
        return "null" if has_calls and role == "assistant" else "string"
    if len(content) == 1 and blocks.is_plain_text(content[0]):
        return "string"
    return "list"


def _default_lead(system: tuple, developer: tuple) -> list:
    lead = []
    if system:
        lead.append(["system", len(system), _default_mode(system, "system", False)])
    if developer:
        lead.append(["developer", len(developer), _default_mode(developer, "developer", False)])
    return lead


def parse(obj: Any, shape: str | None = None, strict: bool = False) -> Conversation:
    if shape is None:
        found = detect(obj)
        if found is None:
            raise ParseError("not an OpenAI Chat Completions request, message list or response", path="$",
                             code="unknown_shape")
        shape = found.shape
    if shape == "request":
        return _parse_request(obj, strict)
    if shape == "messages":
        if type(obj) is not list:
            raise wrong("$", "a message list", "an array", obj)
        return _parse_messages(obj, "$", strict, {}, Meta(provider=NAME, shape="messages"))
    if shape == "response":
        return _parse_response(obj, strict)
    raise ParseError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", path="$", code="unknown_shape")


_REQUEST_KEYS = frozenset(("messages", "tools", "functions"))


def _parse_request(obj: Any, strict: bool) -> Conversation:
    if type(obj) is not dict:
        raise wrong("$", "a request body", "an object", obj)
    messages = obj.get("messages", UNSET)
    if messages is UNSET:
        raise missing("$", "messages")
    if type(messages) is not list:
        raise wrong("$.messages", "'messages'", "an array", messages)
    tools: list[Tool] = []
    form: dict[str, Any] = {}
    for key, legacy in (("tools", False), ("functions", True)):
        value = obj.get(key, UNSET)
        if value is UNSET:
            continue
        if value is None:
            form.setdefault("null", []).append(key)
        elif type(value) is list:
            tools.extend(blocks.parse_tool(t, f"$.{key}[{i}]", legacy) for i, t in enumerate(value))
            if not value:
                form.setdefault("empty", []).append(key)
        else:
            raise wrong(f"$.{key}", f"'{key}'", "an array", value)
    params = rest(obj, _REQUEST_KEYS)
    model = params.get("model")
    meta = Meta(provider=NAME, shape="request", model=model if type(model) is str else None)
    conv = _parse_messages(messages, "$.messages", strict, form, meta, params)
    return msgspec.structs.replace(conv, tools=tuple(tools)) if tools else conv


def _parse_messages(messages: list, base: str, strict: bool, form: dict, meta: Meta,
                    params: dict | None = None) -> Conversation:
    parser = _Parser(strict)
    system: list = []
    developer: list = []
    lead: list = []
    start = 0
    # Leading plain instruction messages become conv.system / conv.developer; one with a name or
    # unknown keys stays a message, and so does everything after it.
    for m in messages:
        if type(m) is not dict or (m.get("role") != "system" and m.get("role") != "developer") \
                or not m.keys() <= {"role", "content"}:
            break
        found, mode = parser.content(m, f"{base}[{start}]")
        if any(type(b) is not Text for b in found):
            break
        (system if m["role"] == "system" else developer).extend(found)
        lead.append([m["role"], len(found), mode])
        start += 1
    if lead != _default_lead(tuple(system), tuple(developer)):
        form["lead"] = lead
    out = [parser.message(m, f"{base}[{i}]") for i, m in enumerate(messages[start:], start)]
    if parser.notes:
        meta = msgspec.structs.replace(meta, notes=tuple(parser.notes))
    return Conversation(messages=tuple(out), system=tuple(system), developer=tuple(developer), meta=meta,
                        extras={NAME: params} if params else {}, form={NAME: form} if form else {})


def _parse_response(obj: Any, strict: bool) -> Conversation:
    if type(obj) is not dict:
        raise wrong("$", "a response", "an object", obj)
    choices = obj.get("choices", UNSET)
    if choices is UNSET:
        raise missing("$", "choices")
    if type(choices) is not list:
        raise wrong("$.choices", "'choices'", "an array", choices)
    response = rest(obj, frozenset(("choices",)))
    extras: dict[str, Any] = {"$response": response}
    messages: tuple = ()
    stop_reason = None
    notes: tuple = ()
    if choices:
        choice = choices[0]
        if type(choice) is not dict:
            raise wrong("$.choices[0]", "a choice", "an object", choice)
        message = req_dict(choice, "message", "$.choices[0]")
        parser = _Parser(strict)
        messages = (parser.assistant(message, "$.choices[0].message"),)
        notes = tuple(parser.notes)
        extras["$choice"] = rest(choice, frozenset(("message",)))
        reason = choice.get("finish_reason")
        stop_reason = reason if type(reason) is str else None
        if len(choices) > 1:
            extras["$more_choices"] = list(choices[1:])
    model, rid, usage = obj.get("model"), obj.get("id"), obj.get("usage", UNSET)
    meta = Meta(provider=NAME, shape="response", model=model if type(model) is str else None,
                response_id=rid if type(rid) is str else None, created=_iso(obj.get("created")),
                stop_reason=stop_reason, usage=usage if usage is not None else UNSET, notes=notes)
    return Conversation(messages=messages, meta=meta, extras={NAME: extras})


def _iso(created: Any) -> str | None:
    if type(created) is not int:
        return None
    try:
        return datetime.fromtimestamp(created, timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


# --- serialize ------------------------------------------------------------------------------------

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
           "pause_turn": "stop", "refusal": "content_filter", "STOP": "stop", "MAX_TOKENS": "length",
           "SAFETY": "content_filter", "RECITATION": "content_filter", "completed": "stop",
           "incomplete": "length", "stop": "stop", "length": "length", "tool_calls": "tool_calls",
           "content_filter": "content_filter", "function_call": "function_call"}


class _Writer:
    """Writes canonical messages as Chat messages, collecting ledger entries."""

    def __init__(self, conv: Conversation, ledger: Ledger, shape: str) -> None:
        self.conv = conv
        self.ledger = ledger
        self.verbatim_ids = shape == "response"
        self.same_format = conv.meta.provider == NAME
        self.out: list[dict] = []
        self.emitted: dict[str, str] = {}  # canonical call id -> id written on the call
        self.legacy_calls: set[str] = set()
        self.moved: list[dict] = []  # media parts of tool results, waiting for the next user message

    def emit(self, message: dict) -> None:
        if self.moved and message["role"] != "tool" and message["role"] != "function":
            self.flush()
        self.out.append(message)

    def flush(self) -> None:
        if self.moved:
            self.out.append({"role": "user", "content": self.moved})
            self.moved = []

    # Instructions and messages --------------------------------------------------------------------

    def instructions(self) -> None:
        conv = self.conv
        lead = (conv.form.get(NAME) or {}).get("lead")
        if lead is None or not _lead_fits(lead, conv.system, conv.developer):
            lead = _default_lead(conv.system, conv.developer)
        taken = {"system": 0, "developer": 0}
        for role, count, mode in lead:
            source = conv.system if role == "system" else conv.developer
            first = taken[role]
            taken[role] = first + count
            parts = []
            for i in range(first, first + count):
                block = source[i]
                path = f"$.{role}[{i}]"
                if type(block) is Text:
                    parts.append(block)
                    if block.signature is not None:
                        self.ledger.add("dropped", path, "signature on instruction text has no place in Chat")
                else:
                    self.ledger.add("dropped", path, f"{block.kind} in {role} instructions: Chat {role} messages hold text only")
            content = _content(parts, mode)
            self.emit({"role": role, "content": content} if content is not UNSET else {"role": role})

    def messages(self) -> list[dict]:
        self.instructions()
        for mi, message in enumerate(self.conv.messages):
            if message.role == "assistant":
                self.emit_assistant(mi, message)
            else:
                self.emit_plain(mi, message)
        self.flush()
        return self.out

    def emit_plain(self, mi: int, message: Message) -> None:
        """user, system, developer and tool messages: results become tool messages, the rest one
        message of the same role (user for a canonical tool message)."""
        role = message.role
        own_form = message.form.get(NAME) or {}
        parts: list = []
        results = 0
        ledger = self.ledger
        text_only = (role == "system" or role == "developer") and not self.same_format
        for bi, block in enumerate(message.blocks):
            path = f"$.messages[{mi}].blocks[{bi}]"
            match block:
                case Text():
                    parts.append(block)
                    if block.signature is not None:
                        ledger.add("dropped", path, "text signature has no place in Chat Completions")
                case Media():
                    if text_only:
                        ledger.add("dropped", path, f"{block.kind} in a {role} message: Chat {role} messages hold text only")
                        continue
                    part = blocks.media_part(block, path, ledger, self.same_format)
                    if part is not None:
                        parts.append(part)
                case ToolResult():
                    if parts:
                        ledger.add("reordered", path, "tool result written before the content that preceded it: "
                                   "Chat tool messages must directly follow the calls")
                    self.emit_result(mi, bi, block, message)
                    results += 1
                case ToolCall():
                    ledger.add("dropped", path, f"tool call in a {role} message: Chat carries calls on assistant messages only")
                case Reasoning():
                    if block.origin == NAME and (block.form.get(NAME) or {}).get("part") == "thinking":
                        parts.append(blocks.thinking_part(block))
                    else:
                        ledger.add("dropped", path, f"reasoning in a {role} message has no place in Chat Completions")
                case Opaque():
                    if block.provider == NAME:
                        parts.append(dict(block.payload) if type(block.payload) is dict else block.payload)
                case _:
                    assert_never(block)
        if results and not parts:
            return
        if role == "tool":
            if parts:
                ledger.add("moved", f"$.messages[{mi}]", "content beside tool results written as a user message")
            role = "user"
        out: dict[str, Any] = {"role": role}
        mode = own_form.get("content") or _default_mode(parts, role, False)
        content = _content(parts, mode)
        if content is not UNSET:
            out["content"] = content
        self._message_fields(message, out, own_form)
        self.emit(out)

    def emit_assistant(self, mi: int, message: Message) -> None:
        own_form = message.form.get(NAME) or {}
        ledger = self.ledger
        parts: list = []
        out: dict[str, Any] = {"role": "assistant"}
        calls: list = []
        results: list = []
        seen_call = False
        for bi, block in enumerate(message.blocks):
            path = f"$.messages[{mi}].blocks[{bi}]"
            match block:
                case Text():
                    if block.signature is not None:
                        ledger.add("dropped", path, "text signature has no place in Chat Completions")
                    if (block.form.get(NAME) or {}).get("field") and "refusal" not in out:
                        out["refusal"] = block.text
                        continue
                    if seen_call:
                        ledger.add("reordered", path, "text after a tool call written before the calls: "
                                   "Chat has one content before its tool_calls")
                    parts.append(block)
                case ToolCall():
                    calls.append((bi, block))
                    seen_call = True
                case Reasoning():
                    self.reasoning(block, path, parts, out, seen_call)
                case Opaque():
                    if block.provider != NAME:
                        continue  # ledgered by the foreign-extras walk
                    if block.item_type == "assistant.audio":
                        out["audio"] = block.payload
                    elif block.role_hint == "call":
                        calls.append((bi, block))
                        seen_call = True
                    else:
                        parts.append(block.payload)
                case Media():
                    ledger.add("dropped", path, f"{block.kind} in an assistant message: Chat assistant content holds text only")
                case ToolResult():
                    results.append((bi, block))
                case _:
                    assert_never(block)
        if calls:
            self.write_calls(mi, calls, out, own_form)
        elif own_form.get("empty_calls"):
            out["tool_calls"] = []
        has_calls = "tool_calls" in out or "function_call" in out
        mode = own_form.get("content") or _default_mode(parts, "assistant", has_calls)
        content = _content(parts, mode)
        if content is not UNSET:
            out["content"] = content
        self._message_fields(message, out, own_form)
        self.emit(out)
        for bi, block in results:
            ledger.add("moved", f"$.messages[{mi}].blocks[{bi}]", "tool result in an assistant message written as a tool message after it")
            self.emit_result(mi, bi, block, message)

    def reasoning(self, block: Reasoning, path: str, parts: list, out: dict, late: bool) -> None:
        if block.origin != NAME:
            what = [name for name, value in (("text", block.text), ("summary", block.summary),
                                              ("signature", block.signature), ("redacted data", block.redacted),
                                              ("encrypted content", block.encrypted), ("item id", block.item_id))
                    if value]
            self.ledger.add("dropped", path, f"{block.origin or 'unknown'} reasoning ({', '.join(what) or 'empty'}) "
                            "has no place in Chat Completions requests")
            return
        form = block.form.get(NAME) or {}
        if form.get("part") == "thinking":
            parts.append(blocks.thinking_part(block))
            return
        if late or parts:
            self.ledger.add("reordered", path, "reasoning written as a message field, before the content")
        for key in form.get("keys", ("reasoning_content",)):
            out[key] = block.text

    def write_calls(self, mi: int, calls: list, out: dict, own_form: dict) -> None:
        ledger = self.ledger
        if len(calls) == 1 and type(calls[0][1]) is ToolCall and (calls[0][1].form.get(NAME) or {}).get("legacy"):
            bi, call = calls[0]
            fn = {"name": call.name, "arguments": self.arguments(call, f"$.messages[{mi}].blocks[{bi}]")}
            fn.update((call.extras.get(NAME) or {}).get("$function") or {})
            out["function_call"] = fn
            self.legacy_calls.add(call.id)
            return
        written = []
        for bi, call in calls:
            path = f"$.messages[{mi}].blocks[{bi}]"
            if type(call) is Opaque:
                written.append(dict(call.payload) if type(call.payload) is dict else call.payload)
                continue
            own = call.extras.get(NAME) or {}
            form = call.form.get(NAME) or {}
            if call.signature is not None:
                ledger.add("dropped", path, "thought signature on the call has no place in Chat Completions")
            if call.kind == "hosted":
                ledger.add("dropped", path, f"hosted tool call '{call.name}' has no equivalent in Chat Completions")
                continue
            item: dict[str, Any] = {}
            if not form.get("no_id"):
                item["id"] = self.call_id(call, path)
            else:
                self.emitted[call.id] = call.provider_id or call.id
            if call.kind == "custom":
                item["type"] = "custom"
                if type(call.arguments) is str:
                    text = call.arguments
                else:
                    text = self.arguments(call, path)
                    ledger.add("folded", path, "custom tool input was not text: written as JSON text")
                custom = {"name": call.name, "input": text}
                custom.update(own.get("$custom") or {})
                item["custom"] = custom
            else:
                if not form.get("no_type"):
                    item["type"] = "function"
                fn = {"name": call.name, "arguments": self.arguments(call, path)}
                fn.update(own.get("$function") or {})
                item["function"] = fn
            item.update((k, v) for k, v in own.items() if k[0] != "$")
            written.append(item)
        if written or own_form.get("empty_calls"):
            out["tool_calls"] = written

    def arguments(self, call: ToolCall, path: str) -> Any:
        raw = call.raw_arguments
        if raw is not None:
            if not call.arguments_valid:
                return raw  # the string is the truth; Chat carries strings as they are
            if _loads(raw)[0] == call.arguments:
                return raw
        if call.arguments is UNSET:
            self.ledger.add("synthesized", path, "call without arguments: wrote '{}'")
            return "{}"
        if (call.form.get(NAME) or {}).get("object_arguments"):
            return call.arguments
        try:
            return orjson.dumps(call.arguments).decode()
        except TypeError:
            return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))

    def call_id(self, call: ToolCall, path: str) -> str:
        pid = call.provider_id
        if pid is not None and (self.verbatim_ids or 0 < len(pid) <= MAX_ID_LEN):
            written = pid
        elif pid is None:
            self.ledger.add("synthesized", path, "call without a provider id: wrote its canonical id")
            written = call.id
        else:
            self.ledger.add("synthesized", path, f"call id '{pid}' is not a valid Chat id (1 to {MAX_ID_LEN} "
                            "characters): wrote the canonical id")
            written = call.id
        self.emitted[call.id] = written
        return written

    def result_id(self, result: ToolResult, path: str) -> str:
        if result.call_id is not None and result.call_id in self.emitted:
            return self.emitted[result.call_id]
        pid = result.provider_id
        if pid is not None and 0 < len(pid) <= MAX_ID_LEN:
            return pid
        if result.call_id is not None:
            if pid is not None:
                self.ledger.add("synthesized", path, f"result id '{pid}' is not a valid Chat id: wrote the canonical id")
            return result.call_id
        self.ledger.add("synthesized", path, "result of no known call and without an id: wrote a placeholder id")
        return "call_" + hashlib.blake2b(path.encode(), digest_size=12).hexdigest()

    def emit_result(self, mi: int, bi: int, result: ToolResult, message: Message) -> None:
        ledger = self.ledger
        path = f"$.messages[{mi}].blocks[{bi}]"
        form = result.form.get(NAME) or {}
        legacy = form.get("legacy") and (result.call_id is None or result.call_id in self.legacy_calls)
        parts: list = []
        for ci, item in enumerate(result.content):
            cpath = f"{path}.content[{ci}]"
            if type(item) is Text:
                parts.append(item)
                continue
            part = blocks.media_part(item, cpath, ledger, self.same_format)
            if part is None:
                continue
            if part["type"] == "text":
                parts.append(Text(part["text"]))
                continue
            ledger.add("moved", cpath, f"{item.kind} returned by a tool moved to a following user message: "
                       "Chat tool messages hold text only")
            self.moved.append(part)
        if result.output is not UNSET:
            try:
                text = orjson.dumps(result.output).decode()
            except TypeError:
                text = json.dumps(result.output, ensure_ascii=False)
            parts.append(Text(text))
            ledger.add("folded", path, "structured tool output written as JSON text")
        if result.is_error:
            ledger.add("folded", path, "is_error has no field in Chat Completions: folded into the text as 'Error: '")
            if parts and type(parts[0]) is Text:
                parts[0] = Text("Error: " + parts[0].text, extras=parts[0].extras)
            else:
                parts.insert(0, Text("Error:"))
        if result.signature is not None:
            ledger.add("dropped", path, "signature on the tool result has no place in Chat Completions")
        mode = form.get("content") or _default_mode(parts, "tool", False)
        out: dict[str, Any]
        if legacy:
            out = {"role": "function", "name": result.name or ""}
        else:
            out = {"role": "tool", "tool_call_id": self.result_id(result, path)}
            if form.get("name"):
                out["name"] = result.name
        for key in form.get("null", ()):
            out[key] = None
        content = _content(parts, mode)
        if content is not UNSET:
            out["content"] = content
        if len(message.blocks) == 1:
            out.update(message.extras.get(NAME) or {})
        self.emit(out)

    def _message_fields(self, message: Message, out: dict, own_form: dict) -> None:
        if message.name is not None:
            out["name"] = message.name
        if message.weight is not None:
            out["weight"] = message.weight
        for key in own_form.get("null", ()):
            out.setdefault(key, None)
        own = message.extras.get(NAME)
        if own:
            out.update(own)


def _lead_fits(lead: Any, system: tuple, developer: tuple) -> bool:
    counts = {"system": 0, "developer": 0}
    for role, count, _ in lead:
        counts[role] += count
    return counts["system"] == len(system) and counts["developer"] == len(developer)


def _content(parts: list, mode: str) -> Any:
    """`content` from Text blocks and ready part dicts, in the layout asked for when it still fits."""
    if not parts:
        if mode == "null":
            return None
        if mode == "absent":
            return UNSET
        if mode == "list":
            return []
        return ""
    if mode == "string" and len(parts) == 1 and blocks.is_plain_text(parts[0]):
        return parts[0].text
    return [blocks.text_part(p) if type(p) is Text else p for p in parts]


def serialize(conv: Conversation, shape: str = "request", ledger: Ledger | None = None) -> Any:
    if ledger is None:
        ledger = Ledger(NAME)
    if shape not in SHAPES:
        raise ConversionError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", code="unknown_shape")
    mapped: dict[str, Any] = {}
    walk = conv
    if shape == "request" and any(p != NAME for p in conv.extras):
        mapped, used = blocks.map_foreign_params(conv.extras)
        if used:
            kept = {p: {k: v for k, v in values.items() if k not in used.get(p, ())} for p, values in conv.extras.items()}
            walk = msgspec.structs.replace(conv, extras={p: v for p, v in kept.items() if v})
    ledger_foreign_extras(walk, NAME, ledger)
    writer = _Writer(conv, ledger, shape)
    if shape == "response":
        return _write_response(conv, writer, ledger)
    messages = writer.messages()
    own = conv.extras.get(NAME) or {}
    if shape == "messages":
        for key in own:
            ledger.add("dropped", "$", f"request parameter '{key}' has no place in a bare message list")
        for ti in range(len(conv.tools)):
            ledger.add("dropped", f"$.tools[{ti}]", "tool definitions have no place in a bare message list")
        return messages
    body: dict[str, Any] = {}
    for key, value in own.items():
        if key[0] == "$":
            ledger.add("dropped", "$", f"response field '{key[1:]}' has no place in a request body")
        else:
            body[key] = value
    for key, value in mapped.items():
        body.setdefault(key, value)
    if "model" not in body and conv.meta.model is not None:
        body["model"] = conv.meta.model
    body["messages"] = messages
    form = conv.form.get(NAME) or {}
    tools: list = []
    functions: list = []
    for ti, tool in enumerate(conv.tools):
        written, legacy = blocks.write_tool(tool, f"$.tools[{ti}]", ledger)
        if written is not None:
            (functions if legacy else tools).append(written)
    for key, values in (("tools", tools), ("functions", functions)):
        if values or key in form.get("empty", ()):
            body[key] = values
        elif key in form.get("null", ()):
            body[key] = None
    return body


def _write_response(conv: Conversation, writer: _Writer, ledger: Ledger) -> dict:
    own = conv.extras.get(NAME) or {}
    last = None
    for mi in range(len(conv.messages) - 1, -1, -1):
        if conv.messages[mi].role == "assistant":
            last = mi
            break
    for mi in range(len(conv.messages)):
        if mi != last:
            ledger.add("dropped", f"$.messages[{mi}]", "a response object holds only the last assistant turn")
    for name, values in (("system", conv.system), ("developer", conv.developer), ("tools", conv.tools)):
        for i in range(len(values)):
            ledger.add("dropped", f"$.{name}[{i}]", "a response object holds only the last assistant turn")
    for key in own:
        if key[0] != "$":
            ledger.add("dropped", "$", f"request parameter '{key}' has no place in a response object")
    response = dict(own.get("$response") or {})
    if last is None:
        if "$choice" in own or not conv.messages and "$response" in own:
            response["choices"] = []
            return response
        raise ConversionError("no assistant message to write as a response", path="$.messages", code="no_assistant")
    writer.emit_assistant(last, conv.messages[last])
    message = writer.out[0]
    for extra in writer.out[1:]:
        ledger.add("dropped", f"$.messages[{last}]", f"a {extra['role']} message cannot be part of a response object")
    meta = conv.meta
    if "$response" not in own:
        response["id"] = meta.response_id or _synthetic_id(conv, last, ledger)
        response["object"] = "chat.completion"
        response["created"] = _created(meta.created, ledger)
        response["model"] = meta.model or ""
        usage = _usage(meta.usage, ledger)
        if usage is not None:
            response["usage"] = usage
    choice = dict(own["$choice"]) if "$choice" in own else {
        "index": 0, "finish_reason": _finish(meta.stop_reason, message, ledger), "logprobs": None}
    choice["message"] = message
    response["choices"] = [choice, *own.get("$more_choices", ())]
    return response


def _synthetic_id(conv: Conversation, last: int, ledger: Ledger) -> str:
    ledger.add("synthesized", "$.meta.response_id", "no response id: wrote one derived from the message")
    digest = hashlib.blake2b(msgspec.json.encode(conv.messages[last]), digest_size=12).hexdigest()
    return f"chatcmpl-{digest}"


def _created(created: str | None, ledger: Ledger) -> int:
    if created is not None:
        try:
            return int(datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp())
        except ValueError:
            if created.isdigit():
                return int(created)
    ledger.add("synthesized", "$.meta.created", "no creation time: wrote 0")
    return 0


def _usage(usage: Any, ledger: Ledger) -> dict | None:
    if usage is UNSET or usage is None:
        return None
    if type(usage) is dict:
        if "prompt_tokens" in usage:
            return usage
        for prompt, completion in (("input_tokens", "output_tokens"), ("promptTokenCount", "candidatesTokenCount"),
                                   ("prompt_token_count", "candidates_token_count")):
            p, c = usage.get(prompt), usage.get(completion)
            if type(p) is int and type(c) is int:
                if len(usage) > 2:
                    ledger.add("dropped", "$.meta.usage", "usage counters other than prompt and completion tokens")
                return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    ledger.add("dropped", "$.meta.usage", "usage in a shape Chat Completions cannot express")
    return None


def _finish(reason: str | None, message: dict, ledger: Ledger) -> str:
    if reason is None:
        return "tool_calls" if message.get("tool_calls") else "stop"
    mapped = _FINISH.get(reason)
    if mapped is None:
        ledger.add("folded", "$.meta.stop_reason", f"stop reason '{reason}' has no Chat equivalent: wrote 'stop'")
        return "stop"
    return mapped
