"""OpenAI Responses items: what detection, reading and writing share (the item types and the side each
belongs to, the `openai-responses` slots, argument JSON), and the layout kept to rebuild the same items.

The wire format is a flat list of items. Parsing groups them: consecutive assistant-side items
(reasoning, assistant messages, calls, hosted tool items) form one assistant message, consecutive
outputs form one "tool" message, and every user/system/developer message item is its own message.

Layout needed to split a group back into the very same items lives in `form["openai-responses"]`:
- on a Text/Media block that starts a message item: `item` = that item's layout ({"t": type key was
  present, "s": content was a string, "kv": {id, status as written}});
- on single-item blocks (calls, results, reasoning): `kv` = item keys kept only for layout (id, status);
- on the message: `empty` (message items with `content: []`, by block offset), `parts` (indexes of
  Opaque blocks that are unknown content parts, not items) and `item_at` (layout of an item whose first
  part is such an Opaque).
Semantic data without a canonical field (phase, annotations, caller, namespace, unknown keys) lives in
`extras["openai-responses"]`; a message item's own keys go on its first block as `message.<key>`.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ... import jsonpolicy

NAME = "openai-responses"
MAX_CALL_ID = 64  # the API rejects longer call_id values (string_above_max_length)

MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})

# Which side of the conversation an item type belongs to (decides grouping).
ASSISTANT_TYPES = frozenset({
    "reasoning", "function_call", "custom_tool_call", "web_search_call", "file_search_call",
    "computer_call", "code_interpreter_call", "image_generation_call", "local_shell_call", "shell_call",
    "apply_patch_call", "mcp_call", "mcp_list_tools", "mcp_approval_request", "tool_search_call",
    "compaction", "program", "item_reference",
})
TOOL_TYPES = frozenset({
    "function_call_output", "custom_tool_call_output", "computer_call_output", "local_shell_call_output",
    "shell_call_output", "apply_patch_call_output", "tool_search_output", "program_output",
})
USER_TYPES = frozenset({"mcp_approval_response", "compaction_trigger"})
DEVELOPER_TYPES = frozenset({"additional_tools", "configuration_update"})
KNOWN_ITEM_TYPES = ASSISTANT_TYPES | TOOL_TYPES | USER_TYPES | DEVELOPER_TYPES | {"message"}
# Part types no other provider uses: their presence makes a bare list certainly ours.
OWN_PART_TYPES = frozenset({"input_text", "output_text", "input_image", "input_file"})

ERROR_PREFIX = "Error: "
MISSING: Any = object()  # a key left out, told apart from one written as null


def slot(values: dict) -> dict:
    """`values` as this codec's slot of `extras` or `form`; no slot when empty."""
    return {NAME: values} if values else {}


def own(slots: dict) -> dict | None:
    """This codec's slot of `extras` or `form`, or None."""
    return slots.get(NAME)


def item_side(item: dict, item_type: str) -> str:
    """The canonical role an item's group takes: assistant, tool, user or developer/system."""
    if item_type in ASSISTANT_TYPES:
        return "assistant"
    if item_type in TOOL_TYPES:
        return "tool"
    if item_type in USER_TYPES:
        return "user"
    role = item.get("role")
    if item_type in DEVELOPER_TYPES:
        return role if role in ("developer", "system") else "developer"
    # An unknown type: trust its role when it has one, else guess from the name.
    if isinstance(role, str) and role in MESSAGE_ROLES:
        return role
    return "tool" if item_type.endswith("_output") else "assistant"


def parse_json_arguments(raw: str) -> tuple[Any, bool]:
    return jsonpolicy.parse_or_unset(raw, UNSET)
