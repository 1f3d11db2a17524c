"""Which records are Gemini's: request bodies, bare `contents` lists and response objects (one whose
prompt was blocked, without candidates, included)."""

from __future__ import annotations

from typing import Any

from ..base import Detection
from .parts import NAME

_RESPONSE_HINTS = ("responseId", "response_id", "modelVersion", "model_version", "promptFeedback", "prompt_feedback")


def detect(obj: Any) -> Detection | None:
    if isinstance(obj, dict):
        if isinstance(obj.get("contents"), list):
            return Detection(NAME, "request", True)
        if isinstance(obj.get("candidates"), list):
            return Detection(NAME, "response", True)
        if ("usageMetadata" in obj or "usage_metadata" in obj) and any(key in obj for key in _RESPONSE_HINTS):
            return Detection(NAME, "response", True)  # a response whose prompt was blocked: no candidates
        return None
    if isinstance(obj, list) and obj and all(isinstance(item, dict) for item in obj):
        # `parts` and role "model" are Gemini's alone; `content` belongs to the other formats.
        if any(isinstance(item.get("parts"), list) for item in obj) and not any("content" in item for item in obj):
            return Detection(NAME, "messages", True)
    return None
