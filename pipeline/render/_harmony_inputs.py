"""Harmony's conversion: a canonical Conversation as the Harmony template's inputs, every block of an
assistant message its own Harmony message (the format is described in `harmony`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, assert_never

from msgspec import UNSET

from ..conversation import Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ..errors import RenderError
from ..ledger import Ledger
from . import _harmony_typescript as ts
from ._inputs import InputPolicy, TemplateInputs, _Builder, _Item, block_path
from ._tool_inputs import _join, declared, tool_definition, tool_parameters
from .marks import BlockRef, Marks


@dataclass(frozen=True)
class HarmonyPolicy(InputPolicy):
    style: str = "harmony"
    past_reasoning: str = "keep"


POLICY = HarmonyPolicy(target="harmony", reasoning="field", developer="developer", text_joiner="\n",
                       bad_name=re.compile(r"\s|<\||^$"), mark_names=False)


# --- the conversion -----------------------------------------------------------------------------------

def build_inputs(conv: Conversation, marks: Marks, ledger: Ledger, policy: InputPolicy) -> TemplateInputs:
    assert isinstance(policy, HarmonyPolicy)
    return _HarmonyBuilder(conv, marks, ledger, policy).run()


def _renders_call(message: Message) -> bool:
    return any(isinstance(b, ToolCall) and b.kind != "hosted" for b in message.blocks)


def kept_reasoning(conv: Conversation) -> set[int]:
    """Assistant messages whose reasoning the official template renders: those after the last message
    without calls (the current turn's calls), and that message itself when it ends the conversation."""
    messages = conv.messages
    finals = [i for i, m in enumerate(messages) if m.role == "assistant" and not _renders_call(m)]
    last_final = finals[-1] if finals else -1
    return {i for i, m in enumerate(messages) if m.role == "assistant"
            and ((i > last_final and _renders_call(m)) or i == last_final == len(messages) - 1)}


class _HarmonyBuilder(_Builder):
    policy: HarmonyPolicy

    def __init__(self, conv: Conversation, marks: Marks, ledger: Ledger, policy: HarmonyPolicy) -> None:
        super().__init__(conv, marks, ledger, policy)
        self.call_names = {b.id: b.name for m in conv.messages for b in m.blocks if isinstance(b, ToolCall)}
        self.kept = kept_reasoning(conv) if policy.past_reasoning == "drop" else None
        self.instructions = False
        # (message, number of items after it) of an assistant message that did not end with a final answer
        self.open_turn: tuple[int, int] | None = None

    def _instructions(self) -> None:
        parts: list[str] = []
        for name, blocks in (("system", self.conv.system), ("developer", self.conv.developer)):
            for bi, block in enumerate(blocks):
                path = f"$.{name}[{bi}]"
                text = self._content_text(block, path)
                if text is None:
                    continue
                if not text:
                    self.ledger.add("dropped", path, "empty instructions: harmony writes no # Instructions for them")
                    continue
                if name == "system":
                    self.ledger.add("folded", path, "system instructions rendered in the developer message (harmony's "
                                                    "system message holds identity and settings)")
                parts.append(self.marks.text(text, BlockRef(name, None, bi, path)))
        if len(parts) > 1:
            self.ledger.add("folded", "$.developer", f"{len(parts)} instruction blocks joined into one # Instructions")
        if parts:
            self.instructions = True
            self.items.append(_Item({"role": "developer", "content": _join(self.policy.text_joiner, parts)}, None,
                                    "$.developer"))

    def _message(self, mi: int, message: Message) -> None:
        if mi == 0 and not self.instructions and message.role == "system":
            # The template reads a leading system or developer message as the instructions.
            self.ledger.add("folded", "$.messages[0]", "a leading system message rendered as the developer "
                                                       "message's # Instructions")
        super()._message(mi, message)

    def _assistant(self, mi: int, message: Message) -> None:
        parts: list[tuple[str, Any]] = []  # ("analysis" | "text" | "call", marked text or call dict)
        carried, joined, calls, empty_text = False, 0, 0, False
        keep_reasoning = self.kept is None or mi in self.kept
        for bi, block in enumerate(message.blocks):
            path = block_path(mi, bi)
            match block:
                case Text() | Media():
                    text = self._content_text(block, path)
                    if text is None:
                        continue
                    carried = True
                    if not text:
                        empty_text = True
                        continue
                    marked = self.marks.text(text, BlockRef("text", mi, bi, path))
                    if parts and parts[-1][0] == "text":  # adjacent texts are one Harmony message
                        parts[-1] = ("text", parts[-1][1] + self.policy.text_joiner + marked)
                        joined += 1
                    else:
                        parts.append(("text", marked))
                case ToolCall():
                    call = self._call(mi, bi, block)
                    if call is not None:
                        self.call_order[block.id] = calls
                        calls += 1
                        parts.append(("call", call))
                        carried = True
                case Reasoning():
                    if not block.text:
                        self.ledger.add("dropped", path, "reasoning without visible text has no place in harmony")
                    elif not keep_reasoning:
                        self.ledger.add("dropped", path, "reasoning of an earlier turn (past_reasoning='drop', as the "
                                                         "official gpt-oss template does)")
                    else:
                        self._reasoning_state(block, path)
                        parts.append(("analysis", self.marks.text(block.text, BlockRef("reasoning", mi, bi, path))))
                        carried = True
                case ToolResult():
                    raise RenderError("a tool result in an assistant message", path=path, code="render_misplaced")
                case Opaque():
                    self._opaque(block, path)
                case _:
                    assert_never(block)
        if message.blocks and not carried:
            self.ledger.add("dropped", f"$.messages[{mi}]", "assistant turn has nothing harmony can carry")
            return
        if joined:
            self.ledger.add("folded", f"$.messages[{mi}]", f"{joined + 1} adjacent text blocks joined into one message")
        if not parts or (empty_text and all(kind == "analysis" for kind, _ in parts)):
            # An empty answer (after reasoning, or alone) is an empty final message, as the official template
            # writes it, marked so its region can be attributed.
            parts.append(("text", self.marks.text("", BlockRef("text", mi, None, f"$.messages[{mi}]"), anchor=True)))
        if self.open_turn is not None and self.open_turn[1] == len(self.items):
            raise RenderError(f"assistant message {mi} directly follows assistant message {self.open_turn[0]}, which "
                              "does not end with a final answer: harmony marks no boundary between them, so they "
                              "would read back as one message (merge them, or end the first with text)",
                              path=f"$.messages[{mi}]", code="render_turn_boundary")
        for item in _template_messages(parts):
            self.items.append(_Item(item, None, f"$.messages[{mi}]"))
        self.open_turn = None if parts[-1][0] == "text" else (mi, len(self.items))

    def _result(self, mi: int, bi: int, result: ToolResult) -> None:
        before = len(self.items)
        super()._result(mi, bi, result)
        if len(self.items) == before:
            return
        path = block_path(mi, bi)
        name = (self.call_names.get(result.call_id) if result.call_id is not None else None) or result.name
        if not name:
            raise RenderError("a tool result that answers no call and names no tool: harmony writes the tool's name "
                              "in the result's header", path=path, code="render_result_name")
        if self.policy.bad_name is not None and self.policy.bad_name.search(name):
            raise RenderError(f"tool name {name!r} cannot be written in a harmony header", path=path,
                              code="render_tool_name")
        self.items[-1].message["name"] = name

    def _tools(self) -> list[dict[str, Any]] | None:
        tools = []
        for ti, tool in enumerate(self.conv.tools):
            path = f"$.tools[{ti}]"
            if not declared(tool, path, self.ledger, "harmony"):
                continue
            if self.policy.bad_name is not None and self.policy.bad_name.search(tool.name):
                raise RenderError(f"tool name {tool.name!r} cannot be written in a harmony signature", path=path,
                                  code="render_tool_name")
            parameters = tool_parameters(tool)
            lost = ts.uncarried(parameters) if parameters is not UNSET else []
            if lost:
                shown = ", ".join(lost[:6]) + (f" and {len(lost) - 6} more" if len(lost) > 6 else "")
                self.ledger.add("dropped", path + ".parameters", f"a TypeScript signature does not carry: {shown}")
            spec = tool_definition(tool)
            # Written by the same rules as the template's macro, and marked so the span covers it.
            spec["definition"] = self.marks.text(ts.tool_definition(tool.name, tool.description, parameters),
                                                 BlockRef("tools", None, ti, path))
            tools.append(spec)
        return tools or None


def _template_messages(parts: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Template messages (HF style: thinking, then content, then tool_calls, each rendered in that order)
    holding `parts` in order. `channel` says where `content` goes: final only when it ends the message."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for i, (kind, value) in enumerate(parts):
        if kind == "analysis" or (kind == "text" and ("content" in current or "tool_calls" in current)):
            if current:
                out.append(current)
            current = {}
        current["role"] = "assistant"
        if kind == "analysis":
            current["thinking"] = value
        elif kind == "text":
            current["content"] = value
            current["channel"] = "final" if i == len(parts) - 1 else "commentary"
        else:
            current.setdefault("tool_calls", []).append(value)
    out.append(current)
    return out
