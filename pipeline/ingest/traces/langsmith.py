"""LangSmith run exports (`Client.list_runs` / the run JSON the UI and the API give, JSONL or arrays, and a
run with its `child_runs` nested): a run of `run_type = "llm"` is one model call. Its `inputs.messages`
hold the history as LangChain serializes messages, `{"lc": 1, "type": "constructor", "id": ["langchain",
"schema", "messages", "AIMessage"], "kwargs": {"content", "tool_calls", "tool_call_id", ...}}` (or the
plain `{"type": "human" | "ai" | "system" | "tool", "content"}` form), usually one list per prompt of a
batch call; `outputs.generations[0][0].message` is the answer; the tools are in
`extra.invocation_params.tools` (OpenAI or Anthropic shaped).

Message content is a string or a list of blocks in the provider's form (`text`, `image_url`, Anthropic
`thinking` with its signature, `tool_use` repeating what `tool_calls` holds)."""

from __future__ import annotations

from typing import Any, Iterator

from ...conversation import Conversation, Message, Meta, Reasoning, Text
from ...errors import ParseError
from ..blocks import Calls, media
from .otel_genai import tool_list

NAME = "langsmith"
_ROLES = {"HumanMessage": "user", "human": "user", "user": "user", "AIMessage": "assistant", "ai": "assistant",
          "assistant": "assistant", "SystemMessage": "system", "system": "system", "ToolMessage": "tool",
          "tool": "tool", "FunctionMessage": "tool", "function": "tool", "ChatMessage": None}


def is_run(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("run_type"), str) and ("inputs" in value or "outputs" in value)


def split(value: Any) -> list[tuple[str, Any]] | None:
    """A run with nested `child_runs`: every run of the tree, depth first, with its path."""
    if not is_run(value) or not value.get("child_runs"):
        return None
    out: list[tuple[str, Any]] = []

    def walk(run: dict, path: str) -> None:
        out.append((path, {k: v for k, v in run.items() if k != "child_runs"}))
        for i, child in enumerate(run.get("child_runs") or []):
            if is_run(child):
                walk(child, f"{path}.child_runs[{i}]")

    walk(value, "$")
    return out


def parse(run: dict, *, strict: bool = False) -> Conversation:
    kind = run.get("run_type")
    if kind != "llm":
        raise ParseError(f"run '{run.get('name')}' has run_type {kind!r}: not a model call (llm)", path="$.run_type",
                         code="not_a_model_call")
    if run.get("error"):
        raise ParseError(f"the run failed: {str(run['error'])[:200]}", path="$.error", code="failed_generation")
    inputs = run.get("inputs") if isinstance(run.get("inputs"), dict) else {}
    history = inputs.get("messages")
    notes: list[str] = []
    if isinstance(history, list) and history and all(isinstance(h, list) for h in history):
        if len(history) > 1:
            notes.append(f"{len(history)} prompts in one batched call; the first is the conversation")
        history, base = history[0], "$.inputs.messages[0]"
    else:
        base = "$.inputs.messages"
    if not isinstance(history, list):
        raise ParseError("an llm run needs inputs.messages (chat models); prompt-only runs hold no conversation",
                         path="$.inputs", code="content_not_captured")
    calls = Calls()
    system: list = []
    messages: list[Message] = []
    for i, item in enumerate(history):
        role, message = _message(item, calls, f"{base}[{i}]")
        if role == "system" and not messages:
            system.extend(b for b in message.blocks if isinstance(b, Text))
        else:
            messages.append(message)
    answer = _generation(run.get("outputs"))
    if answer is not None:
        messages.append(_message(answer[1], calls, answer[0])[1])
    extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
    params = extra.get("invocation_params") if isinstance(extra.get("invocation_params"), dict) else {}
    tools = tool_list(params.get("tools"), "$.extra.invocation_params.tools") if params.get("tools") else ()
    metadata = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    model = params.get("model") or params.get("model_name") or metadata.get("ls_model_name")
    ids = {k: str(run[k]) for k in ("id", "trace_id", "parent_run_id", "name", "session_id") if run.get(k)}
    return Conversation(messages=tuple(messages), system=tuple(system), tools=tools, meta=Meta(
        provider=NAME, shape=NAME, model=model if isinstance(model, str) else None,
        created=run.get("start_time") if isinstance(run.get("start_time"), str) else None, notes=tuple(notes)),
        extras={NAME: ids})


