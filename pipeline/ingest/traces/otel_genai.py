"""OpenTelemetry GenAI semantic conventions: a model-call span to a conversation.

The current form (semantic-conventions docs/gen-ai/gen-ai-spans.md, the JSON schemas
gen-ai-input-messages.json / gen-ai-output-messages.json / gen-ai-system-instructions.json /
gen-ai-tool-definitions.json) puts the history on the span, or on its
`gen_ai.client.inference.operation.details` event: `gen_ai.input.messages` (messages of `parts`),
`gen_ai.output.messages`, `gen_ai.system_instructions`, `gen_ai.tool.definitions`. Parts: `text`,
`tool_call` (arguments as a JSON string or an object), `tool_call_response`, `blob`, `uri`, `file`
(`file_data` in the schema), `reasoning`, `server_tool_call(_response)`, and any other type (kept
verbatim). The older form logs one event per message (`gen_ai.system.message`, `gen_ai.user.message`,
`gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`): see otel_events.py.

What the convention cannot carry: reasoning's replay state (a signature, encrypted content) has no
field, so reasoning from a trace is text only (`source_reasoning_unsigned`).
"""

from __future__ import annotations

from typing import Any

from ...conversation import Conversation, Media, Message, Meta, Opaque, Reasoning, Text, Tool, ToolCall
from ...errors import ParseError
from ..blocks import Calls, json_attribute, media
from .otel_events import EVENT_NAMES, messages_from_events
from .otlp import SpanRecord, span_ids, start_time

NAME = "otel-genai"
MODEL_CALLS = frozenset({"chat", "text_completion", "generate_content"})
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
_ROLES = {"user": "user", "assistant": "assistant", "tool": "tool", "system": "system", "developer": "developer",
          "model": "assistant"}
_KNOWN_PART_KEYS = {"text": {"type", "content"}, "reasoning": {"type", "content"},
                    "tool_call": {"type", "id", "name", "arguments"}, "tool_call_response": {"type", "id", "response"}}


def is_genai_span(record: SpanRecord) -> bool:
    a = record.attributes
    return ("gen_ai.operation.name" in a or any(k in a for k in _CONTENT)
            or any(name in EVENT_NAMES or name == DETAILS_EVENT for name, _ in record.events))


def parse_span(record: SpanRecord) -> Conversation:
    attrs = dict(record.attributes)
    for name, event_attrs in record.events:
        if name == DETAILS_EVENT:  # content captured on the event instead of the span
            attrs.update({k: v for k, v in event_attrs.items() if k not in attrs})
    where = f"{record.path}.attributes"
    operation = attrs.get("gen_ai.operation.name")
    if operation is not None and (not isinstance(operation, str) or operation not in MODEL_CALLS):
        raise ParseError(f"span '{record.name}' is a '{operation}' operation, not a model call "
                         f"({', '.join(sorted(MODEL_CALLS))})", path=f"{where}['gen_ai.operation.name']",
                         code="not_a_model_call")
    calls = Calls()
    notes: list[str] = []
    if any(k in attrs for k in _CONTENT):
        system = _system(json_attribute(attrs, "gen_ai.system_instructions", where), where)
        messages, lead = _messages(json_attribute(attrs, "gen_ai.input.messages", where), calls,
                                   f"{where}['gen_ai.input.messages']")
        outputs = json_attribute(attrs, "gen_ai.output.messages", where) or []
        if not isinstance(outputs, list):
            raise ParseError("gen_ai.output.messages must be an array", path=f"{where}['gen_ai.output.messages']")
        if len(outputs) > 1:
            notes.append(f"{len(outputs)} choices logged; the first is the assistant turn")
        answer, _ = _messages(outputs[:1], calls, f"{where}['gen_ai.output.messages']")
        system = system + lead
        messages += answer
    elif any(name in EVENT_NAMES for name, _ in record.events):
        system, messages = messages_from_events(record, calls)
        notes.append("read from per-message events (the older GenAI event form)")
    else:
        raise ParseError(f"span '{record.name}' holds no message content: content capture was off when it was "
                         "logged (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)", path=where,
                         code="content_not_captured")
    tools = tool_list(json_attribute(attrs, "gen_ai.tool.definitions", where), f"{where}['gen_ai.tool.definitions']")
    return conversation(NAME, record, attrs, messages, system, tools, notes)


def conversation(name: str, record: SpanRecord, attrs: dict, messages: list[Message], system: tuple,
                 tools: tuple[Tool, ...], notes: list[str]) -> Conversation:
    """The conversation of a span, with the span's model, usage, ids and what the source lacks."""
    lacks = []
    if any(isinstance(b, Reasoning) for m in messages for b in m.blocks):
        lacks.append("source_reasoning_unsigned")
        notes.append(f"{name} spans log reasoning as text only: no signature or encrypted state to replay it")
    if not tools and any(isinstance(b, ToolCall) for m in messages for b in m.blocks):
        notes.append("the span logs no tool definitions")
    usage = {k: attrs[f"gen_ai.usage.{k}"] for k in ("input_tokens", "output_tokens")
             if isinstance(attrs.get(f"gen_ai.usage.{k}"), int)}
    reasons = attrs.get("gen_ai.response.finish_reasons")
    stop = reasons[0] if isinstance(reasons, list) and reasons else (reasons if isinstance(reasons, str) else None)
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    params = {k: v for k, v in attrs.items() if k.startswith("gen_ai.request.") and k != "gen_ai.request.model"}
    provider = attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
    extras = {**span_ids(record), **({"provider": provider} if provider else {}), **({"request": params} if params else {})}
    meta = Meta(provider=name, shape=name, model=model if isinstance(model, str) else None,
                response_id=attrs.get("gen_ai.response.id") if isinstance(attrs.get("gen_ai.response.id"), str) else None,
                created=start_time(record), stop_reason=stop if isinstance(stop, str) else None,
                **({"usage": usage} if usage else {}), notes=tuple(notes), lacks=tuple(lacks))
    return Conversation(messages=tuple(messages), system=system, tools=tools, meta=meta, extras={name: extras})


