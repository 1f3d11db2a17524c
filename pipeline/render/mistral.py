"""Mistral instruct with tool calling (tokenizer v3 on Tekken, Mistral Nemo; mistral-common's encoder is
the reference for its ids): the family's facts, its conversion and the parser back from its stream.

The format (what `templates/mistral.jinja` writes):
    <s>[INST]USER[/INST]ANSWER</s>
    [INST]USER[/INST][TOOL_CALLS][{"name": N, "arguments": ARGS, "id": "a1B2c3D4e"}, ...]</s>
    [TOOL_RESULTS]{"content": RESULT, "call_id": "a1B2c3D4e"}[/TOOL_RESULTS]ANSWER</s>
    [AVAILABLE_TOOLS][TOOL_JSON, ...][/AVAILABLE_TOOLS][INST]SYSTEM\n\nLAST USER[/INST]ANSWER</s>

What it cannot carry, each ledgered: text beside calls in one assistant message (dropped; RenderOptions
calls="refuse" refuses instead), the place of system text (it moves to the last user turn), call ids
(written as 9 alphanumerics derived from the canonical id, recorded per call), a result text's JSON
formatting (a result that is JSON is written as that JSON value), trailing spaces of an answer (of the
last of consecutive answers, which are joined). A conversation that does not open with a user turn gets
an empty one first (synthesized), as mistral-common writes it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from typing import Any

from msgspec import UNSET, structs

from ..conversation import Conversation, Message, Meta, Text, Tool, ToolCall, ToolResult
from ..errors import RenderError
from ..ids import CallIds
from ..ledger import Ledger, LedgerEntry
from ._inputs import _MESSAGE_AT, InputPolicy, TemplateInputs, _Builder, _Item, block_path
from ._tool_inputs import declared, result_text, tool_parameters
from ._roundtrip import without_dropped
from .marks import MARK_RE, BlockRef, Marks, mark_index
from .rendered import RenderOptions
from .templates import Family

_ID = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class MistralPolicy(InputPolicy):
    calls: str = "split"  # as RenderOptions.calls: "refuse" refuses text beside calls, else it is dropped


POLICY = MistralPolicy(target="mistral", reasoning="drop", developer="system", text_joiner="\n\n")


def mistral_id(canonical: str, taken: set[str]) -> str:
    """9 alphanumerics derived from a canonical call id (deterministic; unique among `taken`)."""
    salt = 0
    while True:
        digest = int.from_bytes(hashlib.blake2b(f"{canonical}#{salt}".encode(), digest_size=8).digest(), "big")
        out = "".join(_ALPHABET[(digest // 62 ** k) % 62] for k in range(9))
        if out not in taken:
            return out
        salt += 1


def call_ids(conv: Conversation) -> dict[str, str]:
    """Canonical call id -> the id written: the provider's when it is 9 alphanumerics, else derived."""
    ids: dict[str, str] = {}
    for message in conv.messages:
        for block in message.blocks:
            if isinstance(block, ToolCall) and block.id not in ids:
                given, taken = block.provider_id, set(ids.values())
                ids[block.id] = given if given and _ID.fullmatch(given) and given not in taken else (
                    mistral_id(block.id, taken))
    return ids


