"""Row columns about the shape of a conversation: its window (index, count) and where its tokens go
by role. The session id and the folded count are set by the parent (`fold`), which alone sees them."""

from __future__ import annotations

from typing import Any

import orjson

from .writers import ROLE_KEYS

# Span kinds outside any message: the instructions and the tool definitions; the rest is scaffolding.
_HEADER_KINDS = {"system": "system", "developer": "system", "tools": "tools"}


def role_tokens(rendered, conv) -> dict[str, int]:
    """Tokens per role: system (and developer) instructions, tool definitions, user and assistant turns,
    tool results (wherever the format put them), and the template's own scaffolding."""
    out = dict.fromkeys(ROLE_KEYS, 0)
    roles = [m.role for m in conv.messages]
    for span in rendered.spans:
        n = span.token_end - span.token_start
        if span.kind == "tool_result":  # results sit in user turns in some formats (Anthropic)
            out["tool"] += n
        elif span.message is not None:
            role = roles[span.message]
            out[role if role in out else "system"] += n
        else:
            out[_HEADER_KINDS.get(span.kind, "template")] += n
    return out


def shape_columns(item, rendered, conv, window: tuple[int, int]) -> dict[str, Any]:
    # session and folded: placeholders the parent's Folder fills in when it writes the row
    return {"session": "", "folded": 0, "window": window[0], "windows": window[1],
            "role_tokens": orjson.dumps(role_tokens(rendered, conv)).decode()}
