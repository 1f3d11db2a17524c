"""From a canonical Conversation to what a chat template reads (Hugging Face style messages and tools),
with every block's content wrapped in private-use sentinel characters (`marks`) so the renderer can find
where each block landed in the rendered text.

What a template cannot carry goes to the ledger here, with the block's path: the conversion is the one
place that decides, so parse-back can compare against exactly what was declared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, NamedTuple, assert_never

from ..conversation import (CUSTOM_INPUT, ContentBlock, Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall,
                            ToolResult)
from ..errors import RenderError
from ..ledger import Ledger
from ._tool_inputs import (_arguments, _cached_definition, _cached_tools, _has_text, _join, custom_arguments, declared,
                           result_text, tool_definition)
from .marks import BlockRef, Marks


class TemplateInputs(NamedTuple):
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    # Per template message, the canonical message an assistant message renders (None otherwise).
    origins: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class InputPolicy:
    """What a family's template can carry, and how the rest is handled (each with a ledger entry)."""

    target: str
    reasoning: Literal["drop", "field"] = "drop"  # "field": reasoning_content / thinking on the message
    developer: Literal["system", "developer"] = "system"  # "system": folded into the system message
    default_system: str | None = None  # what the template writes when there is no system message
    text_joiner: str = "\n"  # between several text blocks of one message
    # Names the call syntax cannot quote (ChatML writes the name raw inside a JSON string).
    bad_name: re.Pattern[str] | None = None
    # Mark call names as well as arguments (finds calls in templates that iterate the arguments).
    mark_names: bool = True
    # Hand a result's structured output (a JSON object, with no text beside it) to the template as the
    # object, for templates that `tojson` results (Llama 3.x): rendered once, not as a quoted string.
    structured_results: bool = False


# --- the conversion ---------------------------------------------------------------------------------

_MESSAGE_AT = len("$.messages[")

def block_path(mi: int, bi: int) -> str:
    return f"$.messages[{mi}].blocks[{bi}]"


def build_inputs(conv: Conversation, marks: Marks, ledger: Ledger, policy: InputPolicy) -> TemplateInputs:
    builder = _Builder(conv, marks, ledger, policy)
    return builder.run()


class _Item(NamedTuple):
    message: dict[str, Any]
    answers: str | None  # for tool results: the canonical call id answered
    path: str


# What the NamedTuples' generated __new__ does (tuple.__new__ of the field values), without its Python
# frame: a ref per marked piece and an item per message, on every conversation.
_ref = partial(tuple.__new__, BlockRef)
_item = partial(tuple.__new__, _Item)


