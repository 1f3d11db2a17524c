"""ShareGPT records as LLaMA-Factory reads them (`formatting: sharegpt`): `conversations` of `human`,
`gpt`, `function_call` and `observation` turns, `system` apart, `tools` as a JSON string. LLaMA-Factory
requires human/observation turns at even positions, gpt/function_call at odd ones, and an even count:
results of parallel calls become one observation (ledgered), a final prompt with no reply (untrained
anyway) is left out, and a conversation that still cannot alternate is not exported. LLaMA-Factory
trains every gpt and function_call turn (`mask_history: true`: the last one only)."""

from __future__ import annotations

import json
from typing import Any

from ...ledger import Ledger
from .chat import Chat
from .openai import Skip

TARGET = "sharegpt export"
_PROMPT, _REPLY = ("human", "observation"), ("gpt", "function_call")


def line(chat: Chat, ledger: Ledger) -> dict[str, Any]:
    assistants = [i for i, m in enumerate(chat.messages) if m.get("role") == "assistant"]
    trained = [i for i in assistants if chat.trained[i]]
    expected = assistants if chat.mask.turns == "all" else assistants[-1:]
    if trained != expected:
        raise Skip("the trained turns are not what LLaMA-Factory trains (every assistant turn, or the last one "
                   "with mask_history)")
    system = []
    turns: list[dict[str, str]] = []
    for index, message in enumerate(chat.messages):
        role, where = message.get("role"), f"$.export.messages[{index}]"
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        if role == "system":
            if turns:
                raise Skip(f"a system message after the first turn ({where})")
            system.append(content)
        elif role == "user":
            turns.append({"from": "human", "value": content})
        elif role == "tool":
            if turns and turns[-1]["from"] == "observation":
                ledger.add("folded", where, "results of parallel calls joined into one observation turn")
                turns[-1]["value"] += "\n" + content
            else:
                turns.append({"from": "observation", "value": content})
        elif role == "assistant":
            turns.append(_assistant(message, content, chat.tools, ledger, where))
        else:
            raise Skip(f"role '{role}' has no sharegpt turn ({where})")
        for key in set(message) - {"role", "content", "tool_calls", "tool_call_id", "name"}:
            ledger.add("dropped", f"{where}.{key}", f"'{key}' has no place in a sharegpt turn")
    if turns and turns[-1]["from"] in _PROMPT:
        # A prompt nothing answers trains nothing; LLaMA-Factory pairs every prompt with a reply.
        ledger.add("dropped", "$.export.messages[-1]", "a final prompt turn with no reply (untrained) is left out")
        turns.pop()
    for position, turn in enumerate(turns):
        if turn["from"] not in (_PROMPT if position % 2 == 0 else _REPLY):
            raise Skip(f"turn {position} ({turn['from']}) breaks LLaMA-Factory's alternation")
    if not turns or len(turns) % 2:
        raise Skip("an odd number of turns: LLaMA-Factory needs each prompt answered")
    record: dict[str, Any] = {"conversations": turns}
    if system:
        record["system"] = "\n".join(system)
    record["tools"] = json.dumps([tool["function"] for tool in chat.tools], ensure_ascii=False) if chat.tools else ""
    return record


def _assistant(message: dict[str, Any], content: str, tools: list, ledger: Ledger, where: str) -> dict[str, str]:
    calls = message.get("tool_calls")
    if not calls:
        return {"from": "gpt", "value": content}
    if not tools:
        raise Skip("calls without tool definitions")
    if content:
        ledger.add("dropped", f"{where}.content", "a function_call turn carries no text beside its calls")
    bodies = [{"name": c["function"]["name"], "arguments": c["function"].get("arguments", {})} for c in calls]
    value = bodies[0] if len(bodies) == 1 else bodies
    return {"from": "function_call", "value": json.dumps(value, ensure_ascii=False)}


DATASET_INFO_COLUMNS = {"messages": "conversations", "system": "system", "tools": "tools"}


def dataset_info(files: dict[str, str]) -> dict[str, Any]:
    """The dataset_info.json entries (one per split file) that declare these records to LLaMA-Factory."""
    return {f"sftprep_{split}": {"file_name": name, "formatting": "sharegpt", "columns": dict(DATASET_INFO_COLUMNS)}
            for split, name in sorted(files.items())}
