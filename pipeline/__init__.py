"""sftprep: logged LLM conversations with tool calls, turned into fine-tuning data without losing
the structure of a single tool call.

The public API, one name per thing a user does:

    conv = pipeline.parse(record)                      # any supported wire format, detected
    body, ledger = pipeline.serialize(conv, "gemini")  # and what the target could not carry
    issues = pipeline.validate(conv)
    out = pipeline.render(conv, pipeline.load_template("chatml"), pipeline.load_tokenizer("qwen2.5"))
    result = pipeline.run_job(pipeline.load_config("configs/default.toml"))

`pipeline.render` and `pipeline.validate` are the functions; the wings of the same names are reached
with `from pipeline.render import ...`. Everything else loads on first use, so `import pipeline` stays
cheap for a process that needs one wing.
"""

from __future__ import annotations

import importlib
from typing import Any

# Bound here, before any later import of these wings could bind the package over the function.
from .render import render
from .validate import validate

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    # the canonical types
    **dict.fromkeys(("Conversation", "Message", "Block", "ContentBlock", "Text", "Media", "ToolCall", "ToolResult",
                     "Reasoning", "Opaque", "Tool", "Meta"), "conversation"),
    **dict.fromkeys(("Ledger", "LedgerEntry"), "ledger"),
    **dict.fromkeys(("SftprepError", "InputError", "ShapeError", "ParseError", "ConversionError", "RenderError",
                     "ConfigError"), "errors"),
    # stages
    **dict.fromkeys(("FORMATS", "detect", "parse", "serialize"), "formats"),
    **dict.fromkeys(("expand_paths", "iter_raw", "iter_parsed", "parse_record"), "ingest"),
    **dict.fromkeys(("RULES", "Issue", "ValidateConfig"), "validate"),
    **dict.fromkeys(("FAMILIES", "BUILTIN_TOKENIZERS", "MaskPolicy", "RenderOptions", "Rendered", "Span",
                     "load_template", "load_tokenizer", "parse_back", "check_roundtrip", "mask_view"), "render"),
    **dict.fromkeys(("JobConfig", "RunResult", "load_config"), "run"),
    **dict.fromkeys(("build_report", "render_html", "render_terminal", "write_html"), "qa"),
    "run_job": "api",
}

__all__ = sorted(["render", "validate", *_LAZY])


def __getattr__(name: str) -> Any:
    wing = _LAZY.get(name)
    if wing is None:
        raise AttributeError(f"module 'pipeline' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{wing}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
