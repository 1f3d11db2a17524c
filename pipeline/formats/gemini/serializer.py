"""Canonical -> Gemini: request bodies (contents, systemInstruction, tools, other providers' parameters),
bare `contents` lists and response objects; their parts are written in `writer`."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET
from msgspec.structs import replace

from ...conversation import PROVIDERS, Conversation, Message, Text, ToolResult
from ...errors import ConfigError
from ...ledger import Ledger
from ..base import SHAPES, ledger_foreign_extras
from .parts import NAME, k, put_nulls
from .tools import foreign_params, write_tools
from .writer import PartWriter

def serialize(conv: Conversation, shape: str = "request", ledger: Ledger | None = None) -> Any:
    if ledger is None:
        ledger = Ledger(NAME)
    # Other providers' request parameters are mapped (or ledgered) by _foreign_params; the walk reports
    # every other foreign field and Opaque block.
    ledger_foreign_extras(replace(conv, extras={}) if conv.extras else conv, NAME, ledger)
    own = conv.meta.provider == NAME
    match shape:
        case "request":
            return _write_request(conv, own, ledger)
        case "messages":
            _drop_context(conv, ledger, "a contents list")
            _drop_params(conv, own, ledger, "a contents list")
            return _write_contents(conv, own, ledger)
        case "response":
            return _write_response(conv, own, ledger)
        case _:
            raise ConfigError(f"unknown shape '{shape}'; valid: {', '.join(SHAPES)}", code="unknown_shape")


def _write_request(conv: Conversation, own: bool, ledger: Ledger) -> dict:
    contents = _write_contents(conv, own, ledger)
    body: dict[str, Any] = {"contents": contents}
    form = conv.form.get(NAME) or {}
    system = _write_system(conv, form.get("system"), ledger)
    if not contents and not own and system is not None:
        # Gemini refuses an empty `contents`; a conversation of instructions alone sends them as the turn.
        contents.append({"role": "user", "parts": system["parts"] if isinstance(system, dict) else [{"text": system}]})
        ledger.add("moved", "$.system", "Gemini needs at least one content: the instructions became the user turn")
        system = None
    if system is not None:
        body[form.get("system_key", "systemInstruction")] = system
    tools = write_tools(conv.tools, form.get("tools"), ledger)
    if tools is not None and form.get("tools_object") and len(tools) == 1:
        tools = tools[0]  # sent as one Tool object, not a list: written back so
    if tools is not None:
        body["tools"] = tools
    own_params = conv.extras.get(NAME)
    if own_params:
        if own and conv.meta.shape == "response":
            for key in own_params:
                ledger.add("dropped", "$", f"response field '{key}' has no place in a request")
        else:
            body.update(own_params)
    foreign_params(conv, body, ledger)
    return put_nulls(body, form.get("nulls")) if own and conv.meta.shape != "response" else body


def _write_contents(conv: Conversation, own: bool, ledger: Ledger) -> list[dict]:
    writer = PartWriter(ledger, own)
    same_shape = own and conv.meta.shape != "response"
    out: list[dict] = []
    open_results: dict | None = None  # the last content holds only function responses
    open_moved: dict | None = None  # the user content holding media moved out of those responses
    for mi, message in enumerate(conv.messages):
        mpath = f"$.messages[{mi}]"
        _message_fields(message, mpath, ledger)
        parts: list = []
        moved: list = []
        for bi, block in enumerate(message.blocks):
            writer.block(block, f"{mpath}.blocks[{bi}]", parts, moved)
        results_only = bool(message.blocks) and all(isinstance(b, ToolResult) for b in message.blocks)
        if not own and results_only and open_results is not None:
            # Gemini wants every response to one turn's calls in a single content.
            open_results["parts"].extend(parts)
            if moved:
                if open_moved is None:
                    open_moved = {"role": "user", "parts": []}
                    out.append(open_moved)
                open_moved["parts"].extend(moved)
            ledger.add("folded", mpath, "merged into the previous content: Gemini takes all responses to a "
                       "turn's calls in one content")
            continue
        if not message.blocks and not same_shape:
            ledger.add("dropped", mpath, "empty message: Gemini refuses a content without parts")
            continue
        if message.blocks and not parts:
            ledger.add("dropped", mpath, "nothing in this message can be written in Gemini")
            continue
        content = _content_out(message, parts, mpath, ledger, same_shape, own)
        out.append(content)
        open_moved = None
        if moved:
            open_moved = {"role": "user", "parts": moved}
            out.append(open_moved)
        open_results = content if results_only else None
    return out


def _content_out(message: Message, parts: list, mpath: str, ledger: Ledger, same_shape: bool, own: bool) -> dict:
    form = message.form.get(NAME) or {}
    content: dict[str, Any] = {}
    match message.role:
        case "user":
            role = "user"
        case "assistant":
            role = "model"
        case "tool":
            role = form.get("role", "user")
        case "system" | "developer":
            role = "user"
            ledger.add("folded", mpath, f"Gemini has no {message.role} role mid-conversation: sent as a user content")
    if form.get("no_role") and same_shape:
        pass
    elif same_shape and "role" in form:
        content["role"] = form["role"]
    else:
        content["role"] = role
    if not (form.get("no_parts") and same_shape and not parts):
        content["parts"] = parts
    extras = message.extras.get(NAME)
    if extras:
        # A response's candidate fields (finishMessage, groundingMetadata...) describe the answer, not
        # the turn: a request content has no place for them.
        candidate = form.get("candidate", ()) if own else extras
        for key, value in extras.items():
            if key in candidate:
                # The turn is the first candidate's: its position (index 0) says nothing a request loses.
                if not (key == "index" and value == 0):
                    ledger.add("dropped", mpath, f"candidate field '{key}' has no place in a request")
            else:
                content[key] = value
    return put_nulls(content, form.get("nulls")) if own else content


def _message_fields(message: Message, mpath: str, ledger: Ledger) -> None:
    if message.name is not None:
        ledger.add("dropped", mpath, "Gemini contents have no participant name")
    if message.weight is not None:
        ledger.add("dropped", mpath, "Gemini contents have no training weight")


def _write_system(conv: Conversation, layout: dict | None, ledger: Ledger) -> Any:
    blocks = conv.system
    if conv.developer:
        for bi in range(len(conv.developer)):
            ledger.add("folded", f"$.developer[{bi}]", "developer instructions merged into systemInstruction")
        blocks = (*blocks, *conv.developer)
    if not blocks and layout is None:
        return None
    layout = layout or {}
    if layout.get("string") and len(blocks) == 1 and isinstance(blocks[0], Text) and not blocks[0].extras \
            and not blocks[0].form and blocks[0].signature is None:
        return blocks[0].text
    writer = PartWriter(ledger, True)
    parts: list = []
    for bi, block in enumerate(blocks):
        where = f"$.system[{bi}]" if bi < len(conv.system) else f"$.developer[{bi - len(conv.system)}]"
        writer.block(block, where, parts, parts)
    system: dict[str, Any] = {}
    if "role" in layout:
        system["role"] = layout["role"]
    if parts or not layout.get("no_parts"):
        system["parts"] = parts
    return put_nulls(system, layout.get("nulls"))


def _drop_context(conv: Conversation, ledger: Ledger, what: str) -> None:
    if conv.system:
        ledger.add("dropped", "$.system", f"{what} has no system instructions")
    if conv.developer:
        ledger.add("dropped", "$.developer", f"{what} has no developer instructions")
    if conv.tools:
        ledger.add("dropped", "$.tools", f"{what} has no tool definitions")


def _drop_params(conv: Conversation, own: bool, ledger: Ledger, what: str) -> None:
    for provider, values in conv.extras.items():
        if provider not in PROVIDERS:  # not a wire format's: where the log came from
            continue
        for key in values:
            if provider == NAME:
                ledger.add("dropped", "$", f"{what} has no place for '{key}'")
            else:
                ledger.add("dropped", "$", f"{provider} field '{key}' has no equivalent in {NAME}")


# --- response objects ------------------------------------------------------------------------------

_FOREIGN_STOP = {"end_turn": "STOP", "tool_use": "STOP", "stop_sequence": "STOP", "max_tokens": "MAX_TOKENS",
                 "stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY",
                 "completed": "STOP"}
_FOREIGN_USAGE = {"input_tokens": "promptTokenCount", "prompt_tokens": "promptTokenCount",
                  "output_tokens": "candidatesTokenCount", "completion_tokens": "candidatesTokenCount",
                  "total_tokens": "totalTokenCount"}


def _write_response(conv: Conversation, own: bool, ledger: Ledger) -> dict:
    last = max((i for i, m in enumerate(conv.messages) if m.role == "assistant"), default=None)
    for i in range(len(conv.messages)):
        if i != last:
            ledger.add("dropped", f"$.messages[{i}]", "a response object holds only the last assistant turn")
    _drop_context(conv, ledger, "a response object")
    same_shape = own and conv.meta.shape == "response"
    if not same_shape:
        _drop_params(conv, own, ledger, "a response object")
    form = (conv.form.get(NAME) or {}) if same_shape else {}
    snake = form.get("snake")
    meta = conv.meta
    body: dict[str, Any] = {}
    if last is not None:
        message = conv.messages[last]
        mpath = f"$.messages[{last}]"
        _message_fields(message, mpath, ledger)
        writer = PartWriter(ledger, own)
        parts: list = []
        moved: list = []
        for bi, block in enumerate(message.blocks):
            writer.block(block, f"{mpath}.blocks[{bi}]", parts, moved)
        for mv in moved:
            ledger.add("dropped", mpath, "media of a tool result has no place in a response")
        mform = (message.form.get(NAME) or {}) if same_shape else {}
        candidate: dict[str, Any] = {}
        content: dict[str, Any] = {}
        if not mform.get("no_content"):
            if not mform.get("no_role"):
                content["role"] = mform.get("role", "model")
            if parts or not mform.get("no_parts"):
                content["parts"] = parts
            candidate["content"] = put_nulls(content, mform.get("nulls"))
        stop = meta.stop_reason
        if stop is not None and not own:
            stop = _FOREIGN_STOP.get(stop)
            if stop is None:
                ledger.add("dropped", "$.meta.stop_reason", f"stop reason '{meta.stop_reason}' has no Gemini equivalent")
        if stop is not None:
            candidate[k("finishReason", mform.get("snake"))] = stop
        extras = message.extras.get(NAME)
        if extras:
            if same_shape:
                on_candidate = mform.get("candidate", extras)
                for key, value in extras.items():
                    (candidate if key in on_candidate or mform.get("no_content") else content)[key] = value
            else:
                for key in extras:
                    ledger.add("dropped", mpath, f"content field '{key}' has no place in a response")
        body[k("candidates", snake)] = [put_nulls(candidate, mform.get("candidate_nulls"))]
    elif not form.get("no_candidates"):
        body["candidates"] = []
    if meta.usage is not UNSET:
        usage = meta.usage if own else _foreign_usage(meta.usage, ledger)
        if usage is not None:
            body[k("usageMetadata", snake)] = usage
    if meta.model is not None:
        body[k("modelVersion", snake)] = meta.model
    if meta.response_id is not None:
        body[k("responseId", snake)] = meta.response_id
    if meta.created is not None:
        if own:
            body[k("createTime", snake)] = meta.created
        else:
            ledger.add("dropped", "$.meta.created", "creation time is not in Gemini's timestamp format")
    extras = conv.extras.get(NAME)
    if extras and same_shape:
        for key, value in extras.items():
            if key == "candidates" and isinstance(value, list) and "candidates" in body:
                body["candidates"] = [*body["candidates"], *value]
            else:
                body[key] = value
    return put_nulls(body, form.get("nulls"))


def _foreign_usage(usage: Any, ledger: Ledger) -> dict | None:
    if not isinstance(usage, dict):
        ledger.add("dropped", "$.meta.usage", "usage is not an object")
        return None
    out = {}
    for key, value in usage.items():
        target = _FOREIGN_USAGE.get(key)
        if target is not None and isinstance(value, int):
            out[target] = value
        else:
            ledger.add("dropped", "$.meta.usage", f"usage field '{key}' has no Gemini equivalent")
    return out or None
