"""Detecting OpenAI Responses records: request bodies, bare input-item lists and response objects,
told apart from Chat message lists and from embeddings and moderation bodies (which also take `input`)."""

from __future__ import annotations

from typing import Any

from ..base import Detection
from .items import KNOWN_ITEM_TYPES, MESSAGE_ROLES, MISSING, NAME, OWN_PART_TYPES

_RESPONSE_OBJECTS = frozenset({"response", "response.compaction"})
# Request keys that embeddings and moderation bodies (which also take a string `input`) never have.
_OWN_KEYS = frozenset({"instructions", "previous_response_id", "conversation", "include", "reasoning",
                       "max_output_tokens", "text", "truncation", "background", "context_management", "tools",
                       "tool_choice", "store", "prompt"})
# A message item's keys (a Chat message also has name / tool_calls / tool_call_id, which we refuse).
_MESSAGE_ITEM_KEYS = frozenset({"type", "role", "content", "id", "status", "phase"})


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
        inp = obj.get("input", MISSING)
        if isinstance(inp, list):
            # `input` holding items is only this API (a broken item is still ours: parse names it); a
            # list of strings or tokens is an embeddings body, typed parts only is a moderation body.
            if inp and not any(isinstance(x, dict) and ("role" in x or x.get("type") in KNOWN_ITEM_TYPES
                                                        or not isinstance(x.get("type"), str)) for x in inp):
                return None
            return Detection(NAME, "request", True)
        if isinstance(inp, str):
            return Detection(NAME, "request", any(k in obj for k in _OWN_KEYS))
        if inp is MISSING and ("previous_response_id" in obj or "conversation" in obj
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
