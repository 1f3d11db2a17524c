"""Canonical conversations -> OpenAI Responses request bodies, bare input-item lists and response
objects: instructions, tools and parameters around the items (written by `writer.Writer`)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from msgspec import UNSET

from ...conversation import Conversation, Message, Text, to_json
from ...errors import ConfigError
from ...ledger import Ledger
from ..base import ledger_foreign_extras
from ..openai_siblings import adopt
from .items import MISSING, NAME, own
from .params import map_foreign_params
from .tools import write_tools
from .writer import Writer

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
_FILTERED_STOPS = frozenset({"content_filter", "refusal", "SAFETY", "RECITATION"})
# Other providers' stop reasons that a `completed` status says (the rest are ledgered when written so).
_COMPLETED_STOPS = frozenset({"completed", "stop", "end_turn", "tool_use", "tool_calls", "stop_sequence",
                              "function_call", "pause_turn", "STOP"})


def serialize(conv: Conversation, shape: str = "request", ledger: Ledger | None = None) -> Any:
    if ledger is None:
        ledger = Ledger(NAME)
    if shape not in ("request", "messages", "response"):
        raise ConfigError(f"unknown shape '{shape}'; valid: request, messages, response", code="unknown_shape")
    conv = adopt(conv, NAME)
    mapped, walked = map_foreign_params(conv, ledger, shape)
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
                if value is not None:  # a response echoes what was not set as null; a request leaves it out
                    body[key] = value
            else:
                ledger.add("dropped", "$", f"response field '{key}' is not a request parameter")
    else:
        body.update(extras)
    for key, value in mapped.items():
        body.setdefault(key, value)
    instructions, items = _write_instructions(conv, form, writer, ledger, as_instructions=True)
    if instructions is not MISSING:
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
    tools = write_tools(conv, form, ledger)
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
        if instructions is not MISSING:
            body["instructions"] = instructions
        if lead_items:  # only instructions the conversation gained after parsing
            ledger.add("dropped", "$.system", "a response object has no place for instruction messages")
        for mi, message in enumerate(conv.messages):
            writer.message(message, f"$.messages[{mi}].blocks", output)
        tools = write_tools(conv, form, ledger)
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
    if meta.stop_reason in _INCOMPLETE_STOPS or meta.stop_reason in _FILTERED_STOPS:
        body["status"] = "incomplete"
        body["incomplete_details"] = {
            "reason": "max_output_tokens" if meta.stop_reason in _INCOMPLETE_STOPS else "content_filter"}
    else:
        body["status"] = "completed"
        if meta.stop_reason is not None and meta.stop_reason not in _COMPLETED_STOPS:
            ledger.add("dropped", "$.meta.stop_reason", f"stop reason '{meta.stop_reason}' has no "
                       "openai-responses equivalent: wrote status 'completed'")
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
    """-> (the `instructions` value or MISSING, the leading system/developer items)."""
    system, developer = conv.system, conv.developer
    sys_at = dev_at = 0
    instructions: Any = MISSING
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
        if (as_instructions and instructions is MISSING and len(rest) == 1 and isinstance(rest[0], Text)
                and own(rest[0].form) is None):
            instructions = rest[0].text
        else:
            writer.message(Message(role="system", blocks=rest), "$.system", items, offset=sys_at)
    if developer[dev_at:]:
        writer.message(Message(role="developer", blocks=developer[dev_at:]), "$.developer", items, offset=dev_at)
    return instructions, items
