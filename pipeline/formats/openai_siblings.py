"""Chat Completions and Responses are one vendor's two APIs: some fields that each codec keeps in its own
`extras` slot mean the same in the other. Before writing one, `adopt` moves them from the other's slot
to the target's, in the target's spelling, so they travel instead of being ledgered as dropped:

- a function tool's `strict`, a custom tool's input `format` (Chat nests a grammar under `grammar`);
- an image's `detail`; a refusal (a Text flagged `refusal`), into Chat.

Whatever else the other slot holds is left there, for the writer's usual ledger entries. `tool_choice`
converts a tool choice between the two spellings (each codec's parameter mapping uses it).
"""

from __future__ import annotations

from typing import Any

from msgspec import structs

from ..conversation import Conversation, Media, Message, Text, Tool, ToolResult

CHAT, RESPONSES = "openai-chat", "openai-responses"
_NOTHING = object()  # `_move` removes the key and writes nothing in its place
_SIBLING = {CHAT: RESPONSES, RESPONSES: CHAT}


def adopt(conv: Conversation, target: str) -> Conversation:
    """`conv` with the sibling format's shared fields moved into `target`'s slots (the same object when
    there is nothing to move)."""
    source = _SIBLING.get(target)
    if source is None:
        return conv
    tools = tuple(_tool(t, source, target) for t in conv.tools)
    messages = tuple(_message(m, source, target) for m in conv.messages)
    if all(a is b for a, b in zip(tools, conv.tools)) and all(a is b for a, b in zip(messages, conv.messages)):
        return conv
    return structs.replace(conv, tools=tools, messages=messages)


def _message(message: Message, source: str, target: str) -> Message:
    blocks = tuple(_block(b, source, target) for b in message.blocks)
    if all(a is b for a, b in zip(blocks, message.blocks)):
        return message
    return structs.replace(message, blocks=blocks)


def _block(block: Any, source: str, target: str) -> Any:
    if isinstance(block, ToolResult):
        content = tuple(_block(c, source, target) for c in block.content)
        unchanged = all(a is b for a, b in zip(content, block.content))
        return block if unchanged else structs.replace(block, content=content)
    if isinstance(block, Text) and target == CHAT:
        # Only this way: Responses takes a refusal part in input only inside an output message item, whose
        # id the API must have issued.
        return _move(block, source, target, "refusal", lambda v: v is True)
    if isinstance(block, Media) and block.kind == "image":
        return _move(block, source, target, "detail", lambda v: isinstance(v, str))
    return block


def _tool(tool: Tool, source: str, target: str) -> Tool:
    if tool.kind == "function":
        if target == CHAT and (tool.extras.get(source) or {}).get("strict") is False:
            # Chat's default: written by leaving it out, as Responses writes it back for a tool without one.
            return _move(tool, source, target, "strict", lambda v: True, _NOTHING)
        return _move(tool, source, target, "strict", lambda v: isinstance(v, bool) or v is None)
    if tool.kind == "custom":
        fmt = (tool.extras.get(source) or {}).get("format")
        converted = _custom_format(fmt, target)
        if converted is not None:
            return _move(tool, source, target, "format", lambda v: True, converted)
    return tool


def _custom_format(fmt: Any, target: str) -> dict | None:
    """A custom tool's input format in `target`'s spelling; None when it is not one both know."""
    if fmt == {"type": "text"}:
        return fmt
    if not isinstance(fmt, dict) or fmt.get("type") != "grammar":
        return None
    if target == RESPONSES:  # from Chat: {"type": "grammar", "grammar": {"definition", "syntax"}}
        grammar = fmt.get("grammar")
        if len(fmt) == 2 and isinstance(grammar, dict) and set(grammar) == {"definition", "syntax"}:
            return {"type": "grammar", "syntax": grammar["syntax"], "definition": grammar["definition"]}
        return None
    if set(fmt) == {"type", "definition", "syntax"}:  # from Responses, flat
        return {"type": "grammar", "grammar": {"definition": fmt["definition"], "syntax": fmt["syntax"]}}
    return None


def _move(obj: Any, source: str, target: str, key: str, fits, value: Any = None) -> Any:
    """`obj` with `key` moved from its `source` slot to its `target` slot (as `value` when given; not at
    all for `_NOTHING`), when the source has it, `fits` accepts it, and the target has none of its own."""
    mine = obj.extras.get(source)
    if not mine or key not in mine or not fits(mine[key]) or key in (obj.extras.get(target) or {}):
        return obj
    extras = dict(obj.extras)
    rest = {k: v for k, v in mine.items() if k != key}
    if rest:
        extras[source] = rest
    else:
        del extras[source]
    if value is not _NOTHING:
        extras[target] = {**(obj.extras.get(target) or {}), key: mine[key] if value is None else value}
    return structs.replace(obj, extras=extras)


def tool_choice(value: Any, target: str) -> Any:
    """The other API's `tool_choice` in `target`'s spelling (Chat nests a tool's name under its type), or
    None when it names something the target has no choice for (a hosted tool)."""
    if value in ("auto", "none", "required"):
        return value
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind == "allowed_tools":
        spec = value.get("allowed_tools") if target == RESPONSES else value
        if not isinstance(spec, dict) or spec.get("mode") not in ("auto", "required") \
                or not isinstance(spec.get("tools"), list):
            return None
        tools = [_named_tool(t, target) for t in spec["tools"]]
        if any(t is None for t in tools):
            return None
        if target == RESPONSES:
            return {"type": "allowed_tools", "mode": spec["mode"], "tools": tools}
        return {"type": "allowed_tools", "allowed_tools": {"mode": spec["mode"], "tools": tools}}
    return _named_tool(value, target)


def _named_tool(value: Any, target: str) -> dict | None:
    """`{"type": "function" | "custom", ...name}` in the target's spelling."""
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in ("function", "custom"):
        return None
    nested = value.get(kind)  # Chat's spelling, read when writing Responses
    name = nested.get("name") if target == RESPONSES and isinstance(nested, dict) else value.get("name")
    if not isinstance(name, str):
        return None
    return {"type": kind, "name": name} if target == RESPONSES else {"type": kind, kind: {"name": name}}
