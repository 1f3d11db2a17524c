"""Detecting OpenAI Chat Completions records: request bodies, bare message lists and `chat.completion`
responses, told apart from the other formats by keys, roles and part types only Chat has."""

from __future__ import annotations

from typing import Any

from ..base import Detection
from .blocks import NAME

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
# `reasoning` / `reasoning_details`: what OpenAI-compatible servers (Ollama, OpenRouter, vLLM) add to messages.
_CHAT_ONLY_MESSAGE_KEYS = frozenset(("tool_calls", "tool_call_id", "function_call", "refusal", "reasoning_content",
                                     "prefix", "reasoning", "reasoning_details", "audio", "annotations"))
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
        if role == "user" or role == "assistant":  # the most frequent first
            pass
        # A mid-conversation `system` message is no proof: Anthropic accepts those too.
        elif role == "tool" or role == "function" or (in_request and role == "developer"):
            certain = True
        elif role != "system" and role != "developer":
            return None
        if not certain and not _CHAT_ONLY_MESSAGE_KEYS.isdisjoint(m):
            certain = True
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
