"""OpenAI chat fine-tuning lines: `{"messages", "tools", "parallel_tool_calls"}` with `weight` 0/1 on every
assistant message from the row's loss mask, so the API trains the turns the row trains. Only what that
API accepts: system/user/assistant/tool roles, string contents, calls with JSON-string arguments and
`call_` ids; no request parameters. What it cannot take is ledgered; a conversation it would refuse (no
assistant message, an assistant message with neither text nor calls) is not exported, with the reason."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ...ledger import Ledger
from .chat import Chat

TARGET = "openai export"
_ROLES = {"system", "user", "assistant", "tool"}
_CALL_ID = re.compile(r"call_[A-Za-z0-9_-]{1,60}")
# Fields of chat messages as the fine-tuning API takes them, per role.
_FIELDS = {"system": ("content", "name"), "user": ("content", "name"), "tool": ("content", "tool_call_id"),
           "assistant": ("content", "tool_calls", "name")}


class Skip(Exception):
    """The conversation cannot be an example of this format: the reason goes to the row's ledger."""


def line(chat: Chat, ledger: Ledger) -> dict[str, Any]:
    ids: dict[str, str] = {}
    messages = []
    for index, (message, trained) in enumerate(zip(chat.messages, chat.trained)):
        role = message.get("role")
        where = f"$.export.messages[{index}]"
        if role not in _ROLES:
            ledger.add("dropped", where, f"role '{role}' is not accepted by OpenAI fine-tuning")
            continue
        out: dict[str, Any] = {"role": role}
        for key, value in message.items():
            if key == "role":
                continue
            if key not in _FIELDS[role]:
                ledger.add("dropped", f"{where}.{key}", f"'{key}' has no field in OpenAI fine-tuning messages")
                continue
            out[key] = value
        content = out.get("content")
        if content is not None and not isinstance(content, str):
            out["content"] = json.dumps(content, ensure_ascii=False)  # a structured result as the JSON text
        if role == "tool":
            if "tool_call_id" not in out:
                raise Skip(f"tool result at {where} answers no call id")
            out["tool_call_id"] = _call_id(out["tool_call_id"], ids)
        if role == "assistant":
            calls = [_call(call, ids) for call in out.pop("tool_calls", None) or ()]
            if calls:
                out["tool_calls"] = calls
                if not out.get("content"):
                    out["content"] = None
            elif not out.get("content"):
                raise Skip(f"assistant message at {where} has neither text nor calls")
            out["weight"] = 1 if trained else 0
        messages.append(out)
    if not any(m["role"] == "assistant" for m in messages):
        raise Skip("no assistant message")
    body: dict[str, Any] = {"messages": messages}
    if chat.tools:
        body["tools"] = [_tool(tool) for tool in chat.tools]
        body["parallel_tool_calls"] = any(len(m.get("tool_calls") or ()) > 1 for m in messages)
    elif any("tool_calls" in m for m in messages):
        raise Skip("calls without tool definitions")
    return body


def _call(call: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    function = call["function"]
    arguments = function.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)  # the API's calls carry their arguments as JSON text
    return {"id": _call_id(call.get("id") or "", ids), "type": "function",
            "function": {"name": function["name"], "arguments": arguments}}


def _call_id(original: str, ids: dict[str, str]) -> str:
    """The id as OpenAI writes them (`call_...`): kept when it already is one, else derived from it
    (the same for the call and its result)."""
    if original not in ids:
        ids[original] = original if _CALL_ID.fullmatch(original) else \
            "call_" + hashlib.blake2b(original.encode(), digest_size=12).hexdigest()
    return ids[original]


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = {key: tool["function"][key] for key in ("name", "description", "parameters") if key in tool["function"]}
    return {"type": "function", "function": function}
