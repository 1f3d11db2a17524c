"""A strict checker for OpenAI Chat Completions request bodies, for tests.

`check_request(body)` returns violations as "JSON path: reason" strings (empty list: accepted). The
body is walked against the official SDK's request TypedDicts (`openai.types.chat.completion_create_params`)
at every depth: unknown keys, missing required keys, wrong types and values outside a Literal are all
reported (the SDK itself ignores unknown keys and never looks inside iterables). Then the rules that
the types cannot express: every tool call answered by tool messages right after its assistant message,
no tool message without a call, ids of 1..40 characters and unique per message, arguments a string
holding JSON, content required on an assistant message without calls, tool names and tool_choice
naming a defined tool, image URLs, stream_options only when streaming.

`compat=True` also accepts the documented extensions of OpenAI-compatible servers seen in real logs
(Mistral `prefix` and untyped function tools, Groq `reasoning_format` and free-form effort and service
tier values, Cerebras `clear_thinking`, `reasoning_content` / `reasoning` on assistant messages, the
`index` of a streamed call, the fine-tuning `weight`).
"""

from __future__ import annotations

import collections.abc
import functools
import json
import re
import types
import typing
from typing import Any

import typing_extensions
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
)
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsBase,
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)

MAX_ID = 40
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_LISTS = (list, collections.abc.Iterable, collections.abc.Sequence, typing.List)
_MAPS = (dict, collections.abc.Mapping, typing.Dict)
_WRAPPERS = (typing_extensions.Required, typing_extensions.NotRequired, typing.Required, typing.NotRequired,
             typing.Annotated)



class _UntypedFunction(typing_extensions.TypedDict):
    name: typing_extensions.Required[str]


class _UntypedNamedChoice(typing_extensions.TypedDict):
    """Hugging Face's router names a function without `type`."""

    function: typing_extensions.Required[_UntypedFunction]


_TOOL_CHOICE = typing_extensions.get_type_hints(CompletionCreateParamsBase)["tool_choice"]

# Extra keys (or wider types) accepted with compat=True: TypedDict -> {key: annotation}.
_COMPAT_KEYS: dict[Any, dict[str, Any]] = {
    CompletionCreateParamsBase: {"reasoning_format": str, "clear_thinking": bool,
                                 "reasoning_effort": typing.Optional[str], "service_tier": typing.Optional[str],
                                 # Mistral's "any" means required
                                 "tool_choice": typing.Union[_TOOL_CHOICE, typing.Literal["any"], _UntypedNamedChoice]},
    ChatCompletionAssistantMessageParam: {"prefix": bool, "reasoning_content": typing.Optional[str],
                                          "reasoning": typing.Optional[str], "weight": typing.Literal[0, 1]},
    ChatCompletionMessageFunctionToolCallParam: {"index": int},
}


def check_request(body: Any, *, compat: bool = False) -> list[str]:
    errors: list[str] = []
    if type(body) is not dict:
        return ["$: a request body must be an object"]
    schema = CompletionCreateParamsStreaming if body.get("stream") is True else CompletionCreateParamsNonStreaming
    _Walker(errors, compat).check(body, schema, "$")
    if not errors:  # the structural rules assume the types hold
        _structure(body, errors, compat)
    return errors


# --- the type walk -------------------------------------------------------------------------------

@functools.cache
def _fields(td: Any, compat: bool) -> dict[str, tuple[Any, bool]]:
    """key -> (annotation, required) of a TypedDict, with the compat keys of it and its bases."""
    out: dict[str, tuple[Any, bool]] = {}
    for key, hint in typing_extensions.get_type_hints(td, include_extras=True).items():
        required = False
        while typing.get_origin(hint) in _WRAPPERS:
            required = required or typing.get_origin(hint) in (typing_extensions.Required, typing.Required)
            hint = typing.get_args(hint)[0]
        out[key] = (hint, required)
    if compat:
        for base in (td, *getattr(td, "__orig_bases__", ()), *td.__mro__):
            for key, hint in _COMPAT_KEYS.get(base, {}).items():
                out[key] = (hint, False)
        if td is ChatCompletionFunctionToolParam:
            out["type"] = (out["type"][0], False)  # Mistral omits it; the type defaults to function
    return out


def _describe(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _name(tp: Any) -> str:
    if typing_extensions.is_typeddict(tp):
        return tp.__name__
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_name(a) for a in typing.get_args(tp))
    if origin in _LISTS:
        return "an array"
    if origin in _MAPS:
        return "an object"
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean", type(None): "null"}.get(
        tp, getattr(tp, "__name__", repr(tp)))


