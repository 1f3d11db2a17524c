"""OpenAI Chat Completions: request bodies, bare message lists and `chat.completion` response objects.

`serialize` lives in `_openai_chat_write.py`, content parts and tools in `_openai_chat_blocks.py`.

Layout hints that the canonical fields cannot express (content was a string or a list or null, a key
was present with null, the order of leading instruction messages) go to `form["openai-chat"]`, only
when they differ from what the serializer writes by default. Data without a canonical field goes to
`extras["openai-chat"]`; keys starting with `$` there are this codec's own containers (`$response`,
`$choice`, `$function`...), never wire keys of the same object.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import msgspec
from msgspec import UNSET

from ..conversation import Conversation, Media, Message, Meta, Opaque, Reasoning, Text, Tool, ToolCall, ToolResult
from ..errors import ParseError, ShapeError
from ..ids import CallIds
from . import _openai_chat_blocks as blocks
from ._openai_chat_blocks import NAME, missing, opt_str, parse_part, req_dict, req_str, rest, wrong
from ._openai_chat_write import MAX_ID_LEN, serialize
from .base import SHAPES, CallIndex, Detection

__all__ = ["MAX_ID_LEN", "NAME", "detect", "parse", "serialize"]

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
        if mode != blocks.default_mode(found, role, False):
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
        if mode != blocks.default_mode(found, "assistant", has_calls):
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
        if mode != blocks.default_mode(found, "tool", False):
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
            arguments, valid = blocks.loads(raw)
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


def parse(obj: Any, shape: str | None = None, strict: bool = False) -> Conversation:
    if shape is None:
        found = detect(obj)
        if found is None:
            raise ShapeError("not an OpenAI Chat Completions request, message list or response", path="$")
        shape = found.shape
    if shape == "request":
        return _parse_request(obj, strict)
    if shape == "messages":
        if type(obj) is not list:
            raise wrong("$", "a message list", "an array", obj)
        return _parse_messages(obj, "$", strict, {}, Meta(provider=NAME, shape="messages"))
    if shape == "response":
        return _parse_response(obj, strict)
    raise ShapeError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", path="$")


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
    if lead != blocks.default_lead(tuple(system), tuple(developer)):
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
