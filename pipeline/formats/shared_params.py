"""Request parameters every codec maps the same way: whose model a model name is, and the structured
response format (Chat `response_format`, Responses `text.format`, Gemini `responseMimeType` +
`responseJsonSchema`/`responseSchema`) through one neutral form:

    {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "schema": {...}, "name"?, "strict"?,
                                                   "description"?}
"""

from __future__ import annotations

from typing import Any

_OPENAPI_TYPES = frozenset({"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL", "TYPE_UNSPECIFIED"})

# The company behind each wire format: a model name travels only between formats of one vendor.
VENDORS = {"openai-chat": "OpenAI", "openai-responses": "OpenAI", "anthropic": "Anthropic", "gemini": "Google"}
# Request parameters Chat Completions and Responses both take, by the same name and with the same meaning.
OPENAI_SHARED_PARAMS = ("store", "metadata", "user", "service_tier", "safety_identifier", "prompt_cache_key",
                        "prompt_cache_retention")
# The enum values of shared settings that OpenAI's two APIs accept. OpenAI-compatible servers send others
# (Groq: service_tier "on_demand", reasoning_effort "default"): those stay where they were, ledgered.
_OPENAI_ENUMS = {"service_tier": frozenset({"auto", "default", "flex", "scale", "priority"}),
                 "reasoning_effort": frozenset({"none", "minimal", "low", "medium", "high", "xhigh"}),
                 "verbosity": frozenset({"low", "medium", "high"})}


def openai_accepts(key: str, value: Any) -> bool:
    """Whether a shared Chat/Responses setting (by its Chat name) has a value both APIs take."""
    allowed = _OPENAI_ENUMS.get(key)
    return allowed is None or value in allowed


GEMINI_FORMAT_KEYS = ("responseMimeType", "responseJsonSchema", "responseSchema",
                      "response_mime_type", "response_json_schema", "response_schema")


def same_vendor(provider: str | None, target: str) -> bool:
    """A model of `provider` can be named in a `target` body (None: nobody said whose it is)."""
    return provider is None or VENDORS.get(provider) == VENDORS.get(target)


def foreign_model_reason(model: str, provider: str | None, target: str) -> str:
    return (f"model '{model}' is {VENDORS.get(provider or '', 'another vendor')}'s ({provider}); "
            f"{target} serves {VENDORS.get(target, 'its own')}'s models: set one")


def response_format_from(provider: str, values: dict) -> tuple[dict | None, list[str]]:
    """The neutral response format in one provider's request parameters, and the keys it used
    (Gemini's are inside generationConfig). None when there is none or it does not map."""
    match provider:
        case "openai-chat":
            return _from_chat(values.get("response_format")), ["response_format"]
        case "openai-responses":
            text = values.get("text")
            fmt = text.get("format") if isinstance(text, dict) else None
            return _from_responses(fmt), ["text.format"]
        case "gemini":
            config = values.get("generationConfig", values.get("generation_config"))
            if not isinstance(config, dict):
                return None, []
            return _from_gemini(config), [k for k in GEMINI_FORMAT_KEYS if k in config]
    return None, []


def _from_chat(value: Any) -> dict | None:
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        return None
    if value["type"] != "json_schema":
        return {"type": value["type"]} if len(value) == 1 else None
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict) or len(value) != 2:
        return None
    return {"type": "json_schema", **spec} if set(spec) <= {"name", "schema", "strict", "description"} else None


def _from_responses(value: Any) -> dict | None:
    if not isinstance(value, dict) or value.get("type") not in ("text", "json_object", "json_schema"):
        return None
    if value["type"] != "json_schema":
        return {"type": value["type"]} if len(value) == 1 else None
    if not isinstance(value.get("schema"), dict) or not set(value) <= {"type", "name", "schema", "strict", "description"}:
        return None
    return dict(value)


def _from_gemini(config: dict) -> dict | None:
    mime = config.get("responseMimeType", config.get("response_mime_type"))
    schema = config.get("responseJsonSchema", config.get("response_json_schema"))
    openapi = config.get("responseSchema", config.get("response_schema"))
    if mime == "text/plain" and schema is None and openapi is None:
        return {"type": "text"}
    if mime != "application/json":
        return None
    if schema is None and openapi is None:
        return {"type": "json_object"}
    if isinstance(schema, dict) and openapi is None:
        return {"type": "json_schema", "schema": schema}
    if isinstance(openapi, dict) and schema is None:
        return {"type": "json_schema", "schema": openapi_to_json_schema(openapi)}
    return None


def openapi_to_json_schema(schema: Any) -> Any:
    """Gemini's OpenAPI-style schema (types in capitals) as JSON Schema."""
    if isinstance(schema, dict):
        return {key: (value.lower() if key == "type" and isinstance(value, str) and value in _OPENAPI_TYPES
                      else openapi_to_json_schema(value))
                for key, value in schema.items()}
    if isinstance(schema, list):
        return [openapi_to_json_schema(item) for item in schema]
    return schema


def response_format_to(target: str, neutral: dict) -> tuple[str, Any, list[tuple[str, str]]]:
    """(key, value) to put in a `target` body (for Gemini: the generationConfig entries), and the
    ledger entries (kind, reason) for what had to be made up or left out."""
    kind = neutral["type"]
    match target:
        case "openai-chat" | "openai-responses":
            fmt = dict(neutral)
            entries = []
            if kind == "json_schema" and "name" not in fmt:
                # Both require a name; the schema is what constrains the output.
                fmt = {"type": "json_schema", "name": "response", **{k: v for k, v in fmt.items() if k != "type"}}
                entries.append(("synthesized", f"{target} needs a json_schema name: wrote 'response'"))
            if target == "openai-responses":
                return "text", {"format": fmt}, entries
            if kind != "json_schema":
                return "response_format", fmt, entries
            spec = {k: fmt[k] for k in ("name", "description", "schema", "strict") if k in fmt}
            return "response_format", {"type": "json_schema", "json_schema": spec}, entries
        case "gemini":
            if kind == "text":
                return "generationConfig", {"responseMimeType": "text/plain"}, []
            config: dict[str, Any] = {"responseMimeType": "application/json"}
            entries = []
            if kind == "json_schema":
                config["responseJsonSchema"] = neutral["schema"]
                entries = [("dropped", f"json_schema '{key}' has no place in Gemini's responseJsonSchema")
                           for key in ("name", "description", "strict") if key in neutral]
            return "generationConfig", config, entries
    raise ValueError(target)