class _Walker:
    def __init__(self, errors: list[str], compat: bool) -> None:
        self.errors = errors
        self.compat = compat

    def check(self, value: Any, tp: Any, path: str) -> None:
        while typing.get_origin(tp) in _WRAPPERS:
            tp = typing.get_args(tp)[0]
        if tp is object or tp is Any:
            return
        if typing_extensions.is_typeddict(tp):
            self.typeddict(value, tp, path)
            return
        origin = typing.get_origin(tp)
        if origin is typing.Literal:
            if not any(type(value) is type(a) and value == a for a in typing.get_args(tp)):
                self.errors.append(f"{path}: must be {_name(tp)}, got {json.dumps(value)[:60]}")
            return
        if origin in (typing.Union, types.UnionType):
            self.union(value, typing.get_args(tp), path)
            return
        if origin in _LISTS:
            if type(value) is not list:
                self.errors.append(f"{path}: must be an array, got {_describe(value)}")
                return
            (item,) = typing.get_args(tp) or (object,)
            for i, element in enumerate(value):
                self.check(element, item, f"{path}[{i}]")
            return
        if origin in _MAPS:
            if type(value) is not dict:
                self.errors.append(f"{path}: must be an object, got {_describe(value)}")
                return
            args = typing.get_args(tp)
            for key, element in value.items():
                self.check(element, args[1] if args else object, f"{path}.{key}")
            return
        ok = {str: lambda v: type(v) is str, bool: lambda v: type(v) is bool, int: lambda v: type(v) is int,
              float: lambda v: type(v) in (int, float), type(None): lambda v: v is None}.get(tp)
        if ok is None:
            raise TypeError(f"accept_openai_chat cannot check annotation {tp!r} at {path}")
        if not ok(value):
            self.errors.append(f"{path}: must be {_name(tp)}, got {_describe(value)}")

    def typeddict(self, value: Any, td: Any, path: str) -> None:
        if type(value) is not dict:
            self.errors.append(f"{path}: must be an object ({td.__name__}), got {_describe(value)}")
            return
        fields = _fields(td, self.compat)
        if "type" in value and "type" in fields and not _tag_matches(td, "type", value["type"], self.compat):
            # A part of another kind: its other keys would only repeat the same mistake.
            self.check(value["type"], fields["type"][0], f"{path}.type")
            return
        for key, element in value.items():
            if key not in fields:
                self.errors.append(f"{path}.{key}: unknown key for {td.__name__}")
            else:
                self.check(element, fields[key][0], f"{path}.{key}")
        for key, (_, required) in fields.items():
            if required and key not in value:
                self.errors.append(f"{path}: missing required key '{key}' ({td.__name__})")

    def union(self, value: Any, options: tuple, path: str) -> None:
        # Tagged unions of TypedDicts: pick the member by its `type` or `role` literal, so the
        # errors name the member the value meant to be.
        if type(value) is dict:
            for tag in ("type", "role"):
                if tag in value:
                    tagged = [o for o in options if typing_extensions.is_typeddict(o) and _tag_matches(o, tag, value[tag], self.compat)]
                    if tagged:
                        options = tuple(tagged)
                        break
                    known = [v for o in options if typing_extensions.is_typeddict(o) and tag in _fields(o, self.compat)
                             for v in typing.get_args(_fields(o, self.compat)[tag][0])]
                    if known:
                        self.errors.append(f"{path}.{tag}: must be one of {', '.join(map(json.dumps, known))}, "
                                           f"got {json.dumps(value[tag])[:60]}")
                        return
        fitting = [o for o in options if _shallow_fits(value, o)]
        if not fitting:
            self.errors.append(f"{path}: must be {_name(typing.Union[options])}, got {_describe(value)}")
            return
        best: list[str] | None = None
        for option in fitting:
            trial: list[str] = []
            _Walker(trial, self.compat).check(value, option, path)
            if not trial:
                return
            if best is None or len(trial) < len(best):
                best = trial
        self.errors.extend(best or [])


def _tag_matches(td: Any, tag: str, value: Any, compat: bool) -> bool:
    hint = _fields(td, compat).get(tag)
    if hint is None:
        return False
    tp = hint[0]
    return typing.get_origin(tp) is typing.Literal and value in typing.get_args(tp)