def written_result(text: str) -> Any:
    """A result as mistral-common writes its content: the JSON value when the text is JSON (empty: {})."""
    if not text:
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def written_text(text: str) -> str:
    """The result text the written content gives back."""
    value = written_result(text)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class _MistralBuilder(_Builder):
    policy: MistralPolicy

    def __init__(self, conv: Conversation, marks: Marks, ledger: Ledger, policy: MistralPolicy) -> None:
        super().__init__(conv, marks, ledger, policy)
        self.ids = call_ids(conv)

    def _tools(self) -> list[dict[str, Any]] | None:
        tools = []
        for ti, tool in enumerate(self.conv.tools):
            path = f"$.tools[{ti}]"
            if not declared(tool, path, self.ledger, "mistral"):
                continue
            parameters = tool_parameters(tool)
            parameters = {} if parameters is UNSET else parameters
            definition = {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                                           "parameters": parameters}}
            tools.append(self.marks.json(definition, BlockRef("tools", None, ti, path)))
        return tools or None

    def _assistant(self, mi: int, message: Message) -> None:
        blocks = list(message.blocks)
        if any(isinstance(b, ToolCall) and b.kind != "hosted" for b in blocks):
            for bi, block in enumerate(blocks):
                if isinstance(block, Text) and block.text:
                    path = block_path(mi, bi)
                    if self.policy.calls == "refuse":
                        raise RenderError("text beside tool calls: a Mistral assistant message carries text or "
                                          "calls (render.calls = 'refuse')", path=path, code="render_calls")
                    self.ledger.add("dropped", path, "text beside tool calls: a Mistral assistant message carries "
                                                     "text or calls")
                    blocks[bi] = Text("")
        super()._assistant(mi, structs.replace(message, blocks=tuple(blocks)))

    def _empty_turn(self, mi: int, prefix: str) -> str:
        return ""  # anchored by _join_runs if its run keeps it

    def _order_results(self) -> list[_Item]:
        items = self._join_runs(super()._order_results())
        first = next((item.message["role"] for item in items if item.message["role"] != "system"), None)
        if first != "user":  # where the instructions and tools go, too
            self.ledger.add("synthesized", "$.messages", "an empty user turn opens the conversation (mistral-common "
                                                         "writes one before a conversation that opens otherwise)")
            items.insert(0, _Item({"role": "user", "content": ""}, None, "$.messages"))
        return items

    def _join_runs(self, items: list[_Item]) -> list[_Item]:
        """mistral-common joins the texts of consecutive user messages, and of consecutive answers, with a
        blank line, leaving out empty ones, and strips the trailing spaces of the joined answer. So here: an
        empty message in such a run carries nothing and is left out (a run of empty ones keeps its last),
        and the last answer of a run loses its trailing spaces; the template joins what is left."""
        out: list[_Item] = []
        i = 0
        while i < len(items):
            kind = _run_kind(items[i].message)
            j = i + 1
            while kind is not None and j < len(items) and _run_kind(items[j].message) == kind:
                j += 1
            run = [item for item in items[i:j] if item.message["content"]] or items[j - 1:j]
            if kind == "answer":
                self._end_answer(run[-1])
            out += run
            i = j
        return out

    def _end_answer(self, item: _Item) -> None:
        message, content = item.message, item.message["content"]
        if not content:  # an empty turn: anchored, so its generation region can be attributed
            message["content"] = self.marks.text("", BlockRef("text", int(item.path[_MESSAGE_AT:-1]), None, item.path),
                                                 anchor=True)
            return
        end = len(content)
        while end and MARK_RE.match(content, end - 1):  # the last block's closing sentinel
            end -= 1
        if not end or content[end - 1] != " ":
            return
        message["content"] = content[:end].rstrip(" ") + content[end:]
        path = self.marks.refs[mark_index(content[-1]) // 2 - 1].path if end < len(content) else item.path
        self.ledger.add("dropped", path + ".trailing_spaces",
                        "trailing spaces of an answer (mistral-common strips them)")

    def _call(self, mi: int, bi: int, call: ToolCall) -> dict[str, Any] | None:
        out = super()._call(mi, bi, call)
        if out is not None:
            out["id"] = self.ids[call.id]
            if out["id"] != call.provider_id:
                self.ledger.add("synthesized", block_path(mi, bi) + ".id",
                                f"call id written as {out['id']!r} (Mistral ids are 9 alphanumerics)")
        return out

    def _result(self, mi: int, bi: int, result: ToolResult) -> None:
        path = block_path(mi, bi)
        if result.kind == "hosted":
            self.ledger.add("dropped", path, "provider-hosted tool result has no place in mistral")
            return
        if result.call_id not in self.ids:
            raise RenderError("a Mistral tool result needs the id of the call it answers", path=path,
                              code="render_orphan_result")
        text = result_text(result, self.ledger, path, self.policy.target, self.policy.text_joiner)
        for flag, what in ((result.is_error, "is_error"), (result.signature is not None, "signature")):
            if flag:
                self.ledger.add("dropped", f"{path}.{what}", f"mistral tool results have no {what}")
        value = written_result(text)
        if written_text(text) != text:
            self.ledger.add("folded", path, "result text is JSON: written as that JSON value (formatting not kept)")
        ref = BlockRef("tool_result", mi, bi, path)
        content = (json.dumps(self.marks.text(value, ref), ensure_ascii=False) if isinstance(value, str)
                   else self.marks.text(json.dumps(value, ensure_ascii=False), ref))
        body = '{"content": ' + content + ', "call_id": ' + json.dumps(self.ids[result.call_id]) + "}"
        self.items.append(_Item({"role": "tool", "content": body}, result.call_id, path))


def _run_kind(message: dict[str, Any]) -> str | None:
    """What joins with its neighbours of the same kind: user texts, answers (assistant texts)."""
    if message["role"] == "user":
        return "user"
    return "answer" if message["role"] == "assistant" and not message.get("tool_calls") else None


def build_inputs(conv: Conversation, marks: Marks, ledger: Ledger, policy: InputPolicy) -> TemplateInputs:
    assert isinstance(policy, MistralPolicy)
    return _MistralBuilder(conv, marks, ledger, policy).run()


def configure(policy: InputPolicy, options: RenderOptions) -> InputPolicy:
    assert isinstance(policy, MistralPolicy)
    return replace(policy, calls=options.calls)


# --- what parse-back must equal -------------------------------------------------------------------

def expected(conv: Conversation, ledger: tuple[LedgerEntry, ...]) -> Conversation:
    """`conv` as the format carries it: without what the ledger dropped; trailing spaces of answers
    stripped; results as their written JSON gives them back; consecutive user texts and assistant answers
    joined; every system text, joined, before the text of the last user turn; tools with their defaults."""
    kept = without_dropped(conv, ledger)
    system = [b.text for b in kept.system + kept.developer if isinstance(b, Text) and b.text]
    messages: list[Message] = []
    for message in kept.messages:
        if message.role in ("system", "developer"):
            system += [b.text for b in message.blocks if isinstance(b, Text) and b.text]
            messages.append(message)  # breaks a run of user turns, as in the stream; removed below
            continue
        if message.role in ("user", "tool") and not message.blocks:
            continue  # renders nothing, so parts no run
        message = structs.replace(message, blocks=tuple(_written(b) for b in message.blocks))
        last = messages[-1] if messages else None
        if last is not None and _text_only(last) and _text_only(message) and last.role == message.role:
            messages[-1] = structs.replace(last, blocks=last.blocks + message.blocks)
        else:
            messages.append(message)
    messages = [_joined(m) for m in messages if m.role not in ("system", "developer")]
    if not messages or messages[0].role != "user":
        messages.insert(0, Message(role="user", blocks=(Text(""),)))
    users = [i for i, m in enumerate(messages) if m.role == "user" and any(isinstance(b, Text) for b in m.blocks)]
    if system and users:
        i = users[-1]
        blocks = list(messages[i].blocks)
        first = next(k for k, b in enumerate(blocks) if isinstance(b, Text))
        blocks[first] = Text(POLICY.text_joiner.join(system) + "\n\n" + blocks[first].text)
        messages[i] = structs.replace(messages[i], blocks=tuple(blocks))
    tools = tuple(Tool(name=t.name, description=t.description or "",
                       parameters={} if (p := tool_parameters(t)) is UNSET else p) for t in kept.tools)
    return structs.replace(kept, system=(), developer=(), messages=tuple(messages), tools=tools)


def _text_only(message: Message) -> bool:
    return message.role in ("user", "assistant") and all(isinstance(b, Text) for b in message.blocks)


def _joined(message: Message) -> Message:
    """A run of user texts or answers as the stream holds it: the texts that are not empty joined, an
    answer without its trailing spaces."""
    if not _text_only(message):
        return message
    joined = POLICY.text_joiner.join(b.text for b in message.blocks if b.text)
    if message.role == "assistant":
        joined = joined.rstrip(" ")
        return structs.replace(message, blocks=(Text(joined),) if joined else ())
    return structs.replace(message, blocks=(Text(joined),))


def _written(block):
    if isinstance(block, ToolResult):
        text = result_text(block, None, "", "mistral", POLICY.text_joiner)
        return structs.replace(block, content=(Text(written_text(text)),), output=UNSET)
    return block


# --- parse-back -------------------------------------------------------------------------------------

_MARKERS = re.compile(r"(\[INST\]|\[/INST\]|\[AVAILABLE_TOOLS\]|\[/AVAILABLE_TOOLS\]|\[TOOL_CALLS\]|"
                      r"\[TOOL_RESULTS\]|\[/TOOL_RESULTS\]|</s>)")


def _fail(what: str, at: int) -> RenderError:
    return RenderError(what, path=f"$.piece[{at}]", code="parse_back")


def parse_back(text: str) -> Conversation:
    """The conversation a Mistral token stream holds. Raises RenderError on text the format cannot hold."""
    if not text.startswith("<s>"):
        raise _fail(f"the stream must start with <s>: {text[:40]!r}", 0)
    pieces = _MARKERS.split(text[3:])  # text, marker, text, marker, ..., text

    def text_at(j: int) -> str:
        return pieces[j] if j < len(pieces) else ""

    if pieces[0]:
        raise _fail(f"text before the first turn: {pieces[0][:40]!r}", 0)
    pairs = {"[AVAILABLE_TOOLS]": "[/AVAILABLE_TOOLS]", "[INST]": "[/INST]", "[TOOL_RESULTS]": "[/TOOL_RESULTS]",
             "[TOOL_CALLS]": "</s>"}
    messages: list[Message] = []
    tools: tuple[Tool, ...] = ()
    ids, by_mistral_id = CallIds(), {}
    i = 1
    while i < len(pieces):
        marker, body = pieces[i], text_at(i + 1)
        if marker not in pairs or text_at(i + 2) != pairs[marker] or i + 2 >= len(pieces):
            raise _fail(f"unexpected {marker} here: {body[:40]!r}", i)
        after = text_at(i + 3)  # what follows the closing marker
        i += 4
        if marker == "[AVAILABLE_TOOLS]":
            tools = _tools(body, i)
        elif marker == "[TOOL_CALLS]":
            messages.append(_calls(body, ids, by_mistral_id, i))
        else:
            messages.append(Message(role="user", blocks=(Text(body),) if body else ()) if marker == "[INST]"
                            else _result(body, by_mistral_id, i))
            if i < len(pieces) and pieces[i] == "</s>":  # an answer
                messages.append(Message(role="assistant", blocks=(Text(after),) if after else ()))
                after = text_at(i + 1)
                i += 2
        if after:
            raise _fail(f"text no turn holds: {after[:40]!r}", i)
    return Conversation(messages=tuple(messages), tools=tools,
                        meta=Meta(notes=("parsed back from mistral; results paired with calls by id",)))


def _json(body: str, what: str, at: int) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise _fail(f"{what} is not JSON: {body[:60]!r}", at) from None


def _tools(body: str, at: int) -> tuple[Tool, ...]:
    listing = _json(body, "the tool list", at)
    try:
        return tuple(Tool(name=t["function"]["name"], description=t["function"]["description"],
                          parameters=t["function"]["parameters"]) for t in listing)
    except (KeyError, TypeError):
        raise _fail("a tool is not {type, function: {name, description, parameters}}", at) from None


def _calls(body: str, ids, by_mistral_id: dict[str, ToolCall], at: int) -> Message:
    calls = []
    for raw in _json(body, "the tool calls", at):
        if not isinstance(raw, dict) or set(raw) != {"name", "arguments", "id"}:
            raise _fail(f"a tool call is not {{name, arguments, id}}: {raw!r:.60}", at)
        call = ToolCall(id=ids.new(raw["name"], raw["arguments"]), name=raw["name"], arguments=raw["arguments"],
                        provider_id=raw["id"])
        by_mistral_id[raw["id"]] = call
        calls.append(call)
    return Message(role="assistant", blocks=tuple(calls))


def _result(body: str, by_mistral_id: dict[str, ToolCall], at: int) -> Message:
    raw = _json(body, "a tool result", at)
    if not isinstance(raw, dict) or set(raw) != {"content", "call_id"}:
        raise _fail(f"a tool result is not {{content, call_id}}: {body[:60]!r}", at)
    call = by_mistral_id.get(raw["call_id"])
    content = raw["content"] if isinstance(raw["content"], str) else json.dumps(raw["content"], ensure_ascii=False)
    return Message(role="tool", blocks=(ToolResult(call_id=call.id if call else None, name=call.name if call else None,
                                                   content=(Text(content),), provider_id=raw["call_id"]),))


CARRIES = (("text beside calls", "dropped (ledgered): an assistant message carries text or calls"),
           ("parallel calls", "all, in one [TOOL_CALLS] list"), ("reasoning", "dropped (ledgered)"),
           ("call ids", "9 alphanumerics derived from the canonical id, recorded in the ledger"),
           ("tool results", "a JSON object: the content parsed when it is JSON, and the call id"),
           ("system", "moved before the last user turn's text"), ("developer", "folded into the system text"),
           ("media", "dropped; text documents as text"))

FAMILY = Family(name="mistral", policy=POLICY, template_file="mistral.jinja", eot_tokens=("</s>",),
                required_tokens=("<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                                 "[TOOL_CALLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
                parse_back=parse_back, build_inputs=build_inputs, default_tokenizer="mistral", configure=configure,
                expected=expected, carries=CARRIES)
