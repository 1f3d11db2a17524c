"""OpenAI Responses API: request bodies (`input` + `instructions` + `tools`), bare input-item lists, and
response objects (`object: "response"`, also the `response.compaction` object of /responses/compact).

The item-level work (grouping items into messages, parts, calls, reasoning) is in
`_openai_responses_items`; this module handles the body around the items: instructions, tools,
request parameters, detection, and the three shapes.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

from msgspec import UNSET, structs

from ..conversation import Conversation, Message, Meta, Text, Tool, to_json
from ..errors import ConfigError, ParseError, ShapeError
from ..ledger import Ledger
from ._openai_responses_items import KNOWN_ITEM_TYPES, MESSAGE_ROLES, NAME, OWN_PART_TYPES, Reader
from ._openai_responses_write import Writer, own
from .base import Detection, expect, ledger_foreign_extras, require

__all__ = ["NAME", "detect", "parse", "serialize"]

_MISSING: Any = object()
_RESPONSE_OBJECTS = frozenset({"response", "response.compaction"})
# Request keys that embeddings and moderation bodies (which also take a string `input`) never have.
_OWN_KEYS = frozenset({"instructions", "previous_response_id", "conversation", "include", "reasoning",
                       "max_output_tokens", "text", "truncation", "background", "context_management", "tools",
                       "tool_choice", "store", "prompt"})
# A message item's keys (a Chat message also has name / tool_calls / tool_call_id, which we refuse).
_MESSAGE_ITEM_KEYS = frozenset({"type", "role", "content", "id", "status", "phase"})
# Every parameter of POST /responses (openai SDK ResponseCreateParams): what survives when a response
# object is written back as a request.
_REQUEST_PARAMS = frozenset({
    "access_programs", "background", "background_options", "context_management", "conversation", "image",
    "include", "input", "instructions", "max_output_tokens", "max_tool_calls", "metadata", "model",
    "moderation", "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key",
    "prompt_cache_options", "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier",
    "store", "stream", "stream_options", "temperature", "text", "tool_choice", "tools", "top_logprobs",
    "top_p", "truncation", "user",
})
_INCOMPLETE_STOPS = frozenset({"max_tokens", "length", "MAX_TOKENS", "max_output_tokens"})


# ================================================================================================
# detect
# ================================================================================================

def detect(obj: Any) -> Detection | None:
    try:
        return _detect(obj)
    except Exception:  # detection must never raise, whatever the input
        return None


def _detect(obj: Any) -> Detection | None:
    if isinstance(obj, dict):
        if obj.get("object") in _RESPONSE_OBJECTS and isinstance(obj.get("output"), list):
            return Detection(NAME, "response", True)
        if "messages" in obj or "contents" in obj or "output" in obj:
            return None
        inp = obj.get("input", _MISSING)
        if isinstance(inp, list):
            # `input` holding items is only this API (a broken item is still ours: parse names it); a
            # list of strings or tokens is an embeddings body, typed parts only is a moderation body.
            if inp and not any(isinstance(x, dict) and ("role" in x or x.get("type") in KNOWN_ITEM_TYPES
                                                        or not isinstance(x.get("type"), str)) for x in inp):
                return None
            return Detection(NAME, "request", True)
        if isinstance(inp, str):
            return Detection(NAME, "request", any(k in obj for k in _OWN_KEYS))
        if inp is _MISSING and ("previous_response_id" in obj or "conversation" in obj
                                or isinstance(obj.get("instructions"), str)):
            return Detection(NAME, "request", True)
        return None
    if isinstance(obj, list):
        verdict = _items_verdict(obj)
        return None if verdict is None else Detection(NAME, "messages", verdict)
    return None


def _items_verdict(items: list) -> bool | None:
    """For a bare list. None: not input items; False: could be (plain role/content messages, as in
    Chat); True: certainly ours."""
    if not items:
        return None
    certain = False
    unknown = False
    for item in items:
        if not isinstance(item, dict):
            return None
        item_type = item.get("type")
        if item_type is None or item_type == "message":
            role = item.get("role")
            if role is None:
                if item_type is None and isinstance(item.get("id"), str) and len(item) == 1:
                    certain = True  # item_reference without its type
                    continue
                return None
            if role not in MESSAGE_ROLES:
                return None
            if any(k not in _MESSAGE_ITEM_KEYS for k in item):
                return None
            certain = certain or item_type == "message"
            content = item.get("content")
            if isinstance(content, list):
                for part in content:
                    if not isinstance(part, dict):
                        return None
                    part_type = part.get("type")
                    if part_type in OWN_PART_TYPES:
                        certain = True
                    elif part_type not in ("refusal", "input_audio"):
                        return None
            elif not isinstance(content, str):
                return None
        elif isinstance(item_type, str):
            if item_type in KNOWN_ITEM_TYPES:
                certain = True
            else:
                unknown = True
        else:
            return None
    if unknown and not certain:
        return None
    return certain


# ================================================================================================
# parse
# ================================================================================================

def parse(obj: Any, shape: str | None = None, strict: bool = False) -> Conversation:
    if shape is None:
        found = detect(obj)
        if found is None:
            raise ShapeError(f"not an {NAME} record")
        shape = found.shape
    try:
        match shape:
            case "request" | "response":
                return _parse_body(obj, shape, strict)
            case "messages":
                return _parse_messages(obj, strict)
    except RecursionError:
        raise ParseError("record nested too deeply") from None
    raise ConfigError(f"unknown shape '{shape}'; valid: request, messages, response", code="unknown_shape")


def _parse_body(obj: Any, shape: str, strict: bool) -> Conversation:
    request = shape == "request"
    expect(obj, dict, "$", "a request body" if request else "a response object")
    items_key = "input" if request else "output"
    reader = Reader(strict)
    extras = {k: v for k, v in obj.items() if k not in (items_key, "instructions", "tools")}
    form: dict = {}
    system: list = []
    developer: list = []
    if "instructions" in obj:
        instructions = obj["instructions"]
        if isinstance(instructions, str):
            if instructions:
                system.append(Text(text=instructions))
                form["instructions"] = 1
            else:
                form["instructions"] = ""
        elif instructions is None:
            form["instructions"] = None
        else:  # a response echoes a prompt template's instructions as an item list: kept, not modelled
            extras["instructions"] = expect(instructions, (str, list), "$.instructions", "'instructions'")
    messages: list = []
    if request:
        if "input" in obj:
            inp = obj["input"]
            if isinstance(inp, str):
                messages = [Message(role="user", blocks=(Text(text=inp),))]
                form["input"] = "s"
            else:
                expect(inp, list, "$.input", "'input'")
                messages, lead_system, developer, lead = reader.items(inp, "$.input", lead=True)
                system.extend(lead_system)
                if lead:
                    form["lead"] = lead
        else:
            form["input"] = "-"
    else:
        output = require(obj, "output", list, "$")
        messages = reader.items(output, "$.output", lead=False)[0]
        form["output"] = "all"
    tools: list = []
    if "tools" in obj:
        raw_tools = obj["tools"]
        if raw_tools is None:
            extras["tools"] = None
        else:
            expect(raw_tools, list, "$.tools", "'tools'")
            tools = [_parse_tool(t, f"$.tools[{i}]") for i, t in enumerate(raw_tools)]
            form["tools"] = 1
    return Conversation(messages=tuple(messages), system=tuple(system), developer=tuple(developer),
                        tools=tuple(tools), meta=_meta(obj, shape), extras={NAME: extras} if extras else {},
                        form={NAME: form})


def _meta(obj: dict, shape: str) -> Meta:
    model = obj.get("model")
    fields: dict = {"provider": NAME, "shape": shape, "model": model if isinstance(model, str) else None}
    if shape == "response":
        rid = obj.get("id")
        fields["response_id"] = rid if isinstance(rid, str) else None
        if "usage" in obj:
            fields["usage"] = obj["usage"]
        status = obj.get("status")
        details = obj.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        stop = reason if isinstance(reason, str) else status
        fields["stop_reason"] = stop if isinstance(stop, str) else None
        created = obj.get("created_at")
        if isinstance(created, (int, float)) and not isinstance(created, bool):
            try:
                fields["created"] = datetime.fromtimestamp(created, timezone.utc).isoformat()
            except (OverflowError, OSError, ValueError):
                pass
    return Meta(**fields)


def _parse_messages(obj: Any, strict: bool) -> Conversation:
    expect(obj, list, "$", "a list of input items")
    messages, system, developer, lead = Reader(strict).items(obj, "$", lead=True)
    return Conversation(messages=tuple(messages), system=tuple(system), developer=tuple(developer),
                        meta=Meta(provider=NAME, shape="messages"), form={NAME: {"lead": lead} if lead else {}})


def _parse_tool(tool: Any, path: str) -> Tool:
    expect(tool, dict, path, "tool")
    tool_type = require(tool, "type", str, path)
    if tool_type in ("function", "custom"):
        name = require(tool, "name", str, path)
        form: dict = {}
        fields: dict = {}
        if "description" in tool:
            description = tool["description"]
            if description is None:
                form["null"] = ["description"]
            else:
                fields["description"] = expect(description, str, f"{path}.description", "'description'")
        modelled = {"type", "name", "description"}
        if tool_type == "function":
            modelled.add("parameters")
            if "parameters" in tool:
                parameters = tool["parameters"]
                if parameters is None:
                    form.setdefault("null", []).append("parameters")
                else:
                    fields["parameters"] = expect(parameters, dict, f"{path}.parameters", "'parameters'")
        extras = {k: v for k, v in tool.items() if k not in modelled}
        return Tool(name=name, kind=tool_type, extras={NAME: extras} if extras else {}, form={NAME: form},
                    **fields)
    # A hosted tool (web_search, mcp, shell, tool_search, ...): kept whole.
    name = tool.get("name")
    rest = {k: v for k, v in tool.items() if k != "name"} if isinstance(name, str) else dict(tool)
    return Tool(name=name if isinstance(name, str) else tool_type, kind="hosted", extras={NAME: rest},
                form={NAME: {"named": 1}} if isinstance(name, str) else {NAME: {}})


# ================================================================================================
# serialize
# ================================================================================================

def serialize(conv: Conversation, shape: str = "request", ledger: Ledger | None = None) -> Any:
    if ledger is None:
        ledger = Ledger(NAME)
    if shape not in ("request", "messages", "response"):
        raise ConfigError(f"unknown shape '{shape}'; valid: request, messages, response", code="unknown_shape")
    mapped, walked = _map_foreign_params(conv, ledger, shape)
    ledger_foreign_extras(walked, NAME, ledger)
    writer = Writer(ledger)
    cform = own(conv.form)
    match shape:
        case "request":
            return _write_request(conv, cform, mapped, writer, ledger)
        case "messages":
            return _write_messages(conv, cform, writer, ledger)
        case _:
            return _write_response(conv, cform, writer, ledger)


def _write_request(conv: Conversation, cform: dict | None, mapped: dict, writer: Writer, ledger: Ledger) -> dict:
    form = cform or {}
    extras = own(conv.extras) or {}
    body: dict = {}
    if form.get("output") == "all":  # a response object written as a request: keep request parameters only
        for key, value in extras.items():
            if key in _REQUEST_PARAMS:
                body[key] = value
            else:
                ledger.add("dropped", "$", f"response field '{key}' is not a request parameter")
    else:
        body.update(extras)
    for key, value in mapped.items():
        body.setdefault(key, value)
    instructions, items = _write_instructions(conv, form, writer, ledger, as_instructions=True)
    if instructions is not _MISSING:
        body["instructions"] = instructions
    for mi, message in enumerate(conv.messages):
        writer.message(message, f"$.messages[{mi}].blocks", items)
    input_form = form.get("input")
    messages = conv.messages
    if input_form == "-" and not items:
        pass
    elif (input_form == "s" and len(messages) == 1 and messages[0].role == "user" and len(messages[0].blocks) == 1
          and len(items) == 1 and isinstance(items[0].get("content"), str)):
        body["input"] = items[0]["content"]
    else:
        body["input"] = items
    tools = _write_tools(conv, form, ledger)
    if tools is not None:
        body["tools"] = tools
    return body


def _write_messages(conv: Conversation, cform: dict | None, writer: Writer, ledger: Ledger) -> list:
    form = cform or {}
    instructions, items = _write_instructions(conv, form, writer, ledger, as_instructions=False)
    if isinstance(instructions, str) and instructions:
        items.insert(0, {"role": "system", "content": instructions})
        ledger.add("moved", "$.system[0]", "instructions written as a leading system message (a bare item list "
                                           "has no instructions field)")
    for key in own(conv.extras) or ():
        ledger.add("dropped", "$", f"request parameter '{key}' has no place in a bare item list")
    if conv.tools:
        ledger.add("dropped", "$.tools", "tool definitions have no place in a bare item list")
    for mi, message in enumerate(conv.messages):
        writer.message(message, f"$.messages[{mi}].blocks", items)
    return items


def _write_response(conv: Conversation, cform: dict | None, writer: Writer, ledger: Ledger) -> dict:
    form = cform or {}
    output: list = []
    if form.get("output") == "all":  # our own response object: everything came from `output`
        body = dict(own(conv.extras) or {})
        instructions, lead_items = _write_instructions(conv, form, writer, ledger, as_instructions=True)
        if instructions is not _MISSING:
            body["instructions"] = instructions
        if lead_items:  # only instructions the conversation gained after parsing
            ledger.add("dropped", "$.system", "a response object has no place for instruction messages")
        for mi, message in enumerate(conv.messages):
            writer.message(message, f"$.messages[{mi}].blocks", output)
        tools = _write_tools(conv, form, ledger)
        if tools is not None:
            body["tools"] = tools
        body["output"] = output
        return body
    return _write_foreign_response(conv, form, writer, ledger)


def _write_foreign_response(conv: Conversation, form: dict, writer: Writer, ledger: Ledger) -> dict:
    """A response object from another shape or provider: the last assistant turn and the meta."""
    meta = conv.meta
    last = max((i for i, m in enumerate(conv.messages) if m.role == "assistant"), default=None)
    for mi in range(len(conv.messages)):
        if mi != last:
            ledger.add("dropped", f"$.messages[{mi}]", "a response object holds only the last assistant turn")
    if conv.system or conv.developer:
        ledger.add("dropped", "$.system", "a response object holds no instructions")
    if conv.tools:
        ledger.add("dropped", "$.tools", "a response object written from a conversation lists no tools")
    output: list = []
    if last is not None:
        writer.message(conv.messages[last], f"$.messages[{last}].blocks", output)
    body: dict = {}
    if meta.response_id is not None:
        body["id"] = meta.response_id
    else:
        body["id"] = "resp_" + hashlib.blake2b(to_json(conv), digest_size=16).hexdigest()
        ledger.add("synthesized", "$.meta.response_id", "no response id: one derived from the content written")
    body["object"] = "response"
    created = _epoch(meta.created)
    if created is not None:
        body["created_at"] = created
    if meta.stop_reason in _INCOMPLETE_STOPS:
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    else:
        body["status"] = "completed"
    model = (own(conv.extras) or {}).get("model") if meta.provider == NAME else None
    if isinstance(model, str):
        body["model"] = model
    elif meta.provider == NAME and meta.model is not None:
        body["model"] = meta.model
    synthesized = False
    for i, item in enumerate(output):
        if "type" not in item and item.get("role") == "assistant":
            text = item["content"]
            content = [{"type": "output_text", "text": text, "annotations": []}] if isinstance(text, str) else text
            digest = hashlib.blake2b(f"{i}:{body['id']}".encode(), digest_size=16).hexdigest()
            output[i] = {"type": "message", "id": f"msg_{digest}", "status": "completed", "role": "assistant",
                         "content": content}
            synthesized = True
    if synthesized:
        ledger.add("synthesized", f"$.messages[{last}]", "output message ids and status written for the response object")
    body["output"] = output
    if meta.usage is not UNSET:
        if meta.provider == NAME:
            body["usage"] = meta.usage
        else:
            ledger.add("dropped", "$.meta.usage", f"{meta.provider} usage counts are not in openai-responses form")
    return body


def _epoch(created: str | None) -> int | None:
    if created is None:
        return None
    try:
        return int(datetime.fromisoformat(created).timestamp())
    except ValueError:
        return None


# --- instructions: `instructions`, then leading system/developer items --------------------------

def _write_instructions(conv: Conversation, form: dict, writer: Writer, ledger: Ledger, *,
                        as_instructions: bool) -> tuple[Any, list]:
    """-> (the `instructions` value or _MISSING, the leading system/developer items)."""
    system, developer = conv.system, conv.developer
    sys_at = dev_at = 0
    instructions: Any = _MISSING
    if "instructions" in form:
        value = form["instructions"]
        if value == 1:
            if system and isinstance(system[0], Text):
                instructions = system[0].text
                sys_at = 1
        else:
            instructions = value
    items: list = []
    for entry in form.get("lead") or ():
        role = entry.get("role")
        n = entry.get("n", 0)
        source, at = (system, sys_at) if role == "system" else (developer, dev_at)
        chunk = source[at:at + n]
        if len(chunk) != n:
            break  # the conversation changed since parsing: write the rest the default way
        mform = entry.get("m")
        writer.message(Message(role=role, blocks=chunk, form={NAME: mform} if mform else {}),
                       "$.system" if role == "system" else "$.developer", items, offset=at)
        if role == "system":
            sys_at += n
        else:
            dev_at += n
    rest = system[sys_at:]
    if rest:
        if (as_instructions and instructions is _MISSING and len(rest) == 1 and isinstance(rest[0], Text)
                and own(rest[0].form) is None):
            instructions = rest[0].text
        else:
            writer.message(Message(role="system", blocks=rest), "$.system", items, offset=sys_at)
    if developer[dev_at:]:
        writer.message(Message(role="developer", blocks=developer[dev_at:]), "$.developer", items, offset=dev_at)
    return instructions, items


# --- tools ------------------------------------------------------------------------------------

def _write_tools(conv: Conversation, form: dict, ledger: Ledger) -> list | None:
    if not conv.tools and not form.get("tools"):
        return None
    out = []
    for ti, tool in enumerate(conv.tools):
        written = _write_tool(tool, f"$.tools[{ti}]", ledger)
        if written is not None:
            out.append(written)
    if not out and not form.get("tools"):
        return None
    return out


def _write_tool(tool: Tool, path: str, ledger: Ledger) -> dict | None:
    tform = own(tool.form)
    extras = own(tool.extras) or {}
    mine = tform is not None
    nulls = (tform or {}).get("null", ())
    if tool.kind == "hosted":
        if NAME not in tool.extras:
            ledger.add("dropped", path, f"hosted tool '{tool.name}' of another provider has no openai-responses form")
            return None
        out = dict(extras)
        if (tform or {}).get("named"):
            out["name"] = tool.name
        return out
    out = {"type": tool.kind, "name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    elif "description" in nulls:
        out["description"] = None
    if tool.kind == "function":
        if tool.parameters is not UNSET:
            out["parameters"] = tool.parameters
        elif "parameters" in nulls:
            out["parameters"] = None
        elif not mine:
            out["parameters"] = {"type": "object", "properties": {}}  # required; same meaning as none
        if not mine:
            out["strict"] = False  # other formats do not enforce schemas; strict mode would reject most
    out.update(extras)
    return out


# --- request parameters from another provider ---------------------------------------------------

def _map_foreign_params(conv: Conversation, ledger: Ledger, shape: str) -> tuple[dict, Conversation]:
    """Request parameters of other providers that have a clear Responses equivalent, and the
    conversation whose foreign extras still need a 'dropped' entry (the mapped keys removed)."""
    foreign = [p for p in conv.extras if p != NAME]
    model = conv.meta.model if conv.meta.provider not in (None, NAME) else None
    if not foreign:
        if model is not None and shape != "messages":
            ledger.add("dropped", "$.meta.model", f"model '{model}' belongs to {conv.meta.provider}; set an OpenAI model")
        return {}, conv
    mapped: dict = {}
    remaining = dict(conv.extras)
    for provider in foreign:
        values = dict(conv.extras[provider])
        if isinstance(values.get("model"), str):
            model = model or values["model"]
            del values["model"]
        if shape == "request":
            match provider:
                case "anthropic":
                    _take(values, mapped, "max_tokens", "max_output_tokens", int)
                    _take(values, mapped, "temperature", "temperature", (int, float))
                    _take(values, mapped, "top_p", "top_p", (int, float))
                    _anthropic_tool_choice(values, mapped)
                case "openai-chat":
                    _take(values, mapped, "max_completion_tokens", "max_output_tokens", int)
                    _take(values, mapped, "max_tokens", "max_output_tokens", int)
                    _take(values, mapped, "temperature", "temperature", (int, float))
                    _take(values, mapped, "top_p", "top_p", (int, float))
                    _take(values, mapped, "parallel_tool_calls", "parallel_tool_calls", bool)
                    _chat_tool_choice(values, mapped)
                case "gemini":
                    _gemini_params(values, mapped)
        remaining[provider] = values
    if model is not None and shape != "messages":
        ledger.add("dropped", "$.meta.model", f"model '{model}' belongs to {conv.meta.provider or 'another provider'}; "
                                              "set an OpenAI model")
    return mapped, structs.replace(conv, extras=remaining)


def _take(values: dict, mapped: dict, key: str, target: str, kind: type | tuple) -> None:
    value = values.get(key)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)) and target not in mapped:
        mapped[target] = value
        del values[key]


def _anthropic_tool_choice(values: dict, mapped: dict) -> None:
    choice = values.get("tool_choice")
    if not isinstance(choice, dict) or "tool_choice" in mapped:
        return
    kind = choice.get("type")
    simple = {"auto": "auto", "any": "required", "none": "none"}
    if kind in simple:
        mapped["tool_choice"] = simple[kind]
    elif kind == "tool" and isinstance(choice.get("name"), str):
        mapped["tool_choice"] = {"type": "function", "name": choice["name"]}
    else:
        return
    if choice.get("disable_parallel_tool_use") is True:
        mapped["parallel_tool_calls"] = False
    del values["tool_choice"]


def _chat_tool_choice(values: dict, mapped: dict) -> None:
    choice = values.get("tool_choice")
    if "tool_choice" in mapped:
        return  # another provider's choice was mapped first; this one is ledgered as dropped
    if choice in ("auto", "none", "required"):
        mapped["tool_choice"] = choice
    elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict) \
            and isinstance(choice["function"].get("name"), str):
        mapped["tool_choice"] = {"type": "function", "name": choice["function"]["name"]}
    else:
        return
    del values["tool_choice"]


def _gemini_params(values: dict, mapped: dict) -> None:
    for config_key in ("generationConfig", "generation_config"):
        config = values.get(config_key)
        if not isinstance(config, dict):
            continue
        config = dict(config)
        for src, target, kind in (("maxOutputTokens", "max_output_tokens", int),
                                  ("max_output_tokens", "max_output_tokens", int),
                                  ("temperature", "temperature", (int, float)),
                                  ("topP", "top_p", (int, float)), ("top_p", "top_p", (int, float))):
            _take(config, mapped, src, target, kind)
        if config:
            values[config_key] = config
        else:
            del values[config_key]
    for config_key in ("toolConfig", "tool_config"):
        config = values.get(config_key)
        if not isinstance(config, dict):
            continue
        calling = config.get("functionCallingConfig", config.get("function_calling_config"))
        if not isinstance(calling, dict) or len(config) != 1 or "tool_choice" in mapped:
            continue
        mode = calling.get("mode")
        names = calling.get("allowedFunctionNames", calling.get("allowed_function_names"))
        if mode == "ANY" and isinstance(names, list) and len(names) == 1 and isinstance(names[0], str):
            mapped["tool_choice"] = {"type": "function", "name": names[0]}
        elif mode in ("AUTO", "ANY", "NONE") and not names:
            mapped["tool_choice"] = {"AUTO": "auto", "ANY": "required", "NONE": "none"}[mode]
        else:
            continue
        del values[config_key]
