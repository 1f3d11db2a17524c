"""Secrets and personal data out of a conversation, by structure: every text the model will see is
scanned (system and developer prompts, tool descriptions, user and assistant text, reasoning text,
tool-call argument values with their keys as context, tool results), and opaque replay state
(signatures, encrypted reasoning, redacted thinking, provider payloads), ids and media bytes are never
touched. A value found once is replaced by the same typed placeholder wherever it appears in the record."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec
from msgspec import UNSET

from ...conversation import Conversation, Media, Message, Reasoning, Text, ToolCall, ToolResult
from .detectors import Finding, find

# Keys of a raw provider record whose values are replay state or bytes, never text a model reads.
OPAQUE_KEYS = frozenset({"signature", "thoughtSignature", "thought_signature", "encrypted_content", "data",
                         "redacted_thinking", "encryptedContent", "b64_json", "image_url_data"})


@dataclass
class Hit:
    detector: str
    kind: str  # secret | personal
    path: str  # where in the canonical conversation
    where: str  # system, tool_description, user_text, assistant_text, reasoning, tool_arguments, tool_result


@dataclass
class Placeholders:
    """One placeholder per distinct value, numbered per detector: `<SECRET:aws_access_key>`, then
    `<SECRET:aws_access_key_2>` for a second key in the same record."""

    by_value: dict[str, str] = field(default_factory=dict)
    per_detector: dict[str, int] = field(default_factory=dict)

    def get(self, value: str, finding: Finding) -> str:
        known = self.by_value.get(value)
        if known is None:
            n = self.per_detector.get(finding.detector, 0) + 1
            self.per_detector[finding.detector] = n
            label = "SECRET" if finding.kind == "secret" else "PII"
            known = f"<{label}:{finding.detector}{'' if n == 1 else f'_{n}'}>"
            self.by_value[value] = known
        return known


class Redactor:
    """Scans one record; `hits` says what was found where, `placeholders` what replaced it."""

    def __init__(self, *, phone_region: str | None = None, apply: Callable[[str], bool] = lambda d: True):
        self.phone_region = phone_region
        self.apply = apply  # whether a detector's findings are replaced (False: only reported)
        self.placeholders = Placeholders()
        self.hits: list[Hit] = []

    # --- strings -----------------------------------------------------------------------------------

    def text(self, text: str, path: str, where: str, *, context: str = "") -> str:
        """`text` with its findings replaced. `context` (a JSON key) is scanned in front of the value, so
        `{"password": "..."}` reads as the assignment it is."""
        if not text:
            return text
        prefix = f'{context} = "' if context else ""
        line = prefix + text + ('"' if context else "")
        findings = [f._replace(start=f.start - len(prefix), end=min(f.end - len(prefix), len(text)))
                    for f in find(line, phone_region=self.phone_region) if f.start >= len(prefix)]
        findings = [f for f in findings if f.end > f.start]
        replacements = []
        for finding in findings:  # in reading order, so placeholders are numbered as they appear
            self.hits.append(Hit(finding.detector, finding.kind, path, where))
            if self.apply(finding.detector):
                replacements.append((finding, self.placeholders.get(text[finding.start:finding.end], finding)))
        out = text
        for finding, placeholder in reversed(replacements):
            out = out[:finding.start] + placeholder + out[finding.end:]
        return out

    def known(self, text: str) -> str:
        """Values already found elsewhere in the record, replaced here too (as written or JSON-escaped)."""
        for value, placeholder in self.placeholders.by_value.items():
            if value in text:
                text = text.replace(value, placeholder)
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]
            if escaped != value and escaped in text:
                text = text.replace(escaped, json.dumps(placeholder)[1:-1])
        return text

    def value(self, value: Any, path: str, where: str, key: str = "") -> Any:
        """A JSON value (arguments, structured output): string leaves scanned, keys kept as they are."""
        if isinstance(value, str):
            return self.text(value, path, where, context=key)
        if isinstance(value, dict):
            return {k: self.value(v, f"{path}.{k}", where, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, f"{path}[{i}]", where, key) for i, v in enumerate(value)]
        return value

    def raw(self, value: Any, path: str = "$", where: str = "record") -> Any:
        """A record as it came in (what the rejects file keeps), or provider data kept beside the
        canonical blocks: every string but opaque state scanned, keys as context."""
        if isinstance(value, str):
            return self.text(self.known(value), path, where)
        if isinstance(value, dict):
            return {k: v if k in OPAQUE_KEYS else self.raw(v, f"{path}.{k}", where) for k, v in value.items()}
        if isinstance(value, list):
            return [self.raw(v, f"{path}[{i}]", where) for i, v in enumerate(value)]
        return value

    # --- the conversation ----------------------------------------------------------------------------

    def conversation(self, conv: Conversation) -> Conversation:
        changes: dict[str, Any] = {}
        if conv.system:
            changes["system"] = tuple(self._block(b, f"$.system[{i}]", "system") for i, b in enumerate(conv.system))
        if conv.developer:
            changes["developer"] = tuple(self._block(b, f"$.developer[{i}]", "system")
                                         for i, b in enumerate(conv.developer))
        if conv.tools:
            changes["tools"] = tuple(
                t if t.description is None else msgspec.structs.replace(
                    t, description=self.text(t.description, f"$.tools[{i}].description", "tool_description"))
                for i, t in enumerate(conv.tools))
        changes["messages"] = tuple(self._message(m, mi) for mi, m in enumerate(conv.messages))
        if conv.extras:
            changes["extras"] = self.raw(conv.extras, "$.extras", "provider_data")
        if conv.original is not UNSET:
            changes["original"] = self.raw(conv.original, "$.original", "provider_data")
        return msgspec.structs.replace(conv, **changes)

    def _message(self, message: Message, mi: int) -> Message:
        where = "tool_result" if message.role == "tool" else f"{message.role}_text"
        blocks = tuple(self._block(b, f"$.messages[{mi}].blocks[{bi}]", where) for bi, b in enumerate(message.blocks))
        extras = self.raw(message.extras, f"$.messages[{mi}].extras", "provider_data") if message.extras else message.extras
        return msgspec.structs.replace(message, blocks=blocks, extras=extras)

    def _block(self, block: Any, path: str, where: str) -> Any:
        if getattr(block, "extras", None):  # provider data kept beside the block (a tool's raw stdout)
            block = msgspec.structs.replace(block, extras=self.raw(block.extras, f"{path}.extras", "provider_data"))
        return self._block_text(block, path, where)

    def _block_text(self, block: Any, path: str, where: str) -> Any:
        replace = msgspec.structs.replace
        if isinstance(block, Text):
            return replace(block, text=self.text(block.text, path, where))
        if isinstance(block, Media):
            return block if block.text is None else replace(block, text=self.text(block.text, path, where))
        if isinstance(block, Reasoning):
            return replace(block, text=None if block.text is None else self.text(block.text, path, "reasoning"),
                           summary=tuple(self.text(s, f"{path}.summary[{i}]", "reasoning")
                                         for i, s in enumerate(block.summary)))
        if isinstance(block, ToolCall):
            return self._call(block, path)
        if isinstance(block, ToolResult):
            content = tuple(self._block(c, f"{path}.content[{i}]", "tool_result") for i, c in enumerate(block.content))
            output = block.output if block.output is UNSET else self.value(block.output, f"{path}.output", "tool_result")
            return replace(block, content=content, output=output)
        return block  # Opaque: the provider's own payload, replayed as it was

    def _call(self, call: ToolCall, path: str) -> ToolCall:
        if call.arguments is UNSET or not call.arguments_valid:
            raw = call.raw_arguments
            return call if raw is None else msgspec.structs.replace(
                call, raw_arguments=self.text(raw, f"{path}.arguments", "tool_arguments"))
        arguments = self.value(call.arguments, f"{path}.arguments", "tool_arguments")
        if arguments == call.arguments:
            return call
        raw = call.raw_arguments
        if raw is not None:
            # Keep the model's own spelling of the arguments where the placeholders slot in cleanly.
            raw = self.known(raw)
            try:
                if json.loads(raw) != arguments:
                    raw = json.dumps(arguments, ensure_ascii=False)
            except ValueError:
                raw = json.dumps(arguments, ensure_ascii=False)
        return msgspec.structs.replace(call, arguments=arguments, raw_arguments=raw)
