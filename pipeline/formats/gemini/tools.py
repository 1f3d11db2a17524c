"""Gemini tool definitions and request parameters: the flat canonical tool list against Gemini's
grouped Tool objects, OpenAPI-style schemas against JSON Schema, and other providers' parameters
(max tokens, temperature, tool_choice...) mapped into generationConfig / toolConfig."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ...conversation import CUSTOM_INPUT, PROVIDERS, Conversation, Reasoning, Tool, custom_input_schema, iter_blocks
from ...errors import ParseError
from ...ledger import Ledger
from ..shared_params import openapi_to_json_schema, response_format_from, response_format_to
from .parts import CAMEL, NAME, _bad, put_nulls, unset


# --- tool definitions ------------------------------------------------------------------------------

def parse_tools(value: Any) -> tuple[tuple[Tool, ...], list]:
    """Flat canonical tools, and the layout of Gemini's Tool objects ([[key, count], ...] per object)
    so the grouping comes back exactly. One Tool object in place of the list is what older SDKs send
    (the API accepts it); its path stays `$.tools`."""
    if isinstance(value, dict):
        entries = [("$.tools", value)]
    elif isinstance(value, list):
        entries = [(f"$.tools[{ti}]", entry) for ti, entry in enumerate(value)]
    else:
        raise _bad(value, "'tools' must be an array or one Tool object", "$.tools")
    tools: list[Tool] = []
    layout: list[list] = []
    for path, entry in entries:
        if not isinstance(entry, dict):
            raise _bad(entry, "a tool must be an object", path)
        groups = []
        for key, item in entry.items():
            if item is None:  # an unset kind of tool (an SDK dump names them all): layout only
                groups.append([key, None])
            elif CAMEL.get(key, key) == "functionDeclarations":
                if not isinstance(item, list):
                    raise _bad(item, f"'{key}' must be an array", f"{path}.{key}")
                tools.extend(_declaration(d, f"{path}.{key}[{di}]") for di, d in enumerate(item))
                groups.append([key, len(item)])
            else:  # googleSearch, codeExecution, urlContext, fileSearch, googleMaps, ...
                tools.append(Tool(name=key, kind="hosted", extras={NAME: {key: item}}))
                groups.append([key, 1])
        layout.append(groups)
    return tuple(tools), layout


def _declaration(d: Any, path: str) -> Tool:
    if not isinstance(d, dict):
        raise _bad(d, "a function declaration must be an object", path)
    name = description = None
    params: Any = UNSET
    params_key = None
    extras: dict[str, Any] = {}
    form: dict[str, Any] = {}
    d, nulls = unset(d)  # `description: null` included: the API takes it as no description
    if nulls:
        form["nulls"] = nulls
    for key, value in d.items():
        canonical = CAMEL.get(key, key)
        if key == "name":
            name = value
        elif key == "description":
            if not isinstance(value, str):
                raise _bad(value, "'description' must be a string or null", f"{path}.description")
            description = value
        elif canonical == "parametersJsonSchema" or (key == "parameters" and params_key is None):
            if params_key == "parameters":
                extras["parameters"] = params  # both given: the JSON Schema one is canonical
            params, params_key = value, key
        else:
            extras[key] = value
    if not isinstance(name, str):
        if name is None:
            raise ParseError("missing required field 'name'", path=path)
        raise _bad(name, "'name' must be a string", f"{path}.name")
    if params_key is not None:
        form["params"] = params_key
        if params_key == "parameters":
            # Gemini's OpenAPI-style schema spells types in capitals; canonical parameters are JSON Schema.
            normalized = openapi_to_json_schema(params)
            if normalized != params:
                form["openapi"] = params
                params = normalized
    return Tool(name=name, description=description, parameters=params, extras={NAME: extras} if extras else {},
                form={NAME: form} if form else {})


def write_tools(tools: tuple[Tool, ...], layout: list | None, ledger: Ledger) -> list | None:
    if not tools and layout is None:
        return None
    if layout is not None and _layout_fits(layout, tools):
        out = []
        it = iter(tools)
        for groups in layout:
            entry: dict[str, Any] = {}
            for key, count in groups:
                if count is None:
                    entry[key] = None
                elif CAMEL.get(key, key) == "functionDeclarations":
                    entry[key] = [_declaration_out(next(it), ledger, "") for _ in range(count)]
                else:
                    entry.update(next(it).extras[NAME])
            out.append(entry)
        return out
    declarations = []
    hosted = []
    for ti, tool in enumerate(tools):
        path = f"$.tools[{ti}]"
        if tool.kind == "hosted":
            own = tool.extras.get(NAME)
            if own:
                hosted.append(dict(own))
            else:
                ledger.add("dropped", path, f"hosted tool '{tool.name}' has no Gemini equivalent")
        else:
            declarations.append(_declaration_out(tool, ledger, path))
    out = [{"functionDeclarations": declarations}] if declarations else []
    out.extend(hosted)
    return out


def _layout_fits(layout: Any, tools: tuple[Tool, ...]) -> bool:
    """The recorded grouping still describes these tools (nobody added, removed or reordered any)."""
    i = 0
    try:
        for groups in layout:
            for key, count in groups:
                if count is None:
                    continue
                if CAMEL.get(key, key) == "functionDeclarations":
                    if any(t.kind == "hosted" for t in tools[i:i + count]) or i + count > len(tools):
                        return False
                    i += count
                else:
                    if i >= len(tools) or tools[i].kind != "hosted" or key not in (tools[i].extras.get(NAME) or {}):
                        return False
                    i += 1
    except (TypeError, ValueError):
        return False
    return i == len(tools)


def _declaration_out(tool: Tool, ledger: Ledger, path: str) -> dict:
    form = tool.form.get(NAME) or {}
    out: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        out["description"] = tool.description
    params = tool.parameters
    if tool.kind == "custom":
        ledger.add("folded", path,
                   f"custom tool '{tool.name}' declared as a function taking its text as '{CUSTOM_INPUT}'")
        params = custom_input_schema()
    if params is not UNSET:
        original = form.get("openapi")
        if original is not None and openapi_to_json_schema(original) == params:
            params = original
        out[form.get("params", "parametersJsonSchema")] = params
    extras = tool.extras.get(NAME)
    if extras:
        out.update(extras)
    return put_nulls(out, form.get("nulls"))


# --- other providers' request parameters -------------------------------------------------------------

_GENERATION = {
    "max_tokens": "maxOutputTokens", "max_completion_tokens": "maxOutputTokens", "max_output_tokens": "maxOutputTokens",
    "temperature": "temperature", "top_p": "topP", "top_k": "topK", "stop_sequences": "stopSequences",
    "stop": "stopSequences", "seed": "seed", "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty", "n": "candidateCount",
}


# What Gemini says in the request URL rather than the body.
_NOT_IN_BODY = {"model": "Gemini names the model in the endpoint URL, not the body",
                "stream": "Gemini streams through the streamGenerateContent endpoint, not a body field"}


def foreign_params(conv: Conversation, body: dict, ledger: Ledger) -> None:
    """Map other providers' parameters with a clear Gemini equivalent into generationConfig/toolConfig;
    ledger the rest. Gemini's own parameters (if any) win."""
    generation: dict[str, Any] = {}
    calling: dict[str, Any] | None = None
    for provider, values in conv.extras.items():
        if provider == NAME or provider not in PROVIDERS:  # not a wire format's: where the log came from
            continue
        neutral, _ = response_format_from(provider, values)
        if neutral is not None and "responseMimeType" not in generation:
            _, config, entries = response_format_to(NAME, neutral)
            generation.update(config)
            for kind, reason in entries:
                ledger.add(kind, "$", reason)
        for key, value in values.items():
            if neutral is not None and (key == "response_format" or (key == "text" and set(value) == {"format"})):
                continue
            if key in _NOT_IN_BODY:
                ledger.add("dropped", "$", f"{provider} field '{key}': {_NOT_IN_BODY[key]}")
                continue
            target = _GENERATION.get(key)
            if (key == "top_k" and provider != "anthropic") or (key == "n" and provider != "openai-chat"):
                target = None
            if target == "stopSequences" and isinstance(value, str):
                value = [value]
            if target is not None and _scalar_ok(target, value):
                generation.setdefault(target, value)
                continue
            if key == "tool_choice":
                mapped, rest = _tool_choice(value)
                if mapped is not None:
                    calling = calling or mapped
                    for extra in rest:
                        ledger.add("dropped", "$", f"{provider} field 'tool_choice.{extra}' has no equivalent in {NAME}")
                    continue
            ledger.add("dropped", "$", f"{provider} field '{key}' has no equivalent in {NAME}")
    if generation:
        key = "generationConfig" if "generation_config" not in body else "generation_config"
        existing = body.get(key)
        body[key] = {**generation, **existing} if isinstance(existing, dict) else generation
    if calling is not None:
        key = "toolConfig" if "tool_config" not in body else "tool_config"
        existing = body.get(key)
        if not isinstance(existing, dict):
            body[key] = {"functionCallingConfig": calling}
        elif not ("functionCallingConfig" in existing or "function_calling_config" in existing):
            body[key] = {**existing, "functionCallingConfig": calling}


