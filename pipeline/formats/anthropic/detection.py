"""Which records are Anthropic's (request bodies, bare message lists, response objects), told apart from
the other formats' look-alikes by their keys and block types."""

from __future__ import annotations

from typing import Any

from ..base import Detection
from .blocks import NAME, OPAQUE_TYPES, ROLES

# Block types only Anthropic uses; "text" is shared with OpenAI Chat content parts.
_OWN_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
                         *OPAQUE_TYPES})
# Message keys and part types that belong to other formats.
_FOREIGN_MESSAGE_KEYS = frozenset({"tool_calls", "tool_call_id", "function_call", "refusal", "audio",
                                   "reasoning_content", "name", "parts"})
_FOREIGN_BLOCKS = frozenset({"image_url", "input_audio", "file", "refusal", "input_text", "input_image",
                             "input_file", "output_text"})
_FOREIGN_REQUEST_KEYS = frozenset({"contents", "input", "instructions", "generationConfig", "functions",
                                   "response_format", "max_completion_tokens", "frequency_penalty",
                                   "presence_penalty", "logit_bias", "logprobs", "n", "seed",
                                   "parallel_tool_calls", "reasoning_effort", "stream_options",
                                   "modalities", "prediction", "web_search_options"})
_OWN_REQUEST_KEYS = frozenset({"system", "stop_sequences", "top_k", "thinking", "mcp_servers", "container",
                               "context_management", "output_config", "output_format", "inference_geo"})
_OWN_TOOL_CHOICES = frozenset({"auto", "any", "tool", "none"})


def _scan_messages(messages: list) -> tuple[bool, bool]:
    """(could be Anthropic messages, a feature only Anthropic has was seen)."""
    certain = False
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else None
        if not isinstance(role, str) or role not in ROLES or not m.keys().isdisjoint(_FOREIGN_MESSAGE_KEYS):
            return False, False
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                btype = b.get("type") if isinstance(b, dict) else None
                if not isinstance(btype, str) or btype in _FOREIGN_BLOCKS:
                    return False, False
                if btype in _OWN_BLOCKS:
                    certain = True
        elif not isinstance(content, str) and not (content is None and "content" not in m and role == "system"):
            return False, False
    return True, certain


def detect(obj: Any) -> Detection | None:
    if isinstance(obj, list):
        if not obj:
            return None
        ok, certain = _scan_messages(obj)
        return Detection(NAME, "messages", certain) if ok else None
    if not isinstance(obj, dict):
        return None
    if obj.get("type") == "message":
        # A Responses output item is also {"type": "message", "role": "assistant"}, but has a status and
        # output_text parts.
        content = obj.get("content")
        if (obj.get("role") == "assistant" and isinstance(content, list) and "status" not in obj
                and _scan_messages([{"role": "assistant", "content": content}])[0]):
            return Detection(NAME, "response", True)
        return None
    messages = obj.get("messages")
    if not isinstance(messages, list) or not obj.keys().isdisjoint(_FOREIGN_REQUEST_KEYS):
        return None
    choice = obj.get("tool_choice")
    tools = obj.get("tools")
    # Anthropic tool_choice is an object and no tool has type "function"; a streamed body always has
    # max_tokens (only count_tokens bodies, which cannot stream, go without it).
    if (isinstance(choice, str) or ("stream" in obj and "max_tokens" not in obj)
            or (isinstance(tools, list) and any(isinstance(t, dict) and ("function" in t or t.get("type") == "function")
                                                for t in tools))):
        return None
    ok, certain = _scan_messages(messages)
    if not ok:
        return None
    if not certain:
        certain = (not obj.keys().isdisjoint(_OWN_REQUEST_KEYS)
                   or (isinstance(choice, dict) and isinstance(choice.get("type"), str)
                       and choice["type"] in _OWN_TOOL_CHOICES)
                   # other formats' tools were excluded above: a named tool here is Anthropic-shaped
                   or (isinstance(tools, list) and any(isinstance(t, dict) and "name" in t for t in tools)))
    return Detection(NAME, "request", certain)
