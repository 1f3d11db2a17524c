"""OpenInference (Arize Phoenix and the instrumentations that follow its semantic conventions,
github.com/Arize-ai/openinference spec/semantic_conventions.md): an `LLM` span to a conversation.

Messages are flattened into span attributes: `llm.input_messages.N.message.role`, `.message.content`,
`.message.contents.M.message_content.{type,text,image.image.url}`, `.message.tool_calls.K.tool_call.{id,
function.name,function.arguments}`, `.message.tool_call_id`, `.message.name`; the answer under
`llm.output_messages`; tools as `llm.tools.N.tool.json_schema` (a JSON string). Exports that kept the
values nested (Phoenix's span JSON) are read the same way.

What the convention cannot carry: reasoning has no attribute (a model's thinking is absent from the
row), and the same holds for any replay state.
"""

from __future__ import annotations

from typing import Any, Iterator

import msgspec
import orjson

from ... import jsonpolicy
from ...conversation import Conversation, Media, Message, Text, Tool
from ...errors import ParseError
from ..blocks import Calls, json_attribute, media
from .otel_genai import conversation
from .otlp import SpanRecord

NAME = "openinference"
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant",
          "tool": "tool", "function": "tool", "system": "system", "developer": "developer"}


def is_openinference_span(record: SpanRecord) -> bool:
    a = record.attributes
    return "openinference.span.kind" in a or any(k.startswith(("llm.input_messages", "llm.output_messages"))
                                                 for k in a)


def unflatten(attributes: dict[str, Any], prefix: str) -> Any:
    """`prefix.0.message.role = "user"` and friends as `[{"message": {"role": "user"}}]`."""
    tree: dict = {}
    for key, value in _flat(attributes, prefix):
        node = tree
        parts = key[len(prefix) + 1:].split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return _lists(tree) if tree else None


