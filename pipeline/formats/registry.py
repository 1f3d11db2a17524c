"""The registry of wire formats: names to codecs, detection across them, parse and serialize by name.
Each codec offers:

    NAME: str
    detect(obj) -> Detection | None          is this record one of mine, and in which shape?
    parse(obj, shape=None, strict=False) -> Conversation   shape: "request" | "messages" | "response";
                                             strict refuses unknown block types and guessed pairings
    serialize(conv, shape="request", ledger) -> body   (entries go to the Ledger)
    form_losses(conv, target) -> [(kind, path, reason)]   optional: layout of its records another target
                                             cannot keep (ledgered when converting away)

Adding a provider touches its subpackage and one line of FORMATS.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import msgspec

from ..conversation import Conversation, Text
from ..errors import ConfigError, ConversionError, SftprepError, ShapeError
from ..ledger import Ledger, LedgerEntry
from . import anthropic, gemini, openai_chat, openai_responses
from .base import SHAPES, Detection

FORMATS: dict[str, ModuleType] = {
    "anthropic": anthropic,
    "openai-chat": openai_chat,
    "openai-responses": openai_responses,
    "gemini": gemini,
}

TIE_ORDER = ("openai-chat", "anthropic", "openai-responses", "gemini")

ALIASES = {"openai_chat": "openai-chat", "openai_responses": "openai-responses", "google": "gemini",
           "openai": "openai-chat"}


def get(name: str) -> ModuleType:
    key = ALIASES.get(name, name)
    try:
        return FORMATS[key]
    except KeyError:
        raise ConfigError(f"unknown format '{name}'; valid: {', '.join(FORMATS)}", code="unknown_format") from None


def detect(obj: Any) -> Detection:
    """The one format and shape this record fits. Several equally likely candidates is an error that
    names them (pass the format explicitly); none is an error too."""
    found = [d for d in (module.detect(obj) for module in FORMATS.values()) if d is not None]
    certain = [d for d in found if d.certain]
    if len(certain) == 1:
        return certain[0]
    candidates = certain or found
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ShapeError(f"not a record of any known format ({', '.join(FORMATS)}): {_describe(obj)}")
    names = ", ".join(f"{d.format} {d.shape}" for d in candidates)
    raise ShapeError(f"ambiguous record, could be: {names}; name the format with --from", code="ambiguous_shape")


def is_message(obj: Any) -> bool:
    """One element of a bare message list (a message, an input item, a content), not a record of its
    own: no format reads it alone, and some format reads a list holding it as messages."""
    if not isinstance(obj, dict) or any(module.detect(obj) is not None for module in FORMATS.values()):
        return False
    return any(getattr(module.detect([obj]), "shape", None) == "messages" for module in FORMATS.values())


def parse(obj: Any, fmt: str | None = None, shape: str | None = None, *, strict: bool = False) -> Conversation:
    if fmt is None:
        try:
            found = detect(obj)
        except ShapeError as exc:
            if exc.code != "ambiguous_shape" or strict:
                raise
            return _parse_ambiguous(obj, shape, exc)
        return FORMATS[found.format].parse(obj, shape=shape or found.shape, strict=strict)
    module = get(fmt)
    if shape is None:
        found = module.detect(obj)
        if found is None:
            raise ShapeError(f"not a {module.NAME} record: {_describe(obj)}")
        shape = found.shape
    if shape not in SHAPES:
        raise ConfigError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", code="unknown_shape")
    return module.parse(obj, shape=shape, strict=strict)


def _parse_ambiguous(obj: Any, shape: str | None, error: ShapeError) -> Conversation:
    """A record several formats can read (`[{"role": "user", "content": "hi"}]`) is no problem when
    they all read the same conversation: take the first, and say so. Otherwise the ambiguity stands."""
    found = [d for d in (module.detect(obj) for module in FORMATS.values()) if d is not None]
    parsed = []
    for d in found:
        try:
            parsed.append(FORMATS[d.format].parse(obj, shape=shape or d.shape))
        except SftprepError:
            continue
    if not parsed or len({_content_key(conv) for conv in parsed}) != 1:
        raise error
    names = ", ".join(conv.meta.provider for conv in parsed)
    # Chat Completions logs and fine-tuning files are the usual source of such plain records.
    conv = min(parsed, key=lambda c: TIE_ORDER.index(c.meta.provider))
    return msgspec.structs.replace(conv, meta=msgspec.structs.replace(
        conv.meta, notes=conv.meta.notes + (f"format ambiguous ({names}); all read the same conversation",)))


_LAYOUT = ("form", "extras", "origin")
_RESULT_LAYOUT = (*_LAYOUT, "name")


def _content_key(conv: Conversation) -> bytes:
    """What a conversation says, without how one format laid it out: form, extras and meta are left
    out, and leading instructions count the same whether kept apart or as leading messages."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            # A result's tool name is its call's: some parsers copy it onto the result, others do not.
            drop = _RESULT_LAYOUT if value.get("type") == "tool_result" else _LAYOUT
            return {k: strip(v) for k, v in value.items() if k not in drop}
        if isinstance(value, (list, tuple)):
            return [strip(v) for v in value]
        return value

    turns = [("system", block) for block in conv.system] + [("developer", block) for block in conv.developer]
    # An empty text says nothing: one format reads `"content": ""` as one, another as no block at all.
    turns += [(m.role, block) for m in conv.messages for block in m.blocks
              if not (isinstance(block, Text) and block.text == "" and not block.extras)]
    key = {"turns": strip(msgspec.to_builtins(turns)), "tools": strip(msgspec.to_builtins(conv.tools))}
    return msgspec.json.encode(key, order="deterministic")


def serialize(conv: Conversation, target: str, *, shape: str | None = None,
              strict: bool = False) -> tuple[Any, list[LedgerEntry]]:
    """Write `conv` in `target` format. Shape defaults to the one the conversation was read in when
    the target is its own format, else a request body."""
    module = get(target)
    if conv.meta.provider != module.NAME and not (conv.messages or conv.system or conv.developer):
        # e.g. a Responses request continuing `previous_response_id`: the history lives server-side.
        raise ConversionError("the conversation is empty (its history is stored server-side, or it has none): "
                              f"nothing to write as {module.NAME}", code="empty_conversation")
    if shape is None:
        shape = conv.meta.shape if conv.meta.provider == module.NAME and conv.meta.shape in SHAPES else "request"
    ledger = Ledger(module.NAME, strict=strict)
    body = module.serialize(conv, shape=shape, ledger=ledger)
    source = FORMATS.get(conv.meta.provider or "")
    if source is not None and source is not module and hasattr(source, "form_losses"):
        # Layout only the source format can write, which another target cannot keep: a round trip
        # through it comes back different, so the ledger says how.
        for kind, path, reason in source.form_losses(conv, module.NAME):
            ledger.add(kind, path, reason)
    return body, ledger.entries


def _describe(obj: Any) -> str:
    if isinstance(obj, dict):
        keys = list(obj)[:8]
        return "an object with keys " + ", ".join(repr(k) for k in keys) + (" ..." if len(obj) > 8 else "")
    if isinstance(obj, list):
        return f"an array of {len(obj)} items"
    return f"a {type(obj).__name__}"
