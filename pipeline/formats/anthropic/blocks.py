"""What every part of the Anthropic codec shares: its name, the block types of provider-hosted traffic,
the message roles, and the keys of a text block."""

from __future__ import annotations

import re

NAME = "anthropic"

# Provider-hosted traffic carried verbatim as Opaque, with the role it plays.
OPAQUE_TYPES: dict[str, str] = {
    "server_tool_use": "call",
    "mcp_tool_use": "call",
    "web_search_tool_result": "result",
    "web_fetch_tool_result": "result",
    "code_execution_tool_result": "result",
    "bash_code_execution_tool_result": "result",
    "text_editor_code_execution_tool_result": "result",
    "tool_search_tool_result": "result",
    "mcp_tool_result": "result",
    "advisor_tool_result": "result",
    "compaction": "other",
    "tool_addition": "other",
    "tool_removal": "other",
    "container_upload": "other",
    "fallback": "other",
    "search_result": "other",
    "mcp_tool_listing": "other",
}


# Tool types Anthropic defines but the client runs (the rest of the typed tools run on Anthropic's side).
CLIENT_TOOL = re.compile(r"(bash|text_editor|computer|memory)_\d{8}")

ROLES = frozenset({"user", "assistant", "system"})
# A text block's own keys: read, any others go to extras; written, a block of only these can be a string.
_TEXT_KEYS = frozenset({"type", "text"})