def _scalar_ok(target: str, value: Any) -> bool:
    if target == "stopSequences":
        return isinstance(value, list) and all(isinstance(s, str) for s in value)
    if target in ("maxOutputTokens", "topK", "seed", "candidateCount"):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tool_choice(value: Any) -> tuple[dict | None, list[str]]:
    """functionCallingConfig for an Anthropic / OpenAI tool_choice, and the keys it could not carry."""
    if isinstance(value, str):
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY", "any": "ANY"}.get(value)
        return ({"mode": mode} if mode else None), []
    if not isinstance(value, dict):
        return None, []
    kind = value.get("type", "function" if "function" in value else None)
    rest = [key for key in value if key not in ("type", "name", "function")]
    if kind in ("auto", "none", "any"):
        return {"mode": {"auto": "AUTO", "none": "NONE", "any": "ANY"}[kind]}, rest
    if kind in ("tool", "function"):
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else value.get("name")
        if isinstance(name, str):
            return {"mode": "ANY", "allowedFunctionNames": [name]}, rest
    return None, []


# --- what only a Gemini body can say -----------------------------------------------------------------

def form_losses(conv: Conversation, target: str) -> list[tuple[str, str, str]]:
    """(kind, path, reason) for layout of a Gemini record that `target` cannot keep, so that writing it
    back to Gemini differs: the systemInstruction role, OpenAPI-style `parameters`/`responseSchema`, the
    thought flag on a part that is not reasoning text."""
    form = conv.form.get(NAME) or {}
    out = []
    system = form.get("system")
    if isinstance(system, dict) and "role" in system:
        out.append(("dropped", "$.system", f"systemInstruction role {system['role']!r} has no equivalent in {target} "
                                           "(Gemini ignores it)"))
    for ti, tool in enumerate(conv.tools):
        if (tool.form.get(NAME) or {}).get("params") == "parameters":
            out.append(("folded", f"$.tools[{ti}]", "Gemini OpenAPI-style 'parameters' carried as JSON Schema "
                                                    "(types in lower case); Gemini gets them back as parametersJsonSchema"))
    for mi, bi, block in iter_blocks(conv):
        # An interim image the model thought in is a Media marked `thought: true`: elsewhere, plain content.
        if not isinstance(block, Reasoning) and (getattr(block, "form", {}).get(NAME) or {}).get("thought") is True:
            out.append(("folded", f"$.messages[{mi}].blocks[{bi}]", f"Gemini marks this part as a thought; {target} "
                                                                    "has no thought flag for it: written as content"))
    config = (conv.extras.get(NAME) or {}).get("generationConfig")
    if isinstance(config, dict) and "responseSchema" in config and target != "anthropic":  # anthropic drops it
        out.append(("folded", "$", "Gemini OpenAPI-style responseSchema carried as JSON Schema; Gemini gets it back "
                                   "as responseJsonSchema"))
    return out