def _generation(outputs: Any) -> tuple[str, Any] | None:
    generations = outputs.get("generations") if isinstance(outputs, dict) else None
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        if isinstance(first, dict):
            if first.get("message") is not None:
                path = "$.outputs.generations[0][0].message" if isinstance(generations[0], list) else "$.outputs.generations[0].message"
                return path, first["message"]
            if isinstance(first.get("text"), str):
                return "$.outputs.generations[0][0].text", {"type": "ai", "content": first["text"]}
    return None


def _message(item: Any, calls: Calls, path: str) -> tuple[str, Message]:
    if not isinstance(item, dict):
        raise ParseError("a message must be an object", path=path)
    if item.get("lc") == 1 and isinstance(item.get("id"), list) and item["id"]:
        kind, fields, where = str(item["id"][-1]).removesuffix("Chunk"), item.get("kwargs"), f"{path}.kwargs"
        if not isinstance(fields, dict):
            raise ParseError("a serialized message needs 'kwargs' as an object", path=where)
    else:
        kind, fields, where = item.get("type") or item.get("role"), item, path
    if kind == "ChatMessage":
        kind = fields.get("role")
    role = _ROLES.get(kind) if isinstance(kind, str) else None
    if role is None:
        raise ParseError(f"unknown message type {kind!r}; known: {', '.join(k for k in _ROLES if k[0].isupper())}",
                         path=where)
    blocks = list(_content(fields.get("content"), f"{where}.content"))
    if role == "tool":
        call_id = fields.get("tool_call_id") if isinstance(fields.get("tool_call_id"), str) else None
        is_error = fields.get("status") == "error"
        name = fields.get("name") if isinstance(fields.get("name"), str) else None
        return role, Message("tool", (calls.result(call_id, blocks, is_error=is_error, name=name),))
    if role == "assistant":
        tool_calls = fields.get("tool_calls") or []
        if not isinstance(tool_calls, list):
            raise ParseError("'tool_calls' must be an array", path=f"{where}.tool_calls")
        for j, call in enumerate(tool_calls):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ParseError("a tool call needs a 'name'", path=f"{where}.tool_calls[{j}]")
            blocks.append(calls.call(call["name"], call.get("args"), call.get("id") if isinstance(call.get("id"), str) else None))
    return role, Message(role, tuple(blocks))  # type: ignore[arg-type]


def _content(value: Any, path: str) -> Iterator:
    if value is None or value == "":
        return
    if isinstance(value, str):
        yield Text(value)
        return
    if not isinstance(value, list):
        raise ParseError("content must be a string or a list of blocks", path=path)
    for k, block in enumerate(value):
        kind = block.get("type") if isinstance(block, dict) else None
        if isinstance(block, str):
            yield Text(block)
        elif kind == "text":
            yield Text(str(block.get("text", "")))
        elif kind == "thinking":
            yield Reasoning(text=_str(block.get("thinking")), signature=_str(block.get("signature")), origin="anthropic")
        elif kind == "image_url":
            url = block["image_url"].get("url") if isinstance(block.get("image_url"), dict) else block.get("image_url")
            yield media("image", None, url=url if isinstance(url, str) else None)
        elif kind in ("tool_use", "function_call"):
            continue  # the same call is in tool_calls, with its id
        else:
            raise ParseError(f"unknown content block type {kind!r}", path=f"{path}[{k}]")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
