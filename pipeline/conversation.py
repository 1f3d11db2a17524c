"""The canonical conversation: one provider-neutral form that every wire format parses into.

Pure data, no I/O. Every type is a frozen msgspec Struct, so values are immutable, cheap to build and
encode to JSON with a `type` tag on blocks.

Two per-object slots keep same-provider round trips exact without polluting the shared fields:
- `extras[provider]`: data the provider sent that has no canonical field (cache_control, citations,
  item status...). A serializer for another provider cannot carry it and must write a ledger entry.
- `form[provider]`: how the provider laid out what the canonical fields already hold (content was a
  plain string, two parts shared one item...). Pure layout: never ledgered.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType, field

# Provider names, as used on the command line and as keys of `extras` / `form`.
Provider = Literal["anthropic", "openai-chat", "openai-responses", "gemini"]
PROVIDERS: tuple[str, ...] = ("anthropic", "openai-chat", "openai-responses", "gemini")

Role = Literal["user", "assistant", "tool", "system", "developer"]
ToolKind = Literal["function", "custom", "hosted"]
MediaKind = Literal["image", "audio", "video", "document", "file"]

# provider name -> {field: JSON value}
Slots = dict[str, dict[str, Any]]

# Where every call must be a JSON object (Anthropic, Gemini, chat templates), a custom tool's free text is
# written as this one string field, and the tool is declared as a function taking it (custom_input_schema).
CUSTOM_INPUT = "input"


def custom_input_schema() -> dict[str, Any]:
    """The parameters a custom (free-form) tool is declared with where only functions exist: a new dict
    each time (bodies and template inputs are built from it)."""
    return {"type": "object", "properties": {CUSTOM_INPUT: {"type": "string"}}, "required": [CUSTOM_INPUT]}


class Text(Struct, frozen=True, tag="text", omit_defaults=True):
    text: str
    # Gemini `thoughtSignature` when the provider signed this text part.
    signature: str | None = None
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)


class Media(Struct, frozen=True, tag="media", omit_defaults=True):
    """An image, audio clip, video, document or file: inline base64, a URL, or a provider file id."""

    kind: MediaKind
    media_type: str | None = None
    data: str | None = None  # base64, exactly as sent
    url: str | None = None
    file_id: str | None = None
    filename: str | None = None
    # A document given as plain text (Anthropic `document` with a text source).
    text: str | None = None
    signature: str | None = None
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)


class ToolCall(Struct, frozen=True, tag="tool_call", omit_defaults=True):
    """A request to run a tool. `arguments` is the parsed JSON; when the provider sent a string
    (OpenAI), `raw_arguments` keeps it byte for byte. `arguments_valid` is False when that string does
    not parse: then `arguments` is UNSET and the raw string is the only truth."""

    id: str  # canonical, deterministic (see pipeline.ids)
    name: str
    arguments: Any | UnsetType = UNSET
    raw_arguments: str | None = None
    arguments_valid: bool = True
    provider_id: str | None = None  # the id the provider wrote, re-emitted for the same provider
    kind: ToolKind = "function"
    signature: str | None = None  # Gemini thoughtSignature signing this call
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)


class ToolResult(Struct, frozen=True, tag="tool_result", omit_defaults=True):
    """The outcome of a call. `content` holds text and media; `output` holds a structured JSON value
    (Gemini `response`, Responses structured outputs) when the provider gave one."""

    call_id: str | None  # canonical id of the answered call; None when no earlier call matches
    provider_id: str | None = None  # the call id as the provider wrote it on the result
    name: str | None = None
    content: tuple[Text | Media, ...] = ()
    output: Any | UnsetType = UNSET
    is_error: bool = False
    # How the result was paired with its call: by id, or by name and order (providers without ids).
    matched_by: Literal["id", "name_order"] | None = None
    kind: ToolKind = "function"
    signature: str | None = None
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)


class Reasoning(Struct, frozen=True, tag="reasoning", omit_defaults=True):
    """Model reasoning: visible text and/or summary, plus the opaque state needed to replay it.
    `origin` names the provider whose opaque state this is: it is only valid there."""

    text: str | None = None
    summary: tuple[str, ...] = ()
    signature: str | None = None  # Anthropic thinking signature, Gemini thoughtSignature
    redacted: str | None = None  # Anthropic redacted_thinking data
    encrypted: str | None = None  # OpenAI encrypted_content
    item_id: str | None = None  # OpenAI reasoning item id
    origin: str | None = None
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)


class Opaque(Struct, frozen=True, tag="opaque", omit_defaults=True):
    """A provider-native item with no canonical meaning elsewhere (server-side tool calls and their
    results, compaction, item references...). Carried verbatim; only its own provider can emit it."""

    provider: str
    item_type: str  # the provider's own type name, e.g. web_search_tool_result
    payload: Any
    # "call" / "result" for hosted tool traffic, so reports can count it; "other" otherwise.
    role_hint: Literal["call", "result", "other"] = "other"
    name: str | None = None


Block = Union[Text, Media, ToolCall, ToolResult, Reasoning, Opaque]
ContentBlock = Union[Text, Media]


class Message(Struct, frozen=True, omit_defaults=True):
    role: Role
    blocks: tuple[Block, ...] = ()
    name: str | None = None
    # OpenAI fine-tuning `weight`: 0 excludes an assistant turn from training.
    weight: int | None = None
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)


class Tool(Struct, frozen=True, omit_defaults=True):
    name: str
    description: str | None = None
    parameters: Any | UnsetType = UNSET  # JSON Schema for the arguments
    kind: ToolKind = "function"
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)


class Meta(Struct, frozen=True, omit_defaults=True):
    source: str | None = None  # "FILE:LINE" or "FILE:LINE#N" for several records on one line
    provider: str | None = None  # the wire format the record was parsed from
    shape: str | None = None  # request, messages, response, exchange, session, ...
    model: str | None = None
    response_id: str | None = None
    created: str | None = None
    stop_reason: str | None = None
    usage: Any | UnsetType = UNSET
    notes: tuple[str, ...] = ()  # what a parser decided (ids synthesized, calls matched by order)
    # What the log source could not carry (validation codes `source_*`: reasoning state, full tool output...).
    lacks: tuple[str, ...] = ()


class Conversation(Struct, frozen=True, omit_defaults=True):
    messages: tuple[Message, ...] = ()
    # Leading instructions, kept apart: templates render them differently.
    system: tuple[ContentBlock, ...] = ()
    developer: tuple[ContentBlock, ...] = ()
    tools: tuple[Tool, ...] = ()
    meta: Meta = field(default_factory=Meta)
    # Request parameters (model, max_tokens, tool_choice, ...) and unknown top-level keys, per provider.
    extras: Slots = field(default_factory=dict)
    form: Slots = field(default_factory=dict)
    # The record as it came in, when the caller asked to keep it.
    original: Any | UnsetType = UNSET


def iter_blocks(conv: Conversation):
    """(message index, block index, block) over every message block, in order."""
    for mi, message in enumerate(conv.messages):
        for bi, block in enumerate(message.blocks):
            yield mi, bi, block


def tool_calls(conv: Conversation) -> list[ToolCall]:
    return [b for _, _, b in iter_blocks(conv) if isinstance(b, ToolCall)]


# Struct fields in declaration order; the objects inside user data (arguments, results, schemas, opaque
# payloads) keep their keys in the order they came: a template renders them in that order, so sorting
# them would make the stored conversation render to other tokens.
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Conversation)


def to_json(conv: Conversation) -> bytes:
    """JSON of the canonical form; the same conversation read from the same input gives the same bytes."""
    return _encoder.encode(conv)


def from_json(data: bytes | str) -> Conversation:
    return _decoder.decode(data)


def to_builtins(conv: Conversation) -> dict:
    return msgspec.to_builtins(conv)
