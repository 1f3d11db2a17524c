"""Request parameters of other providers (Anthropic, Chat, Gemini) that have a clear Responses
equivalent, for writing a Responses request body."""

from __future__ import annotations

from msgspec import structs

from ...conversation import Conversation
from ...ledger import Ledger
from ..openai_siblings import tool_choice
from ..shared_params import (GEMINI_FORMAT_KEYS, OPENAI_SHARED_PARAMS, foreign_model_reason, openai_accepts,
                             response_format_from, response_format_to, same_vendor)
from .items import NAME

def map_foreign_params(conv: Conversation, ledger: Ledger, shape: str) -> tuple[dict, Conversation]:
    """Request parameters of other providers that have a clear Responses equivalent, and the
    conversation whose foreign extras still need a 'dropped' entry (the mapped keys removed)."""
    foreign = [p for p in conv.extras if p != NAME]
    model = conv.meta.model if conv.meta.provider not in (None, NAME) else None
    mapped: dict = {}
    if model is not None and shape == "request" and same_vendor(conv.meta.provider, NAME):
        mapped["model"], model = model, None  # a Chat model: the Responses API serves the same ones
    if not foreign:
        if model is not None and shape != "messages":
            ledger.add("dropped", "$.meta.model", foreign_model_reason(model, conv.meta.provider, NAME))
        return mapped, conv
    remaining = dict(conv.extras)
    for provider in foreign:
        values = dict(conv.extras[provider])
        if isinstance(values.get("model"), str):
            if "model" not in mapped:
                model = model or values["model"]
            del values["model"]
        if shape == "request":
            _response_format(provider, values, mapped, ledger)
            match provider:
                case "anthropic":
                    _take(values, mapped, "stream", "stream", bool)
                    _take(values, mapped, "max_tokens", "max_output_tokens", int)
                    _take(values, mapped, "temperature", "temperature", (int, float))
                    _take(values, mapped, "top_p", "top_p", (int, float))
                    _anthropic_tool_choice(values, mapped)
                case "openai-chat":
                    _take(values, mapped, "stream", "stream", bool)
                    _take(values, mapped, "max_completion_tokens", "max_output_tokens", int)
                    _take(values, mapped, "max_tokens", "max_output_tokens", int)
                    _take(values, mapped, "temperature", "temperature", (int, float))
                    _take(values, mapped, "top_p", "top_p", (int, float))
                    _take(values, mapped, "parallel_tool_calls", "parallel_tool_calls", bool)
                    _chat_tool_choice(values, mapped)
                    for key in OPENAI_SHARED_PARAMS:
                        if key in values and openai_accepts(key, values[key]):
                            _take(values, mapped, key, key, object)
                    _nested(values, mapped, "reasoning_effort", "reasoning", "effort")
                    _nested(values, mapped, "verbosity", "text", "verbosity")
                case "gemini":
                    _gemini_params(values, mapped)
        remaining[provider] = values
    if model is not None and shape != "messages":
        ledger.add("dropped", "$.meta.model", foreign_model_reason(model, conv.meta.provider, NAME))
    return mapped, structs.replace(conv, extras=remaining)


def _response_format(provider: str, values: dict, mapped: dict, ledger: Ledger) -> None:
    """Chat `response_format` or Gemini's response MIME type and schema, as `text.format`."""
    neutral, _ = response_format_from(provider, values)
    if neutral is None or "text" in mapped:
        return
    key, value, entries = response_format_to(NAME, neutral)
    mapped[key] = value
    for kind, reason in entries:
        ledger.add(kind, "$", reason)
    if provider == "openai-chat":
        del values["response_format"]
        return
    for config_key in ("generationConfig", "generation_config"):
        config = values.get(config_key)
        if isinstance(config, dict):
            rest = {k: v for k, v in config.items() if k not in GEMINI_FORMAT_KEYS}
            if rest:
                values[config_key] = rest
            else:
                del values[config_key]


def _take(values: dict, mapped: dict, key: str, target: str, kind: type | tuple) -> None:
    value = values.get(key)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)) and target not in mapped:
        mapped[target] = value
        del values[key]


def _nested(values: dict, mapped: dict, key: str, target: str, inner: str) -> None:
    """A Chat setting that Responses holds inside an object (`reasoning.effort`, `text.verbosity`)."""
    value = values.get(key)
    if isinstance(value, str) and openai_accepts(key, value) and inner not in mapped.get(target, {}):
        mapped[target] = {**mapped.get(target, {}), inner: value}
        del values[key]


def _anthropic_tool_choice(values: dict, mapped: dict) -> None:
    choice = values.get("tool_choice")
    if not isinstance(choice, dict) or "tool_choice" in mapped:
        return
    kind = choice.get("type")
    simple = {"auto": "auto", "any": "required", "none": "none"}
    if kind in simple:
        mapped["tool_choice"] = simple[kind]
    elif kind == "tool" and isinstance(choice.get("name"), str):
        mapped["tool_choice"] = {"type": "function", "name": choice["name"]}
    else:
        return
    if choice.get("disable_parallel_tool_use") is True:
        mapped["parallel_tool_calls"] = False
    del values["tool_choice"]


def _chat_tool_choice(values: dict, mapped: dict) -> None:
    if "tool_choice" in mapped or "tool_choice" not in values:
        return  # another provider's choice was mapped first; this one is ledgered as dropped
    choice = tool_choice(values["tool_choice"], NAME)
    if choice is not None:
        mapped["tool_choice"] = choice
        del values["tool_choice"]


def _gemini_params(values: dict, mapped: dict) -> None:
    for config_key in ("generationConfig", "generation_config"):
        config = values.get(config_key)
        if not isinstance(config, dict) or not config:
            continue  # an empty one stays, to be ledgered: it does not come back
        config = dict(config)
        for src, target, kind in (("maxOutputTokens", "max_output_tokens", int),
                                  ("max_output_tokens", "max_output_tokens", int),
                                  ("temperature", "temperature", (int, float)),
                                  ("topP", "top_p", (int, float)), ("top_p", "top_p", (int, float))):
            _take(config, mapped, src, target, kind)
        del values[config_key]
        for key, value in config.items():  # what is left is ledgered one setting at a time
            values[f"{config_key}.{key}"] = value
    for config_key in ("toolConfig", "tool_config"):
        config = values.get(config_key)
        if not isinstance(config, dict):
            continue
        calling = config.get("functionCallingConfig", config.get("function_calling_config"))
        if not isinstance(calling, dict) or len(config) != 1 or "tool_choice" in mapped:
            continue
        mode = calling.get("mode")
        names = calling.get("allowedFunctionNames", calling.get("allowed_function_names"))
        if mode == "ANY" and isinstance(names, list) and len(names) == 1 and isinstance(names[0], str):
            mapped["tool_choice"] = {"type": "function", "name": names[0]}
        elif mode in ("AUTO", "ANY", "NONE") and not names:
            mapped["tool_choice"] = {"AUTO": "auto", "ANY": "required", "NONE": "none"}[mode]
        else:
            continue
        del values[config_key]
