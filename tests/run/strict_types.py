"""The OpenAI SDK's own request types, checked strictly: a value must hold every required key, no key
the type does not declare, and only values of the declared types (the SDK's TypedDicts check nothing at
run time). `FineTuningExample` is a chat fine-tuning line built from them: the messages the SDK types,
`weight` 0/1 on assistant messages, tools, parallel_tool_calls."""

from __future__ import annotations

import collections.abc
import typing
from typing import Any, List, Literal, Union

from openai.types.chat import (ChatCompletionAssistantMessageParam, ChatCompletionFunctionToolParam,
                               ChatCompletionSystemMessageParam, ChatCompletionToolMessageParam,
                               ChatCompletionUserMessageParam)
from typing_extensions import NotRequired, Required, TypedDict, is_typeddict


class FineTuningAssistantMessage(ChatCompletionAssistantMessageParam, total=False):
    weight: Literal[0, 1]


FineTuningMessage = Union[ChatCompletionSystemMessageParam, ChatCompletionUserMessageParam,
                          FineTuningAssistantMessage, ChatCompletionToolMessageParam]


class FineTuningExample(TypedDict, total=False):
    messages: Required[List[FineTuningMessage]]
    tools: List[ChatCompletionFunctionToolParam]
    parallel_tool_calls: bool


def violations(value: Any, annotation: Any, path: str = "$") -> list[str]:
    """Where `value` breaks `annotation` (empty: it conforms)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Required, NotRequired, typing.Annotated):
        return violations(value, args[0], path)
    if annotation is Any or annotation is object:
        return []
    if is_typeddict(annotation):
        if not isinstance(value, dict):
            return [f"{path}: expected an object ({annotation.__name__})"]
        hints = typing.get_type_hints(annotation, include_extras=True)
        found = [f"{path}.{key}: not a field of {annotation.__name__}" for key in value if key not in hints]
        # Required[...] read from the hints: under postponed annotations __required_keys__ misses them.
        required = [key for key, hint in hints.items() if typing.get_origin(hint) is Required]
        found += [f"{path}: missing {key}" for key in required if key not in value]
        for key, item in value.items():
            if key in hints:
                found += violations(item, hints[key], f"{path}.{key}")
        return found
    if origin is Union or str(origin) == "types.UnionType":
        branches = [violations(value, arg, path) for arg in args]
        if any(not b for b in branches):
            return []
        return [f"{path}: matches no type of the union ({'; '.join(min(branches, key=len))})"]
    if origin is Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence):
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [v for i, item in enumerate(value) for v in violations(item, args[0], f"{path}[{i}]")]
    if origin in (dict, collections.abc.Mapping):
        return [] if isinstance(value, dict) else [f"{path}: expected an object"]
    if annotation is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if annotation in (str, bool):
        return [] if type(value) is annotation else [f"{path}: expected {annotation.__name__}"]
    if annotation in (int, float):
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: expected a number"]
    raise TypeError(f"{path}: no strict check for {annotation!r}")
