"""Request parameters of other formats (Anthropic, Responses, Gemini) that have a clear Chat
Completions equivalent, for writing a Chat request body."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ...ledger import Ledger
from ..openai_siblings import tool_choice
from ..shared_params import OPENAI_SHARED_PARAMS, openai_accepts, response_format_from, response_format_to

def _tool_choice_from_anthropic(value: Any) -> Any:
    if type(value) is not dict:
        return UNSET
    kind = value.get("type")
    if kind == "tool" and type(value.get("name")) is str:
        return {"type": "function", "function": {"name": value["name"]}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(kind, UNSET)


def map_foreign_params(extras: dict[str, dict[str, Any]], ledger: Ledger
                       ) -> tuple[dict[str, Any], dict[str, set[str]], dict[str, dict[str, Any]]]:
    """Request parameters of other formats that have a clear Chat equivalent: (Chat params, per
    provider the keys carried, which then need no ledger entry, and per provider the settings left
    over from a partly carried key, to be ledgered one by one)."""
    out: dict[str, Any] = {}
    leftovers: dict[str, dict[str, Any]] = {}

    def take_format(neutral: dict) -> None:
        _, value, entries = response_format_to("openai-chat", neutral)
        out["response_format"] = value
        for kind, reason in entries:
            ledger.add(kind, "$", reason)
    used: dict[str, set[str]] = {}

    def take(provider: str, key: str, target: str, value: Any) -> None:
        if value is not UNSET and target not in out:
            out[target] = value
            used.setdefault(provider, set()).add(key)

    src = extras.get("anthropic") or {}
    for key, target in (("max_tokens", "max_completion_tokens"), ("temperature", "temperature"),
                        ("top_p", "top_p"), ("stop_sequences", "stop"), ("stream", "stream")):
        if key in src:
            take("anthropic", key, target, src[key])
    if "model" in src:
        used.setdefault("anthropic", set()).add("model")
    if "tool_choice" in src:
        choice = src["tool_choice"]
        take("anthropic", "tool_choice", "tool_choice", _tool_choice_from_anthropic(choice))
        if type(choice) is dict and choice.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False

    src = extras.get("openai-responses") or {}
    for key, target in (("max_output_tokens", "max_completion_tokens"), ("temperature", "temperature"),
                        ("top_p", "top_p"), ("parallel_tool_calls", "parallel_tool_calls"), ("stream", "stream")):
        if key in src:
            take("openai-responses", key, target, src[key])
    if "model" in src:
        used.setdefault("openai-responses", set()).add("model")
    if "tool_choice" in src:
        choice = tool_choice(src["tool_choice"], "openai-chat")
        take("openai-responses", "tool_choice", "tool_choice", UNSET if choice is None else choice)
    for key in OPENAI_SHARED_PARAMS:
        if key in src and src[key] is None:
            used.setdefault("openai-responses", set()).add(key)  # not set (a response echoes it as null)
        elif key in src and openai_accepts(key, src[key]):
            take("openai-responses", key, key, src[key])
    # `reasoning.effort` and `text.verbosity` are top-level in Chat; the rest of either object is ledgered.
    for key, inner, target in (("reasoning", "effort", "reasoning_effort"), ("text", "verbosity", "verbosity")):
        settings = src.get(key)
        if type(settings) is not dict:
            continue
        value = settings.get(inner)
        carried = {inner} if type(value) is str and openai_accepts(target, value) and target not in out else set()
        if carried:
            out[target] = settings[inner]
        if key == "text":
            fmt, _ = response_format_from("openai-responses", src)
            if fmt is not None and "response_format" not in out:
                take_format(fmt)
                carried.add("format")
        if carried:
            used.setdefault("openai-responses", set()).add(key)
            for name, value in settings.items():
                if name not in carried:
                    leftovers.setdefault("openai-responses", {})[f"{key}.{name}"] = value

    src = extras.get("gemini") or {}
    fmt, format_keys = response_format_from("gemini", src)
    if fmt is not None and "response_format" not in out:
        take_format(fmt)
    else:
        format_keys = []
    for gkey in ("generationConfig", "generation_config"):
        config = src.get(gkey)
        if type(config) is dict and config:  # an empty one is ledgered: it cannot come back
            rest = {k: v for k, v in config.items() if k not in format_keys}
            for names, target in ((("maxOutputTokens", "max_output_tokens"), "max_completion_tokens"),
                                  (("temperature",), "temperature"), (("topP", "top_p"), "top_p"),
                                  (("stopSequences", "stop_sequences"), "stop"), (("seed",), "seed")):
                for name in names:
                    if name in rest and target not in out:
                        out[target] = rest.pop(name)
            used.setdefault("gemini", set()).add(gkey)
            for key, value in rest.items():  # what is left is ledgered one setting at a time
                leftovers.setdefault("gemini", {})[f"{gkey}.{key}"] = value
    for gkey in ("toolConfig", "tool_config"):
        config = src.get(gkey)
        if type(config) is dict and len(config) == 1:
            fcc = config.get("functionCallingConfig", config.get("function_calling_config"))
            choice = _tool_choice_from_gemini(fcc)
            take("gemini", gkey, "tool_choice", choice)
    if "model" in src:
        used.setdefault("gemini", set()).add("model")
    return out, used, leftovers


def _tool_choice_from_gemini(config: Any) -> Any:
    if type(config) is not dict:
        return UNSET
    mode = config.get("mode")
    names = config.get("allowedFunctionNames", config.get("allowed_function_names"))
    if mode == "ANY" and type(names) is list and len(names) == 1 and type(names[0]) is str:
        return {"type": "function", "function": {"name": names[0]}}
    if names:
        return UNSET  # a subset of tools has no plain Chat tool_choice
    return {"AUTO": "auto", "ANY": "required", "NONE": "none"}.get(mode, UNSET)