class _Builder:
    def __init__(self, conv: Conversation, marks: Marks, ledger: Ledger, policy: InputPolicy) -> None:
        self.conv, self.marks, self.ledger, self.policy = conv, marks, ledger, policy
        self.items: list[_Item] = []
        self.call_order: dict[str, int] = {}  # canonical id -> position in its assistant turn

    def run(self) -> TemplateInputs:
        self._instructions()
        for mi, message in enumerate(self.conv.messages):
            self._message(mi, message)
        items = self._order_results()
        origins = tuple(int(item.path[_MESSAGE_AT:-1]) if item.message["role"] == "assistant" else None
                        for item in items)
        return TemplateInputs([item.message for item in items], self._tools(), origins)

    # system and developer instructions ------------------------------------------------------------

    def _instructions(self) -> None:
        parts: list[str] = []
        for name, blocks in (("system", self.conv.system), ("developer", self.conv.developer)):
            for bi, block in enumerate(blocks):
                path = f"$.{name}[{bi}]"
                text = self._content_text(block, path)
                if text is None:
                    continue
                if name == "developer" and self.policy.developer == "system":
                    self.ledger.add("folded", path, "developer instructions rendered in the system message")
                parts.append(self.marks.text(text, BlockRef(name, None, bi, path)))
        if len(parts) > 1:
            self.ledger.add("folded", "$.system", f"{len(parts)} instruction blocks joined into one system message")
        if parts:
            self.items.append(_Item({"role": "system", "content": _join(self.policy.text_joiner, parts)}, None, "$.system"))
        elif self.policy.default_system is not None:
            self.ledger.add("synthesized", "$.system", "the template writes its default system prompt")

    def _content_text(self, block: ContentBlock, path: str) -> str | None:
        match block:
            case Text():
                if block.signature is not None:
                    self.ledger.add("dropped", path + ".signature", f"{self.policy.target} has no place for a signature")
                return block.text
            case Media():
                if block.text is not None:  # a plain-text document
                    self.ledger.add("folded", path, f"text document rendered as text in {self.policy.target}")
                    return block.text
                self.ledger.add("dropped", path, f"{block.kind} has no place in text-only {self.policy.target}")
                return None
            case _:
                assert_never(block)

    # messages ----------------------------------------------------------------------------------------

    def _message(self, mi: int, message: Message) -> None:
        match message.role:
            case "assistant":
                self._assistant(mi, message)
            case "user" | "tool" | "system" | "developer":
                self._other(mi, message)
            case _:
                assert_never(message.role)

    def _other(self, mi: int, message: Message) -> None:
        role = message.role
        if role == "developer" and self.policy.developer == "system":
            self.ledger.add("folded", f"$.messages[{mi}]", "developer message rendered as a system message")
            role = "system"
        if role == "tool":
            role = "user"  # stray text in a tool message is shown to the model as user text
        kind = "system" if role == "system" else "developer" if role == "developer" else "text"
        texts: list[str] = []
        prefix = f"$.messages[{mi}]"
        for bi, block in enumerate(message.blocks):
            path = f"{prefix}.blocks[{bi}]"  # block_path(mi, bi)
            match block:
                case Text() | Media():
                    text = self._content_text(block, path)
                    if text is not None:
                        if message.role == "tool":
                            self.ledger.add("moved", path, "text outside a tool result rendered as a user turn")
                        texts.append(self.marks.text(text, _ref((kind, mi, bi, path))))
                case ToolResult():
                    if texts:
                        self._turn(role, texts, prefix)
                        texts = []
                    self._result(mi, bi, block)
                case ToolCall():
                    raise RenderError(f"a tool call in a {message.role} message", path=path, code="render_misplaced")
                case Reasoning():
                    self.ledger.add("dropped", path, f"reasoning in a {message.role} message has no place in "
                                                     f"{self.policy.target}")
                case Opaque():
                    self._opaque(block, path)
                case _:
                    assert_never(block)
        if texts:
            self._turn(role, texts, prefix)

    def _turn(self, role: str, texts: list[str], path: str) -> None:
        """One turn of the texts a user, system or developer message gave before a result (or at its end)."""
        if len(texts) > 1:
            self.ledger.add("folded", path, f"{len(texts)} text blocks joined into one turn")
        self.items.append(_item(({"role": role, "content": _join(self.policy.text_joiner, texts)}, None, path)))

    def _assistant(self, mi: int, message: Message) -> None:
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        carried = 0
        prefix = f"$.messages[{mi}]"
        for bi, block in enumerate(message.blocks):
            path = f"{prefix}.blocks[{bi}]"  # block_path(mi, bi)
            match block:
                case Text() | Media():
                    text = self._content_text(block, path)
                    if text is None:
                        continue
                    if calls and text:
                        self.ledger.add("reordered", path, f"{self.policy.target} renders a turn's text before its calls")
                    texts.append(self.marks.text(text, _ref(("text", mi, bi, path))))
                    carried += 1
                case ToolCall():
                    call = self._call(mi, bi, block)
                    if call is not None:
                        self.call_order[block.id] = len(calls)
                        calls.append(call)
                        carried += 1
                case Reasoning():
                    why = self._reasoning_dropped(mi, block)
                    if why is not None:
                        self.ledger.add("dropped", path, why)
                    else:
                        self._reasoning_state(block, path)
                        reasoning.append(self.marks.text(block.text, _ref(("reasoning", mi, bi, path))))
                        carried += 1
                case ToolResult():
                    raise RenderError("a tool result in an assistant message", path=path, code="render_misplaced")
                case Opaque():
                    self._opaque(block, path)
                case _:
                    assert_never(block)
        if message.blocks and not carried:
            self.ledger.add("dropped", prefix, f"assistant turn has nothing {self.policy.target} can carry")
            return
        if len(texts) > 1:
            self.ledger.add("folded", prefix, f"{len(texts)} text blocks joined into one turn")
        content = _join(self.policy.text_joiner, texts)
        if not calls and not content:
            content = self._empty_turn(mi, prefix)
        out: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            out["tool_calls"] = calls
        if reasoning:
            joined = _join(self.policy.text_joiner, reasoning)
            out["reasoning_content"] = joined
            out["thinking"] = joined
        self.items.append(_item((out, None, prefix)))

    def _empty_turn(self, mi: int, prefix: str) -> str:
        """The content of an assistant turn with no text and no calls: a sentinel pair all the same, so
        its generation region can be attributed."""
        return self.marks.text("", _ref(("text", mi, None, prefix)), anchor=True)

    def _reasoning_dropped(self, mi: int, block: Reasoning) -> str | None:
        """Why the template gets no reasoning block of message `mi` (None: it gets it)."""
        if self.policy.reasoning == "drop" or not block.text:
            what = "reasoning" if block.text else "reasoning without visible text"
            return f"{what} has no place in {self.policy.target}"
        return None

    def _reasoning_state(self, block: Reasoning, path: str) -> None:
        for name in ("signature", "redacted", "encrypted", "item_id"):
            if getattr(block, name) is not None:
                self.ledger.add("dropped", f"{path}.{name}", f"opaque reasoning state has no place in {self.policy.target}")

    def _call(self, mi: int, bi: int, call: ToolCall) -> dict[str, Any] | None:
        path = block_path(mi, bi)
        if call.kind == "hosted":
            self.ledger.add("dropped", path, f"provider-hosted tool call '{call.name}' has no place in {self.policy.target}")
            return None
        if call.kind == "custom":
            arguments = custom_arguments(call, path)
            self.ledger.add("folded", path, f"custom tool '{call.name}' takes free text: {self.policy.target} calls are "
                            f"JSON objects, so it is written as the string field '{CUSTOM_INPUT}'")
        else:
            arguments = _arguments(call, path)
        if self.policy.bad_name is not None and self.policy.bad_name.search(call.name):
            raise RenderError(f"tool name {call.name!r} cannot be written in {self.policy.target} call syntax",
                              path=path, code="render_tool_name")
        if call.signature is not None:
            self.ledger.add("dropped", path + ".signature", f"{self.policy.target} has no place for a signature")
        ref = _ref(("tool_call", mi, bi, path))
        name = self.marks.text(call.name, ref, repeatable=True) if self.policy.mark_names else call.name
        function = {"name": name, "arguments": self.marks.json(arguments, ref)}
        return {"id": call.provider_id or call.id, "type": "function", "function": function}

    def _result(self, mi: int, bi: int, result: ToolResult) -> None:
        path = block_path(mi, bi)
        if result.kind == "hosted":
            self.ledger.add("dropped", path, f"provider-hosted tool result has no place in {self.policy.target}")
            return
        content = result_text(result, self.ledger, path, self.policy.target, self.policy.text_joiner)
        if result.is_error:
            self.ledger.add("dropped", path + ".is_error", f"{self.policy.target} tool results have no error flag")
        if result.signature is not None:
            self.ledger.add("dropped", path + ".signature", f"{self.policy.target} has no place for a signature")
        ref = _ref(("tool_result", mi, bi, path))
        if self.policy.structured_results and isinstance(result.output, dict) and not _has_text(result):
            message = {"role": "tool", "content": self.marks.json(result.output, ref)}
        else:
            message = {"role": "tool", "content": self.marks.text(content, ref)}
        if result.call_id is not None or result.provider_id is not None:
            message["tool_call_id"] = result.provider_id or result.call_id
        if result.name is not None:
            message["name"] = result.name
        self.items.append(_item((message, result.call_id, path)))

    def _opaque(self, block: Opaque, path: str) -> None:
        self.ledger.add("dropped", path, f"{block.provider} item '{block.item_type}' has no place in {self.policy.target}")

    # results in call order -----------------------------------------------------------------------

    def _order_results(self) -> list[_Item]:
        """Templates without call ids pair results with calls by position: put each run of results in
        the order of the calls they answer (a ledgered reordering), so the pairing stays true."""
        out: list[_Item] = []
        i = 0
        items = self.items
        while i < len(items):
            if items[i].message["role"] != "tool":
                out.append(items[i])
                i += 1
                continue
            j = i + 1
            while j < len(items) and items[j].message["role"] == "tool":
                j += 1
            if j == i + 1:  # a lone result: already in the order of the calls it answers
                out.append(items[i])
                i = j
                continue
            run = items[i:j]
            key = [(self.call_order.get(item.answers, len(run) + k) if item.answers else len(run) + k, k)
                   for k, item in enumerate(run)]
            ordered = sorted(range(len(run)), key=lambda k: key[k])
            for position, k in enumerate(ordered):
                if position != k:
                    self.ledger.add("reordered", run[k].path, "result moved to the position of the call it answers")
                out.append(run[k])
            i = j
        return out

    # tools -----------------------------------------------------------------------------------------

    def _tools(self) -> list[dict[str, Any]] | None:
        if self.marks.enabled and self.conv.tools:
            # A list of function tools only, with no sentinel in any: what the loop below gives, from the
            # definitions cached for the whole list (tool lists repeat whole across a dataset).
            cached = _cached_tools(self.conv.tools)
            if cached is not None:
                return [self.marks.json(definition, ref) for definition, ref in cached]
        tools = []
        for ti, tool in enumerate(self.conv.tools):
            path = f"$.tools[{ti}]"
            if not declared(tool, path, self.ledger, self.policy.target):
                continue
            ref = BlockRef("tools", None, ti, path)
            definition = _cached_definition(tool) if self.marks.enabled else tool_definition(tool)
            tools.append(self.marks.json(definition, ref))
        return tools or None
