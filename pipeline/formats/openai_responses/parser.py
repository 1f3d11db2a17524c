"""OpenAI Responses -> canonical Conversation: request bodies (`input` + `instructions` + `tools`), bare
input-item lists and response objects (the items themselves are read by `reader.Reader`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ...conversation import Conversation, Message, Meta, Text
from ...errors import ConfigError, ParseError, ShapeError
from ..base import expect, require
from .detection import detect
from .items import NAME
from .reader import Reader
from .tools import parse_tool

def parse(obj: Any, shape: str | None = None, strict: bool = False) -> Conversation:
    if shape is None:
        found = detect(obj)
        if found is None:
            raise ShapeError(f"not an {NAME} record")
        shape = found.shape
    try:
        match shape:
            case "request" | "response":
                return _parse_body(obj, shape, strict)
            case "messages":
                return _parse_messages(obj, strict)
    except RecursionError:
        raise ParseError("record nested too deeply") from None
    raise ConfigError(f"unknown shape '{shape}'; valid: request, messages, response", code="unknown_shape")


def _parse_body(obj: Any, shape: str, strict: bool) -> Conversation:
    request = shape == "request"
    expect(obj, dict, "$", "a request body" if request else "a response object")
    items_key = "input" if request else "output"
    reader = Reader(strict)
    extras = {k: v for k, v in obj.items() if k not in (items_key, "instructions", "tools")}
    form: dict = {}
    system: list = []
    developer: list = []
    if "instructions" in obj:
        instructions = obj["instructions"]
        if isinstance(instructions, str):
            if instructions:
                system.append(Text(text=instructions))
                form["instructions"] = 1
            else:
                form["instructions"] = ""
        elif instructions is None:
            form["instructions"] = None
        else:  # a response echoes a prompt template's instructions as an item list: kept, not modelled
            extras["instructions"] = expect(instructions, (str, list), "$.instructions", "'instructions'")
    messages: list = []
    if request:
        if "input" in obj:
            inp = obj["input"]
            if isinstance(inp, str):
                messages = [Message(role="user", blocks=(Text(text=inp),))]
                form["input"] = "s"
            else:
                expect(inp, list, "$.input", "'input'")
                messages, lead_system, developer, lead = reader.items(inp, "$.input", lead=True)
                system.extend(lead_system)
                if lead:
                    form["lead"] = lead
        else:
            form["input"] = "-"
    else:
        output = require(obj, "output", list, "$")
        messages = reader.items(output, "$.output", lead=False)[0]
        form["output"] = "all"
    tools: list = []
    if "tools" in obj:
        raw_tools = obj["tools"]
        if raw_tools is None:
            extras["tools"] = None
        else:
            expect(raw_tools, list, "$.tools", "'tools'")
            tools = [parse_tool(t, f"$.tools[{i}]") for i, t in enumerate(raw_tools)]
            form["tools"] = 1
    return Conversation(messages=tuple(messages), system=tuple(system), developer=tuple(developer),
                        tools=tuple(tools), meta=_meta(obj, shape), extras={NAME: extras} if extras else {},
                        form={NAME: form})


def _meta(obj: dict, shape: str) -> Meta:
    model = obj.get("model")
    fields: dict = {"provider": NAME, "shape": shape, "model": model if isinstance(model, str) else None}
    if shape == "response":
        rid = obj.get("id")
        fields["response_id"] = rid if isinstance(rid, str) else None
        if "usage" in obj:
            fields["usage"] = obj["usage"]
        status = obj.get("status")
        details = obj.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        stop = reason if isinstance(reason, str) else status
        fields["stop_reason"] = stop if isinstance(stop, str) else None
        created = obj.get("created_at")
        if isinstance(created, (int, float)) and not isinstance(created, bool):
            try:
                fields["created"] = datetime.fromtimestamp(created, timezone.utc).isoformat()
            except (OverflowError, OSError, ValueError):
                pass
    return Meta(**fields)


def _parse_messages(obj: Any, strict: bool) -> Conversation:
    expect(obj, list, "$", "a list of input items")
    messages, system, developer, lead = Reader(strict).items(obj, "$", lead=True)
    return Conversation(messages=tuple(messages), system=tuple(system), developer=tuple(developer),
                        meta=Meta(provider=NAME, shape="messages"), form={NAME: {"lead": lead} if lead else {}})