def _shallow_fits(value: Any, tp: Any) -> bool:
    """Whether the value has the JSON kind of the annotation (object, array, string...), ignoring
    what is inside: tells 'wrong kind' apart from 'right kind, wrong details'."""
    while typing.get_origin(tp) in _WRAPPERS:
        tp = typing.get_args(tp)[0]
    if tp is object or tp is Any:
        return True
    if typing_extensions.is_typeddict(tp) or typing.get_origin(tp) in _MAPS:
        return type(value) is dict
    origin = typing.get_origin(tp)
    if origin in _LISTS:
        return type(value) is list
    if origin is typing.Literal:
        return any(type(value) is type(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return any(_shallow_fits(value, a) for a in typing.get_args(tp))
    return {str: str, bool: bool, int: int, float: (int, float), type(None): type(None)}.get(tp) is type(value) \
        or (tp is float and type(value) in (int, float))


# --- what the types cannot say ----------------------------------------------------------------------

def _structure(body: dict, errors: list[str], compat: bool) -> None:
    messages = body["messages"]
    if not messages:
        errors.append("$.messages: must hold at least one message")
    tool_names: dict[str, str] = {}
    for i, tool in enumerate(body.get("tools") or ()):
        kind = tool.get("type", "function")
        name = tool[kind]["name"]
        if not TOOL_NAME.match(name):
            errors.append(f"$.tools[{i}]: tool name '{name}' must match {TOOL_NAME.pattern}")
        if name in tool_names:
            errors.append(f"$.tools[{i}]: tool name '{name}' defined twice")
        tool_names[name] = kind
    for i, fn in enumerate(body.get("functions") or ()):
        if not TOOL_NAME.match(fn["name"]):
            errors.append(f"$.functions[{i}]: function name '{fn['name']}' must match {TOOL_NAME.pattern}")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type", "function") in ("function", "custom") and "allowed_tools" not in choice:
        kind = choice.get("type", "function")
        name = choice[kind]["name"]
        if tool_names.get(name) != kind:
            errors.append(f"$.tool_choice: names {kind} tool '{name}', which `tools` does not define")
    if choice is not None and not tool_names and choice != "none":
        errors.append("$.tool_choice: set without any tools")
    if body.get("parallel_tool_calls") is not None and not tool_names:
        errors.append("$.parallel_tool_calls: set without any tools")
    if "stream_options" in body and body.get("stream") is not True and body["stream_options"] is not None:
        errors.append("$.stream_options: only allowed when stream is true")

    pending: dict[str, int] = {}  # call id -> index of the assistant message that made it
    pending_function: str | None = None
    for i, m in enumerate(messages):
        path = f"$.messages[{i}]"
        role = m["role"]
        if role != "tool" and pending:
            errors.append(f"$.messages[{next(iter(pending.values()))}]: tool call(s) {sorted(pending)} not answered "
                          f"by tool messages before {path}")
            pending = {}
        if role != "function":
            pending_function = None
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if m.get("content") is None and not calls and not m.get("function_call") and not m.get("audio"):
                errors.append(f"{path}: an assistant message needs content unless it has tool_calls or function_call")
            for j, call in enumerate(calls):
                cpath = f"{path}.tool_calls[{j}]"
                cid = call["id"]
                if not 1 <= len(cid) <= MAX_ID:
                    errors.append(f"{cpath}.id: must be 1 to {MAX_ID} characters, got {len(cid)}")
                if cid in pending:
                    errors.append(f"{cpath}.id: '{cid}' used twice in one message")
                pending[cid] = i
                if call.get("type", "function") == "function":
                    _check_arguments(call["function"]["arguments"], f"{cpath}.function.arguments", errors)
            if m.get("function_call"):
                _check_arguments(m["function_call"]["arguments"], f"{path}.function_call.arguments", errors)
                pending_function = m["function_call"]["name"]
        elif role == "tool":
            cid = m["tool_call_id"]
            if cid not in pending:
                errors.append(f"{path}.tool_call_id: '{cid}' answers no tool call of the assistant message before it")
            else:
                del pending[cid]
        elif role == "function":
            if pending_function != m["name"]:
                errors.append(f"{path}: function result '{m['name']}' follows no function_call of that name")
            pending_function = None
        content = m.get("content")
        if isinstance(content, list):
            for j, part in enumerate(content):
                if part.get("type") == "image_url":
                    url = part["image_url"]["url"]
                    if not url.startswith(("http://", "https://", "data:image/")):
                        errors.append(f"{path}.content[{j}].image_url.url: must be an http(s) URL or an image data URL")
                elif part.get("type") == "file":
                    file = part["file"]
                    if "file_data" not in file and "file_id" not in file:
                        errors.append(f"{path}.content[{j}].file: needs file_data or file_id")
                    elif "file_data" in file and not file["file_data"].startswith("data:"):
                        errors.append(f"{path}.content[{j}].file.file_data: must be a data URL")
    if pending:
        errors.append(f"$.messages[{next(iter(pending.values()))}]: tool call(s) {sorted(pending)} never answered")


def _check_arguments(arguments: Any, path: str, errors: list[str]) -> None:
    try:
        json.loads(arguments)
    except ValueError:
        errors.append(f"{path}: must be a string holding JSON")