def _flat(attributes: dict[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    """The dotted keys under `prefix`, whether the exporter flattened the values or kept them nested
    (lists and objects whose keys may themselves be dotted: `{"message.role": ...}`)."""
    def walk(key: str, value: Any) -> Iterator[tuple[str, Any]]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(f"{key}.{k}", v)
        elif isinstance(value, list) and all(isinstance(v, dict) for v in value) and value:
            for i, v in enumerate(value):
                yield from walk(f"{key}.{i}", v)
        else:
            yield key, value

    for key, value in attributes.items():
        if key == prefix or key.startswith(prefix + "."):
            yield from walk(key, value)


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_lists(node[k]) for k in sorted(node, key=int)]
    return {k: _lists(v) for k, v in node.items()}


def parse_span(record: SpanRecord) -> Conversation:
    attrs = record.attributes
    where = f"{record.path}.attributes"
    kind = attrs.get("openinference.span.kind")
    if kind is not None and str(kind).upper() != "LLM":
        raise ParseError(f"span '{record.name}' is an OpenInference {kind} span, not an LLM call",
                         path=f"{where}['openinference.span.kind']", code="not_a_model_call")
    calls = Calls()
    inputs = unflatten(attrs, "llm.input_messages")
    outputs = unflatten(attrs, "llm.output_messages")
    if inputs is None and outputs is None:
        raise ParseError(f"span '{record.name}' holds no llm.input_messages or llm.output_messages (hidden "
                         "inputs/outputs, or only input.value was logged)", path=where, code="content_not_captured")
    messages, system = _messages(inputs, calls, f"{where}['llm.input_messages']")
    notes = []
    answer, _ = _messages(outputs[:1] if isinstance(outputs, list) else outputs, calls,
                          f"{where}['llm.output_messages']")
    if isinstance(outputs, list) and len(outputs) > 1:
        notes.append(f"{len(outputs)} output messages logged; the first is the assistant turn")
    tools = _tools(unflatten(attrs, "llm.tools"), f"{where}['llm.tools']")
    genai = {"gen_ai.response.model": attrs.get("llm.model_name"),
             "gen_ai.usage.input_tokens": attrs.get("llm.token_count.prompt"),
             "gen_ai.usage.output_tokens": attrs.get("llm.token_count.completion"),
             "gen_ai.provider.name": attrs.get("llm.provider") or attrs.get("llm.system")}
    params = json_attribute(attrs, "llm.invocation_parameters", where)
    if isinstance(params, dict):
        genai.update({f"gen_ai.request.{k}": v for k, v in params.items()})
    notes.append("OpenInference has no attribute for reasoning: a model's thinking is not in the span")
    conv = conversation(NAME, record, {k: v for k, v in genai.items() if v is not None}, messages + answer,
                        system, tools, notes)
    return msgspec.structs.replace(conv, meta=msgspec.structs.replace(
        conv.meta, lacks=conv.meta.lacks + ("source_reasoning_not_logged",)))


def _messages(value: Any, calls: Calls, path: str) -> tuple[list[Message], tuple]:
    if value is None:
        return [], ()
    if not isinstance(value, list):
        raise ParseError("messages must be numbered 0, 1, ...", path=path)
    messages: list[Message] = []
    system: list = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        message = item.get("message") if isinstance(item, dict) else None
        if not isinstance(message, dict):
            raise ParseError("expected message.* attributes", path=where)
        role = _ROLES.get(str(message.get("role", "")).lower())
        if role is None:
            raise ParseError(f"unknown role {message.get('role')!r}; known: {', '.join(_ROLES)}",
                             path=f"{where}.message.role")
        blocks = _content(message, where)
        if role == "tool":
            call_id = message.get("tool_call_id") if isinstance(message.get("tool_call_id"), str) else None
            name = message.get("name") if isinstance(message.get("name"), str) else None
            blocks = [calls.result(call_id, blocks, name=name)]
        elif role == "assistant":
            blocks += _tool_calls(message, calls, where)
        if role == "system" and not messages:
            system.extend(b for b in blocks if isinstance(b, (Text, Media)))
            continue
        messages.append(Message(role, tuple(blocks)))  # type: ignore[arg-type]
    return messages, tuple(system)


def _content(message: dict, where: str) -> list:
    out: list = []
    if isinstance(message.get("content"), str) and message["content"]:
        out.append(Text(message["content"]))
    contents = message.get("contents")
    for j, item in enumerate(contents if isinstance(contents, list) else []):
        part = item.get("message_content") if isinstance(item, dict) else None
        if not isinstance(part, dict):
            raise ParseError("expected message_content.* attributes", path=f"{where}.message.contents[{j}]")
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            out.append(Text(part["text"]))
        elif kind in ("image", "audio", "video"):
            out.append(_media(kind, part.get(kind)))
        else:
            raise ParseError(f"unknown message_content.type {kind!r}", path=f"{where}.message.contents[{j}]")
    return out


def _media(kind: str, value: Any) -> Media:
    inner = value.get(kind) if isinstance(value, dict) and isinstance(value.get(kind), dict) else value
    url = inner.get("url") if isinstance(inner, dict) else None
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return media(kind, head or None, data=data)
    return media(kind, inner.get("mime_type") if isinstance(inner, dict) else None, url=url)


def _tool_calls(message: dict, calls: Calls, where: str) -> list:
    out = []
    for k, item in enumerate(message.get("tool_calls") or []):
        call = item.get("tool_call") if isinstance(item, dict) else None
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ParseError("a tool call needs tool_call.function.name", path=f"{where}.message.tool_calls[{k}]")
        out.append(calls.call(function["name"], function.get("arguments"),
                              call.get("id") if isinstance(call.get("id"), str) else None))
    if isinstance(message.get("function_call_name"), str):  # the legacy single function call
        out.append(calls.call(message["function_call_name"], message.get("function_call_arguments_json"), None))
    return out


def _tools(value: Any, path: str) -> tuple[Tool, ...]:
    out = []
    for i, item in enumerate(value if isinstance(value, list) else []):
        schema = (item.get("tool") or {}).get("json_schema") if isinstance(item, dict) else None
        if isinstance(schema, str):
            try:
                schema = jsonpolicy.loads(schema)
            except orjson.JSONDecodeError as exc:
                raise ParseError(f"tool.json_schema is not valid JSON: {exc}", path=f"{path}[{i}]",
                                 code="invalid_attribute_json") from None
        spec = schema.get("function", schema) if isinstance(schema, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ParseError("a tool's json_schema needs a 'name'", path=f"{path}[{i}]")
        parameters = spec.get("parameters", spec.get("input_schema"))
        out.append(Tool(name=spec["name"], description=spec.get("description"),
                        **({"parameters": parameters} if parameters is not None else {})))
    return tuple(out)