def _system(value: Any, where: str) -> tuple:
    if value is None:
        return ()
    if isinstance(value, str):
        return (Text(value),)
    if not isinstance(value, list):
        raise ParseError("gen_ai.system_instructions must be an array of parts",
                         path=f"{where}['gen_ai.system_instructions']")
    out = []
    for i, part in enumerate(value):
        if isinstance(part, dict) and isinstance(part.get("content"), str):
            out.append(Text(part["content"]))
        elif isinstance(part, str):
            out.append(Text(part))
        else:
            raise ParseError("a system instruction must be a text part", path=f"{where}['gen_ai.system_instructions'][{i}]")
    return tuple(out)


def _messages(value: Any, calls: Calls, path: str) -> tuple[list[Message], tuple]:
    """The messages, and the text of leading system messages (which go to the conversation's system)."""
    if value is None:
        return [], ()
    if not isinstance(value, list):
        raise ParseError("the messages must be an array", path=path)
    messages: list[Message] = []
    lead: list = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(item, dict):
            raise ParseError("a message must be an object with 'role' and 'parts'", path=where)
        role = _ROLES.get(item["role"]) if isinstance(item.get("role"), str) else None
        if role is None:
            raise ParseError(f"unknown role {item.get('role')!r}; known: {', '.join(_ROLES)}", path=f"{where}.role")
        parts = item.get("parts")
        if not isinstance(parts, list):
            raise ParseError("'parts' must be an array", path=f"{where}.parts")
        blocks = tuple(part_block(p, calls, f"{where}.parts[{j}]") for j, p in enumerate(parts))
        if role == "system" and not messages:
            lead.extend(b for b in blocks if isinstance(b, (Text, Media)))
            continue
        extras = {NAME: {"finish_reason": item["finish_reason"]}} if item.get("finish_reason") else {}
        name = item.get("name") if isinstance(item.get("name"), str) else None
        messages.append(Message(role, blocks, name=name, extras=extras))  # type: ignore[arg-type]
    return messages, tuple(lead)


def part_block(part: Any, calls: Calls, path: str):
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise ParseError("a part must be an object with a 'type'", path=path)
    kind = part["type"]
    extras = {k: v for k, v in part.items() if k not in _KNOWN_PART_KEYS.get(kind, set(part))}
    slot = {NAME: extras} if extras else {}
    match kind:
        case "text":
            return Text(_text(part, path), extras=slot)
        case "reasoning":
            return Reasoning(text=_text(part, path), extras=slot)
        case "tool_call":
            if not isinstance(part.get("name"), str):
                raise ParseError("a tool_call part needs a 'name'", path=f"{path}.name")
            return calls.call(part["name"], part.get("arguments"), _id(part), extras=slot)
        case "tool_call_response":
            if "response" not in part:
                raise ParseError("a tool_call_response part needs a 'response'", path=f"{path}.response")
            return calls.result(_id(part), part["response"], extras=slot)
        case "blob":
            return media(part.get("modality"), part.get("mime_type"), data=part.get("content"))
        case "uri":
            return media(part.get("modality"), part.get("mime_type"), url=part.get("uri"))
        case "file" | "file_data":
            return media(part.get("modality"), part.get("mime_type"), file_id=part.get("file_id"), url=part.get("uri"))
        case "server_tool_call":
            return Opaque(NAME, kind, part, role_hint="call", name=part.get("name"))
        case "server_tool_call_response":
            return Opaque(NAME, kind, part, role_hint="result")
        case _:
            return Opaque(NAME, kind, part)


def _text(part: dict, path: str) -> str:
    content = part.get("content")
    if not isinstance(content, str):
        raise ParseError(f"a {part['type']} part needs 'content' as a string", path=f"{path}.content")
    return content


def _id(part: dict) -> str | None:
    return part["id"] if isinstance(part.get("id"), str) and part["id"] else None


def tool_list(value: Any, path: str) -> tuple[Tool, ...]:
    """Tool definitions as OTel writes them, OpenAI-shaped (`{"type": "function", "function": {...}}`) or
    Anthropic-shaped (`input_schema`)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ParseError("gen_ai.tool.definitions must be an array", path=path)
    out = []
    for i, item in enumerate(value):
        spec = item.get("function", item) if isinstance(item, dict) else None  # OpenAI-shaped definitions too
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ParseError("a tool definition needs a 'name'", path=f"{path}[{i}]")
        kind = "function" if item.get("type", "function") == "function" else "hosted"
        parameters = spec.get("parameters", spec.get("input_schema"))
        out.append(Tool(name=spec["name"], description=spec.get("description"), kind=kind,
                        **({"parameters": parameters} if parameters is not None else {})))
    return tuple(out)


__all__ = ["MODEL_CALLS", "NAME", "conversation", "is_genai_span", "parse_span", "part_block", "tool_list"]
