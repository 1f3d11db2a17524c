"""OpenAI Chat Completions messages, tool calls and tool results -> canonical messages (the
message-level half of parsing; `parser` handles the bodies around them)."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from ...conversation import Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from ...errors import ParseError
from ...ids import CallIds
from ..base import CallIndex
from . import blocks
from .blocks import NAME, missing, opt_str, parse_part, req_dict, req_str, rest, wrong

_USER_KEYS = frozenset(("role", "content", "name", "weight"))
_PLAIN_KEYS = frozenset(("role", "content"))
_USUAL_ASSISTANT_KEYS = frozenset(("role", "content", "tool_calls"))
_ASSISTANT_KEYS = frozenset(("role", "content", "name", "weight", "tool_calls", "function_call", "refusal",
                             "audio", "reasoning_content", "reasoning"))
_TOOL_KEYS = frozenset(("role", "content", "tool_call_id", "name"))
_FUNCTION_KEYS = frozenset(("role", "content", "name"))
_CALL_KEYS = frozenset(("id", "type", "function", "custom"))
_CALL_FUNCTION_KEYS = frozenset(("name", "arguments"))
_CALL_CUSTOM_KEYS = frozenset(("name", "input"))
_LEGACY_NOTE = "legacy function_call/function messages: call ids synthesized, results matched by name and order"


class Parser:
    """Reads the messages of one conversation; holds its call ids, call index and notes."""

    __slots__ = ("strict", "ids", "index", "notes")

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.ids = CallIds()
        self.index = CallIndex()
        self.notes: list[str] = []

    # Messages -------------------------------------------------------------------------------------

    def message(self, m: Any, path: str) -> Message:
        if type(m) is not dict:
            raise wrong(path, "a message", "an object", m)
        role = m.get("role", UNSET)
        if role == "assistant":
            return self.assistant(m, path)
        if role == "user" or role == "system" or role == "developer":
            return self.plain(m, role, path)
        if role == "tool":
            return self.tool(m, path)
        if role == "function":
            return self.function(m, path)
        if role is UNSET:
            raise missing(path, "role")
        if type(role) is not str:
            raise wrong(f"{path}.role", "'role'", "a string", role)
        raise ParseError(f"unknown role '{role}' (expected system, developer, user, assistant, tool or function)",
                         path=f"{path}.role", code="unknown_role")

    def content(self, m: dict, path: str) -> tuple[list, str]:
        """The blocks of `content` and how it was written: string, list, null or absent."""
        content = m.get("content", UNSET)
        if type(content) is str:
            return ([Text(content)] if content else []), "string"
        if type(content) is list:
            cpath = f"{path}.content"
            strict = self.strict
            return [parse_part(part, f"{cpath}[{j}]", strict) for j, part in enumerate(content)], "list"
        if content is None:
            return [], "null"
        if content is UNSET:
            return [], "absent"
        raise wrong(f"{path}.content", "'content'", "a string, an array or null", content)

    def required_content(self, m: dict, role: str, path: str) -> tuple[list, str]:
        """`content` of a user, system or developer message: only assistant messages may go without
        one; the API refuses the others."""
        found, mode = self.content(m, path)
        if mode in ("null", "absent"):
            raise ParseError(f"a {role} message needs 'content' (a string or an array of parts), got "
                             + ("null" if mode == "null" else "none"), path=f"{path}.content", code="missing_content")
        return found, mode

    def plain(self, m: dict, role: str, path: str) -> Message:
        content = m.get("content")
        if type(content) is str and _PLAIN_KEYS.issuperset(m):
            # The usual message, a string and nothing else: no form, name, weight or extras to read.
            return Message(role=role, blocks=(Text(content),) if content else ())
        found, mode = self.required_content(m, role, path)
        form: dict[str, Any] = {}
        if mode != blocks.default_mode(found, role, False):
            form["content"] = mode
        name = opt_str(m, "name", path)
        weight = _weight(m, path)
        extras = _unknown(m, _USER_KEYS)
        _nulls(m, ("name", "weight"), form)
        return Message(role=role, blocks=tuple(found), name=name, weight=weight,
                       extras={NAME: extras} if extras else {}, form={NAME: form} if form else {})

    def assistant(self, m: dict, path: str) -> Message:
        out: list = []
        form: dict[str, Any] = {}
        # The usual assistant message has content and tool calls only: then every optional field below
        # is absent, and reading it can be skipped.
        usual = _USUAL_ASSISTANT_KEYS.issuperset(m)
        if not usual:
            self._reasoning(m, path, out)
        found, mode = self.content(m, path)
        out.extend(found)
        if not usual:
            self._refusal_and_audio(m, path, out)
        calls = m.get("tool_calls")
        has_calls = False
        if type(calls) is list:
            for j, call in enumerate(calls):
                out.append(self.call(call, path, j))
            has_calls = bool(calls)
            if not calls:
                form["empty_calls"] = True
        elif calls is not None:
            raise wrong(f"{path}.tool_calls", "'tool_calls'", "an array", calls)
        if not usual:
            legacy = m.get("function_call")
            if type(legacy) is dict:
                out.append(self.legacy_call(legacy, path))
                has_calls = True
            elif legacy is not None:
                raise wrong(f"{path}.function_call", "'function_call'", "an object", legacy)
        if mode != blocks.default_mode(found, "assistant", has_calls):
            form["content"] = mode
        if usual:
            if calls is None and "tool_calls" in m:
                form["null"] = ["tool_calls"]
            return Message(role="assistant", blocks=tuple(out), form={NAME: form} if form else {})
        name = opt_str(m, "name", path)
        weight = _weight(m, path)
        extras = _unknown(m, _ASSISTANT_KEYS)
        if type(m.get("reasoning")) not in (str, type(None)):
            extras = dict(extras or {}, reasoning=m["reasoning"])  # some servers send an object: keep it
        _nulls(m, ("refusal", "audio", "tool_calls", "function_call", "reasoning_content", "reasoning", "name",
                   "weight"), form)
        return Message(role="assistant", blocks=tuple(out), name=name, weight=weight,
                       extras={NAME: extras} if extras else {}, form={NAME: form} if form else {})

    def _reasoning(self, m: dict, path: str, out: list) -> None:
        reasoning = m.get("reasoning_content")
        alt = m.get("reasoning")
        if type(reasoning) is str:
            if type(alt) is str and alt == reasoning:
                out.append(Reasoning(text=reasoning, origin=NAME, form={NAME: {"keys": ["reasoning_content", "reasoning"]}}))
                alt = None
            else:
                out.append(Reasoning(text=reasoning, origin=NAME))
        elif reasoning is not None:
            raise wrong(f"{path}.reasoning_content", "'reasoning_content'", "a string", reasoning)
        if type(alt) is str:
            out.append(Reasoning(text=alt, origin=NAME, form={NAME: {"keys": ["reasoning"]}}))

    def _refusal_and_audio(self, m: dict, path: str, out: list) -> None:
        refusal = m.get("refusal")
        if type(refusal) is str:
            out.append(Text(refusal, extras={NAME: {"refusal": True}}, form={NAME: {"field": True}}))
        elif refusal is not None:
            raise wrong(f"{path}.refusal", "'refusal'", "a string", refusal)
        audio = m.get("audio")
        if type(audio) is dict:
            out.append(Opaque(provider=NAME, item_type="assistant.audio", payload=dict(audio)))
        elif audio is not None:
            raise wrong(f"{path}.audio", "'audio'", "an object", audio)

    def tool(self, m: dict, path: str) -> Message:
        provider_id = req_str(m, "tool_call_id", path)
        call_id = self.index.by_id(provider_id)
        result = self.result(m, path, call_id, provider_id, "id" if call_id is not None else None, "tool")
        extras = _unknown(m, _TOOL_KEYS)
        return Message(role="tool", blocks=(result,), extras={NAME: extras} if extras else {})

    def function(self, m: dict, path: str) -> Message:
        name = req_str(m, "name", path)
        call_id, ambiguous = self.index.by_name(name)
        if ambiguous and self.strict:
            raise ParseError(f"result of '{name}' matches several unanswered calls by name only",
                             path=path, code="ambiguous_pairing")
        self._note()
        result = self.result(m, path, call_id, None, "name_order" if call_id is not None else None, "function")
        extras = _unknown(m, _FUNCTION_KEYS)
        return Message(role="tool", blocks=(result,), extras={NAME: extras} if extras else {})

    def result(self, m: dict, path: str, call_id: str | None, provider_id: str | None, matched_by: Any,
               role: str) -> ToolResult:
        form: dict[str, Any] = {}
        content = m.get("content")
        if type(content) is str:  # the usual: text only, in the default layout
            found = [Text(content)] if content else []
        else:
            found, mode = self.content(m, path)
            for j, block in enumerate(found):
                if type(block) is not Text and type(block) is not Media:
                    raise ParseError(f"a {role} message holds text parts only", path=f"{path}.content[{j}]",
                                     code="unknown_block")
            if mode != blocks.default_mode(found, "tool", False):
                form["content"] = mode
        name = m.get("name")
        if role == "tool":
            if name is not None:
                if type(name) is not str:
                    raise wrong(f"{path}.name", "'name'", "a string", name)
                form["name"] = True
            elif "name" in m:
                form["null"] = ["name"]
            elif call_id is not None:
                name = self.index.names.get(call_id)
        else:
            form["legacy"] = True
        return ToolResult(call_id=call_id, provider_id=provider_id, name=name, content=tuple(found),
                          matched_by=matched_by, form={NAME: form} if form else {})

    # Calls ------------------------------------------------------------------------------------------

    def call(self, call: Any, base: str, j: int) -> ToolCall | Opaque:
        """Call `j` of the message at `base`. Its path is built only to name an error."""
        if type(call) is not dict:
            raise wrong(_call_path(base, j), "a tool call", "an object", call)
        kind = call.get("type", UNSET)
        form: dict[str, Any] = {}
        provider_id = call.get("id", UNSET)
        if provider_id is UNSET:
            form["no_id"] = True
            provider_id = None
        elif type(provider_id) is not str:
            raise wrong(f"{_call_path(base, j)}.id", "'id'", "a string", provider_id)
        extras = _unknown(call, _CALL_KEYS) or {}
        signature = _google_signature(extras, form) if "extra_content" in extras else None
        if kind == "function" or (kind is UNSET and "function" in call):
            if kind is UNSET:
                form["no_type"] = True
            fn = call.get("function")
            name = fn.get("name") if type(fn) is dict else None
            if type(name) is not str or "arguments" not in fn:
                path = _call_path(base, j)  # the checks again, to raise the error they name
                fpath = f"{path}.function"
                req_str(req_dict(call, "function", path), "name", fpath)
                raise missing(fpath, "arguments")
            fn_rest = _unknown(fn, _CALL_FUNCTION_KEYS)
            if fn_rest:
                extras["$function"] = fn_rest
            call = self._function_call(name, fn["arguments"], base, j, provider_id, extras, form)
            return call if signature is None else msgspec.structs.replace(call, signature=signature)
        path = _call_path(base, j)
        if kind == "custom":
            custom = req_dict(call, "custom", path)
            cpath = f"{path}.custom"
            name = req_str(custom, "name", cpath)
            text = req_str(custom, "input", cpath)
            custom_rest = rest(custom, _CALL_CUSTOM_KEYS)
            if custom_rest:
                extras["$custom"] = custom_rest
            canonical = self.ids.new(name, text)
            self.index.add(canonical, name, provider_id)
            return ToolCall(id=canonical, name=name, arguments=text, provider_id=provider_id, kind="custom",
                            signature=signature, extras={NAME: extras} if extras else {},
                            form={NAME: form} if form else {})
        if kind is UNSET:
            raise missing(path, "type")
        if type(kind) is not str:
            raise wrong(f"{path}.type", "'type'", "a string", kind)
        if self.strict:
            raise ParseError(f"unknown tool call type '{kind}'", path=path, code="unknown_block")
        return Opaque(provider=NAME, item_type=kind, payload=dict(call), role_hint="call")

    def legacy_call(self, fc: dict, base: str) -> ToolCall:
        """The `function_call` of the message at `base`."""
        path = f"{base}.function_call"
        name = req_str(fc, "name", path)
        if "arguments" not in fc:
            raise missing(path, "arguments")
        extras = {"$function": rest(fc, _CALL_FUNCTION_KEYS)} if len(fc) > 2 else {}
        self._note()
        return self._function_call(name, fc["arguments"], base, None, None, extras, {"legacy": True})

    def _function_call(self, name: str, raw: Any, base: str, j: int | None, provider_id: str | None,
                       extras: dict, form: dict) -> ToolCall:
        """A function call's arguments read: those of call `j` of the message at `base`, or of its legacy
        `function_call` when `j` is None."""
        if type(raw) is str:
            arguments, valid = blocks.loads(raw)
            canonical = self.ids.from_text(name, raw, arguments)
            call = ToolCall(id=canonical, name=name, arguments=arguments, raw_arguments=raw, arguments_valid=valid,
                            provider_id=provider_id, extras={NAME: extras} if extras else {},
                            form={NAME: form} if form else {})
        elif type(raw) is dict:
            # Some loggers store the parsed object; keep it and remember the layout.
            form["object_arguments"] = True
            canonical = self.ids.new(name, raw)
            call = ToolCall(id=canonical, name=name, arguments=dict(raw), provider_id=provider_id,
                            extras={NAME: extras} if extras else {}, form={NAME: form})
        else:
            where = f"{base}.function_call" if j is None else f"{_call_path(base, j)}.function"
            raise wrong(f"{where}.arguments", "'arguments'", "a string", raw)
        self.index.add(canonical, name, provider_id)
        return call

    def _note(self) -> None:
        if not self.notes:
            self.notes.append(_LEGACY_NOTE)


def _google_signature(extras: dict, form: dict) -> str | None:
    """Gemini's OpenAI-compatible endpoint carries a call's thought signature as
    `extra_content.google.thought_signature`: taken out of the call's extras as its signature (what a
    Gemini part writes as thoughtSignature), the rest of `extra_content` kept."""
    extra = extras["extra_content"]
    google = extra.get("google") if type(extra) is dict else None
    signature = google.get("thought_signature") if type(google) is dict else None
    if type(signature) is not str:
        return None
    google = {k: v for k, v in google.items() if k != "thought_signature"}
    extra = {k: v for k, v in extra.items() if k != "google"} | ({"google": google} if google else {})
    if extra:
        extras["extra_content"] = extra
    else:
        del extras["extra_content"]
    form["google_signature"] = True
    return signature


def _call_path(base: str, j: int) -> str:
    return f"{base}.tool_calls[{j}]"


def _unknown(obj: dict, known: frozenset[str]) -> dict | None:
    """The keys a parser does not model, as a new dict; None (cheaply) when there are none."""
    if known.issuperset(obj):
        return None
    return {k: v for k, v in obj.items() if k not in known}


def _weight(m: dict, path: str) -> int | None:
    weight = m.get("weight")
    if weight is not None and type(weight) is not int:
        raise wrong(f"{path}.weight", "'weight'", "an integer", weight)
    return weight


def _nulls(m: dict, keys: tuple[str, ...], form: dict) -> None:
    """Remember optional keys written as null, so the round trip writes them again."""
    nulls = [k for k in keys if k in m and m[k] is None]
    if nulls:
        form["null"] = form.get("null", []) + nulls
