"""Canonical messages -> OpenAI Chat Completions messages (the message-level half of writing;
`serializer` builds the bodies around them), with a ledger entry for every divergence."""

from __future__ import annotations

import hashlib
from typing import Any, assert_never

from msgspec import UNSET

from ... import jsonpolicy
from ...conversation import Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...ledger import Ledger
from ..base import ledger_result_name
from . import blocks
from .blocks import NAME

MAX_ID_LEN = 40  # OpenAI rejects longer tool call ids


class Writer:
    """Writes canonical messages as Chat messages, collecting ledger entries."""

    def __init__(self, conv: Conversation, ledger: Ledger, shape: str) -> None:
        self.conv = conv
        self.ledger = ledger
        self.verbatim_ids = shape == "response"
        self.same_format = conv.meta.provider == NAME
        self.out: list[dict] = []
        self.emitted: dict[str, str] = {}  # canonical call id -> id written on the call
        self.legacy_calls: set[str] = set()
        self.moved: list[dict] = []  # media parts of tool results, waiting for the next user message

    def emit(self, message: dict) -> None:
        if self.moved and message["role"] != "tool" and message["role"] != "function":
            self.flush()
        self.out.append(message)

    def flush(self) -> None:
        if self.moved:
            self.out.append({"role": "user", "content": self.moved})
            self.moved = []

    # Instructions and messages --------------------------------------------------------------------

    def instructions(self) -> None:
        conv = self.conv
        lead = (conv.form.get(NAME) or {}).get("lead")
        if lead is None or not _lead_fits(lead, conv.system, conv.developer):
            lead = blocks.default_lead(conv.system, conv.developer)
        taken = {"system": 0, "developer": 0}
        for role, count, mode in lead:
            source = conv.system if role == "system" else conv.developer
            first = taken[role]
            taken[role] = first + count
            parts = []
            for i in range(first, first + count):
                block = source[i]
                path = f"$.{role}[{i}]"
                if type(block) is Text:
                    parts.append(block)
                    if block.signature is not None:
                        self.ledger.add("dropped", path, "signature on instruction text has no place in Chat")
                else:
                    self.ledger.add("dropped", path, f"{block.kind} in {role} instructions: Chat {role} messages hold text only")
            content = _content(parts, mode)
            self.emit({"role": role, "content": content} if content is not UNSET else {"role": role})

    def messages(self) -> list[dict]:
        self.instructions()
        for mi, message in enumerate(self.conv.messages):
            if message.role == "assistant":
                self.emit_assistant(mi, message)
            else:
                self.emit_plain(mi, message)
        self.flush()
        return self.out

    def emit_plain(self, mi: int, message: Message) -> None:
        """user, system, developer and tool messages: results become tool messages, the rest one
        message of the same role (user for a canonical tool message)."""
        role = message.role
        own_form = message.form.get(NAME) or {}
        parts: list = []
        results = 0
        ledger = self.ledger
        text_only = (role == "system" or role == "developer") and not self.same_format
        for bi, block in enumerate(message.blocks):
            path = f"$.messages[{mi}].blocks[{bi}]"
            match block:
                case Text():
                    parts.append(block)
                    if block.signature is not None:
                        ledger.add("dropped", path, "text signature has no place in Chat Completions")
                case Media():
                    if text_only:
                        ledger.add("dropped", path, f"{block.kind} in a {role} message: Chat {role} messages hold text only")
                        continue
                    part = blocks.media_part(block, path, ledger, self.same_format)
                    if part is not None:
                        parts.append(part)
                case ToolResult():
                    if parts:
                        ledger.add("reordered", path, "tool result written before the content that preceded it: "
                                   "Chat tool messages must directly follow the calls")
                    self.emit_result(mi, bi, block, message)
                    results += 1
                case ToolCall():
                    ledger.add("dropped", path, f"tool call in a {role} message: Chat carries calls on assistant messages only")
                case Reasoning():
                    if block.origin == NAME and (block.form.get(NAME) or {}).get("part") == "thinking":
                        parts.append(blocks.thinking_part(block))
                    else:
                        ledger.add("dropped", path, f"reasoning in a {role} message has no place in Chat Completions")
                case Opaque():
                    if block.provider == NAME:
                        parts.append(dict(block.payload) if type(block.payload) is dict else block.payload)
                case _:
                    assert_never(block)
        if results and not parts:
            return
        if message.blocks and not parts and not results:
            self._nothing_left(mi)
            return
        if role == "tool":
            if parts:
                ledger.add("moved", f"$.messages[{mi}]", "content beside tool results written as a user message")
            role = "user"
        out: dict[str, Any] = {"role": role}
        mode = own_form.get("content") or blocks.default_mode(parts, role, False)
        content = _content(parts, mode)
        if content is not UNSET:
            out["content"] = content
        self._message_fields(message, out, own_form)
        self.emit(out)

    def emit_assistant(self, mi: int, message: Message) -> None:
        own_form = message.form.get(NAME) or {}
        ledger = self.ledger
        parts: list = []
        out: dict[str, Any] = {"role": "assistant"}
        calls: list = []
        results: list = []
        seen_call = False
        for bi, block in enumerate(message.blocks):
            path = f"$.messages[{mi}].blocks[{bi}]"
            match block:
                case Text():
                    if block.signature is not None:
                        ledger.add("dropped", path, "text signature has no place in Chat Completions")
                    if (block.form.get(NAME) or {}).get("field") and "refusal" not in out:
                        out["refusal"] = block.text
                        continue
                    if seen_call:
                        ledger.add("reordered", path, "text after a tool call written before the calls: "
                                   "Chat has one content before its tool_calls")
                    parts.append(block)
                case ToolCall():
                    calls.append((bi, block))
                    seen_call = True
                case Reasoning():
                    self.reasoning(block, path, parts, out, seen_call)
                case Opaque():
                    if block.provider != NAME:
                        continue  # ledgered by the foreign-extras walk
                    if block.item_type == "assistant.audio":
                        out["audio"] = block.payload
                    elif block.role_hint == "call":
                        calls.append((bi, block))
                        seen_call = True
                    else:
                        parts.append(block.payload)
                case Media():
                    ledger.add("dropped", path, f"{block.kind} in an assistant message: Chat assistant content holds text only")
                case ToolResult():
                    results.append((bi, block))
                case _:
                    assert_never(block)
        if calls:
            self.write_calls(mi, calls, out, own_form)
        elif own_form.get("empty_calls"):
            out["tool_calls"] = []
        has_calls = "tool_calls" in out or "function_call" in out
        if message.blocks and not parts and not results and len(out) == 1:  # only its role: nothing was written
            self._nothing_left(mi)
            return
        mode = own_form.get("content") or blocks.default_mode(parts, "assistant", has_calls)
        content = _content(parts, mode)
        if content is not UNSET:
            out["content"] = content
        self._message_fields(message, out, own_form)
        self.emit(out)
        for bi, block in results:
            ledger.add("moved", f"$.messages[{mi}].blocks[{bi}]", "tool result in an assistant message written as a tool message after it")
            self.emit_result(mi, bi, block, message)

    def _nothing_left(self, mi: int) -> None:
        # Every block was dropped (and ledgered): an empty message in its place would be a turn the
        # conversation never had (a tool message even becomes an empty user message).
        self.ledger.add("dropped", f"$.messages[{mi}]", "nothing in this message can be written in Chat Completions")

    def reasoning(self, block: Reasoning, path: str, parts: list, out: dict, late: bool) -> None:
        if block.origin != NAME:
            what = [name for name, value in (("text", block.text), ("summary", block.summary),
                                              ("signature", block.signature), ("redacted data", block.redacted),
                                              ("encrypted content", block.encrypted), ("item id", block.item_id))
                    if value]
            self.ledger.add("dropped", path, f"{block.origin or 'unknown'} reasoning ({', '.join(what) or 'empty'}) "
                            "has no place in Chat Completions requests")
            return
        form = block.form.get(NAME) or {}
        if form.get("part") == "thinking":
            parts.append(blocks.thinking_part(block))
            return
        if late or parts:
            self.ledger.add("reordered", path, "reasoning written as a message field, before the content")
        for key in form.get("keys", ("reasoning_content",)):
            out[key] = block.text

    def write_calls(self, mi: int, calls: list, out: dict, own_form: dict) -> None:
        ledger = self.ledger
        if len(calls) == 1 and type(calls[0][1]) is ToolCall and (calls[0][1].form.get(NAME) or {}).get("legacy"):
            bi, call = calls[0]
            fn = {"name": call.name, "arguments": self.arguments(call, f"$.messages[{mi}].blocks[{bi}]")}
            fn.update((call.extras.get(NAME) or {}).get("$function") or {})
            out["function_call"] = fn
            self.legacy_calls.add(call.id)
            return
        written = []
        taken: set[str] = set()
        for bi, call in calls:
            path = f"$.messages[{mi}].blocks[{bi}]"
            if type(call) is Opaque:
                written.append(dict(call.payload) if type(call.payload) is dict else call.payload)
                continue
            own = call.extras.get(NAME) or {}
            form = call.form.get(NAME) or {}
            if call.signature is not None and not form.get("google_signature"):
                ledger.add("dropped", path, "thought signature on the call has no place in Chat Completions")
            if call.kind == "hosted":
                ledger.add("dropped", path, f"hosted tool call '{call.name}' has no equivalent in Chat Completions")
                continue
            item: dict[str, Any] = {}
            if not form.get("no_id"):
                item["id"] = self.call_id(call, path, taken)
            else:
                self.emitted[call.id] = call.provider_id or call.id
            if call.kind == "custom":
                item["type"] = "custom"
                if type(call.arguments) is str:
                    text = call.arguments
                else:
                    text = self.arguments(call, path)
                    ledger.add("folded", path, "custom tool input was not text: written as JSON text")
                custom = {"name": call.name, "input": text}
                custom.update(own.get("$custom") or {})
                item["custom"] = custom
            else:
                if not form.get("no_type"):
                    item["type"] = "function"
                fn = {"name": call.name, "arguments": self.arguments(call, path)}
                fn.update(own.get("$function") or {})
                item["function"] = fn
            item.update((k, v) for k, v in own.items() if k[0] != "$")
            if call.signature is not None and form.get("google_signature"):
                _put_google_signature(item, call.signature)
            written.append(item)
        if written or own_form.get("empty_calls"):
            out["tool_calls"] = written

    def arguments(self, call: ToolCall, path: str) -> Any:
        raw = call.raw_arguments
        if raw is not None:
            if not call.arguments_valid:
                return raw  # the string is the truth; Chat carries strings as they are
            if blocks.loads(raw)[0] == call.arguments:
                return raw
        if call.arguments is UNSET:
            self.ledger.add("synthesized", path, "call without arguments: wrote '{}'")
            return "{}"
        if (call.form.get(NAME) or {}).get("object_arguments"):
            return call.arguments
        return jsonpolicy.dumps_text(call.arguments)

    def call_id(self, call: ToolCall, path: str, taken: set[str]) -> str:
        """The id written on a call; `taken` holds the ids already written in the same message."""
        pid = call.provider_id
        if pid is not None and pid in taken:
            self.ledger.add("synthesized", path, f"call id '{pid}' repeats in the message: wrote the canonical id")
            written = call.id
        elif pid is not None and (self.verbatim_ids or 0 < len(pid) <= MAX_ID_LEN):
            written = pid
        elif pid is None:
            self.ledger.add("synthesized", path, "call without a provider id: wrote its canonical id")
            written = call.id
        else:
            self.ledger.add("synthesized", path, f"call id '{pid}' is not a valid Chat id (1 to {MAX_ID_LEN} "
                            "characters): wrote the canonical id")
            written = call.id
        self.emitted[call.id] = written
        taken.add(written)
        return written

    def result_id(self, result: ToolResult, path: str) -> str:
        if result.call_id is not None and result.call_id in self.emitted:
            return self.emitted[result.call_id]
        pid = result.provider_id
        if pid is not None and 0 < len(pid) <= MAX_ID_LEN:
            return pid
        if result.call_id is not None:
            if pid is not None:
                self.ledger.add("synthesized", path, f"result id '{pid}' is not a valid Chat id: wrote the canonical id")
            return result.call_id
        self.ledger.add("synthesized", path, "result of no known call and without an id: wrote a placeholder id")
        return "call_" + hashlib.blake2b(path.encode(), digest_size=12).hexdigest()

    def emit_result(self, mi: int, bi: int, result: ToolResult, message: Message) -> None:
        ledger = self.ledger
        path = f"$.messages[{mi}].blocks[{bi}]"
        form = result.form.get(NAME) or {}
        legacy = form.get("legacy") and (result.call_id is None or result.call_id in self.legacy_calls)
        parts: list = []
        for ci, item in enumerate(result.content):
            cpath = f"{path}.content[{ci}]"
            if type(item) is Text:
                parts.append(item)
                continue
            part = blocks.media_part(item, cpath, ledger, self.same_format)
            if part is None:
                continue
            if part["type"] == "text":
                parts.append(Text(part["text"]))
                continue
            ledger.add("moved", cpath, f"{item.kind} returned by a tool moved to a following user message: "
                       "Chat tool messages hold text only")
            self.moved.append(part)
        if isinstance(result.output, dict) and result.output.keys() == {"output"} \
                and isinstance(result.output["output"], str) and not result.content:
            # Gemini's convention for a plain result ({"output": text}): the text is the result.
            parts.append(Text(result.output["output"]))
        elif result.output is not UNSET:
            text = jsonpolicy.dumps_text(result.output)
            parts.append(Text(text))
            ledger.add("folded", path, "structured tool output written as JSON text")
        if result.is_error:
            ledger.add("folded", path, "is_error has no field in Chat Completions: folded into the text as 'Error: '")
            if parts and type(parts[0]) is Text:
                parts[0] = Text("Error: " + parts[0].text, extras=parts[0].extras)
            else:
                parts.insert(0, Text("Error:"))
        if result.signature is not None:
            ledger.add("dropped", path, "signature on the tool result has no place in Chat Completions")
        mode = form.get("content") or blocks.default_mode(parts, "tool", False)
        out: dict[str, Any]
        if legacy:
            out = {"role": "function", "name": result.name or ""}
        else:
            out = {"role": "tool", "tool_call_id": self.result_id(result, path)}
            if form.get("name"):
                out["name"] = result.name  # only where the log had one: the API's tool messages have no name
            else:
                ledger_result_name(ledger, path, result, NAME, named_by_source=self.conv.meta.provider == "gemini")
        for key in form.get("null", ()):
            out[key] = None
        content = _content(parts, mode)
        if content is not UNSET:
            out["content"] = content
        if len(message.blocks) == 1:
            out.update(message.extras.get(NAME) or {})
        self.emit(out)

    def _message_fields(self, message: Message, out: dict, own_form: dict) -> None:
        if message.name is not None:
            out["name"] = message.name
        if message.weight is not None:
            out["weight"] = message.weight
        for key in own_form.get("null", ()):
            out.setdefault(key, None)
        own = message.extras.get(NAME)
        if own:
            out.update(own)


def _lead_fits(lead: Any, system: tuple, developer: tuple) -> bool:
    counts = {"system": 0, "developer": 0}
    for role, count, _ in lead:
        counts[role] += count
    return counts["system"] == len(system) and counts["developer"] == len(developer)


def _content(parts: list, mode: str) -> Any:
    """`content` from Text blocks and ready part dicts, in the layout asked for when it still fits."""
    if not parts:
        if mode == "null":
            return None
        if mode == "absent":
            return UNSET
        if mode == "list":
            return []
        return ""
    if mode == "string" and len(parts) == 1 and blocks.is_plain_text(parts[0]):
        return parts[0].text
    return [blocks.text_part(p) if type(p) is Text else p for p in parts]


def _put_google_signature(item: dict[str, Any], signature: str) -> None:
    """A thought signature read from Gemini's OpenAI-compatible `extra_content` goes back there."""
    extra = dict(item.get("extra_content") or {})
    extra["google"] = {**(extra.get("google") or {}), "thought_signature": signature}
    item["extra_content"] = extra
