"""Parse-back equality: the conversation a token stream holds equals the one rendered, up to the ledger.

Both sides are reduced to the same projection and compared item by item:

- instructions: the system and developer texts joined by the family's separator (a newline for ChatML), as one ("system", text) item first;
  later system/developer messages are ("system", text) items in place;
- each run of text blocks of a user message: ("user", text) (texts joined by newlines);
- each assistant message: ("assistant", text, reasoning, calls, media), calls as (name, arguments JSON
  with the key order kept; a custom call's text as {"input": text}, as templates write it), text and
  reasoning joined by newlines; an assistant message with nothing in it is absent;
- each tool result: ("result", text, answers) where `answers` is the (name, arguments) of the call it
  answers (by id on the rendered side, by position on the parsed side), text being its text parts joined
  or, with none, its structured output as JSON; each run of consecutive results is ordered by the
  position of the call it answers;
- the tools: ("tools", ((name, description, parameters JSON), ...)).

Blocks (and messages, tools) whose path has a "dropped" ledger entry are left out of the rendered side;
any other block must come back. Text, names, arguments and tool definitions go through the tokenizer's
normalizer (NFC for Qwen) on both sides, because the token stream holds the normalized text. Which ledger kinds the projection absorbs
without a trace: "folded" (joined texts, developer in system, JSON output), "reordered" (text before
calls, results in call order), "synthesized" (a default system prompt, removed by the family's parser).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from msgspec import UNSET, structs

from ..conversation import Conversation, Media, Opaque, Reasoning, Text, ToolCall, ToolResult
from ..errors import RenderError
from ..ledger import LedgerEntry
from ._inputs import block_path
from ._tool_inputs import custom_arguments, result_text, tool_parameters

Normalize = Callable[[str], str]


def _joiner(joiner: str) -> Callable[[list[str]], str]:
    return lambda texts: joiner.join(t for t in texts if t)


def _identity(text: str) -> str:
    return text


def dropped_paths(ledger: Iterable[LedgerEntry]) -> set[str]:
    return {entry.path for entry in ledger if entry.kind == "dropped"}


def shown(path: str, dropped: set[str]) -> bool:
    """Whether the template renders the block at `path`: not dropped, or dropped with its newlines, the
    newlines being all it held (Qwen3 writes reasoning of newlines alone as an empty <think> block)."""
    return path not in dropped or path + ".newlines" in dropped


def without_dropped(conv: Conversation, ledger: Iterable[LedgerEntry]) -> Conversation:
    """`conv` without the messages, blocks, instructions and tools the ledger says were dropped."""
    dropped = dropped_paths(ledger)
    messages = []
    for mi, message in enumerate(conv.messages):
        if f"$.messages[{mi}]" in dropped:
            continue
        blocks = tuple(b for bi, b in enumerate(message.blocks) if block_path(mi, bi) not in dropped)
        messages.append(structs.replace(message, blocks=blocks))
    return structs.replace(
        conv, messages=tuple(messages),
        system=tuple(b for i, b in enumerate(conv.system) if f"$.system[{i}]" not in dropped),
        developer=tuple(b for i, b in enumerate(conv.developer) if f"$.developer[{i}]" not in dropped),
        tools=tuple(t for i, t in enumerate(conv.tools) if f"$.tools[{i}]" not in dropped))


def project(conv: Conversation, dropped: set[str] = frozenset(), normalize: Normalize = _identity,
            joiner: str = "\n") -> list[tuple]:
    """The comparable projection of `conv` (see the module docstring); `joiner` is the family's text
    separator for several text blocks of one message."""
    join = _joiner(joiner)
    calls: dict[str, tuple[str, str]] = {}
    for message in conv.messages:
        for block in message.blocks:
            if isinstance(block, ToolCall):
                calls[block.id] = _call(block, normalize)
    items: list[tuple] = []
    instructions, unplaced = [], []
    for name, blocks in (("system", conv.system), ("developer", conv.developer)):
        for bi, block in enumerate(blocks):
            if f"$.{name}[{bi}]" in dropped:
                continue
            text = _text_of(block)
            if text is None:
                unplaced.append(("system-block", type(block).__name__, getattr(block, "kind", None)))
            else:
                instructions.append(normalize(text))
    if instructions:
        items.append(("system", join(instructions)))
    items.extend(unplaced)
    for mi, message in enumerate(conv.messages):
        if f"$.messages[{mi}]" in dropped:
            continue
        kept = [(bi, b) for bi, b in enumerate(message.blocks) if block_path(mi, bi) not in dropped]
        if message.role == "assistant":
            items.extend(_assistant(kept, normalize, join))
        else:
            items.extend(_other(message.role, kept, calls, normalize, join))
    tools = tuple((normalize(t.name), None if t.description is None else normalize(t.description),
                   None if (parameters := tool_parameters(t)) is UNSET else normalize(_json(parameters)))
                  for ti, t in enumerate(conv.tools) if f"$.tools[{ti}]" not in dropped)
    if tools:
        items.append(("tools", tools))
    return _order_result_runs(items, conv)


def _text_of(block: Any) -> str | None:
    if isinstance(block, Text):
        return block.text
    if isinstance(block, Media):
        return block.text
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _call(block: ToolCall, normalize: Normalize) -> tuple[str, str]:
    arguments = custom_arguments(block) if block.kind == "custom" else block.arguments  # as templates write it
    if arguments is UNSET:
        text = block.raw_arguments or "{}"
        try:
            arguments = json.loads(text)
        except ValueError:
            return normalize(block.name), normalize(text)
    return normalize(block.name), normalize(_json(arguments))


def _assistant(kept, normalize: Normalize, join: Callable[[list[str]], str]) -> list[tuple]:
    texts, reasoning, calls, media, other = [], [], [], [], []
    for _, block in kept:
        match block:
            case Text():
                texts.append(normalize(block.text))
            case Media():
                (texts.append(normalize(block.text)) if block.text is not None else media.append(block.kind))
            case Reasoning():
                reasoning.append(normalize(block.text or ""))
            case ToolCall():
                calls.append(_call(block, normalize))
            case ToolResult() | Opaque():
                other.append(type(block).__name__)
    text = join(texts)
    if not (text or reasoning or calls or media or other):
        return []
    return [("assistant", text, tuple(reasoning), tuple(calls), tuple(media) + tuple(other))]


def _other(role: str, kept, calls: dict[str, tuple[str, str]], normalize: Normalize,
           join: Callable[[list[str]], str]) -> list[tuple]:
    label = "system" if role in ("system", "developer") else "user"
    out: list[tuple] = []
    texts: list[str] = []
    for _, block in kept:
        match block:
            case Text() | Media() if _text_of(block) is not None:
                texts.append(normalize(_text_of(block)))
            case ToolResult():
                if texts:
                    out.append((label, join(texts)))
                    texts = []
                text = normalize(result_text(block, None, "", ""))
                out.append(("result", text, calls.get(block.call_id) if block.call_id else None))
            case _:
                if texts:
                    out.append((label, join(texts)))
                    texts = []
                out.append((label + "-block", type(block).__name__, getattr(block, "kind", None)))
    if texts:
        out.append((label, join(texts)))
    return [item for item in out if not (item[0] in ("user", "system") and not item[1])]


def _order_result_runs(items: list[tuple], conv: Conversation) -> list[tuple]:
    out: list[tuple] = []
    latest_calls: tuple = ()
    i = 0
    while i < len(items):
        item = items[i]
        if item[0] == "assistant":
            latest_calls = item[3]
        if item[0] != "result":
            out.append(item)
            i += 1
            continue
        j = i
        while j < len(items) and items[j][0] == "result":
            j += 1
        run = items[i:j]
        order = {call: k for k, call in reversed(list(enumerate(latest_calls)))}
        out.extend(sorted(run, key=lambda r: order.get(r[2], len(order))))
        i = j
    return out


def compare(expected: list[tuple], actual: list[tuple]) -> str | None:
    """None when equal, else a description of the first difference."""
    for k, (a, b) in enumerate(zip(expected, actual)):
        if a != b:
            return f"item {k} differs:\n  rendered:    {_show(a)}\n  parsed back: {_show(b)}"
    if len(expected) != len(actual):
        longer, label = (expected, "rendered") if len(expected) > len(actual) else (actual, "parsed back")
        extra = longer[min(len(expected), len(actual))]
        return (f"{len(expected)} items rendered, {len(actual)} parsed back; first extra ({label}): {_show(extra)}")
    return None


def _show(item: tuple) -> str:
    text = repr(item)
    return text if len(text) <= 300 else text[:300] + "..."


def check_parse_back(conv: Conversation, parsed: Conversation, ledger: Iterable[LedgerEntry],
                     normalize: Normalize = _identity, joiner: str = "\n") -> None:
    """Raise RenderError when `parsed` is not `conv` up to the ledger."""
    expected = project(conv, dropped_paths(ledger), normalize, joiner)
    actual = project(parsed, set(), normalize, joiner)
    problem = compare(expected, actual)
    if problem is not None:
        raise RenderError(f"parse-back differs from the rendered conversation: {problem}", code="render_parse_back")
