"""The public names, pinned: renaming or removing one is a visible, deliberate change. Validation codes
are part of the interface (configs and rejects files name them), so they are pinned too."""

import pipeline
import pytest
from pipeline import conversation, errors, formats, qa
from pipeline import render as render_function
from pipeline.render import BUILTIN_TOKENIZERS, FAMILIES
from pipeline.render import __all__ as RENDER_NAMES
from pipeline.validate import RULES

PUBLIC = [
    "BUILTIN_TOKENIZERS", "Block", "ConfigError", "ContentBlock", "Conversation", "ConversionError", "FAMILIES",
    "FORMATS", "InputError", "Issue", "JobConfig", "Ledger", "LedgerEntry", "MaskPolicy", "Media", "Message", "Meta",
    "Opaque", "ParseError", "RULES", "Reasoning", "RenderError", "RenderOptions", "Rendered", "RunResult",
    "SftprepError", "ShapeError", "Span", "Text", "Tool", "ToolCall", "ToolResult", "ValidateConfig",
    "build_report", "check_roundtrip", "detect", "expand_paths", "iter_parsed", "iter_raw", "load_config", "load_template",
    "load_tokenizer", "mask_view", "parse", "parse_back", "parse_record", "render", "render_html",
    "render_terminal", "run_job", "serialize", "validate", "write_html",
]

VALIDATION_CODES = [
    "orphan_result", "duplicate_result", "unanswered_call", "unanswered_call_at_end", "duplicate_call_id",
    "reused_call_id", "result_name_mismatch", "arguments_not_object", "call_in_user_turn",
    "result_in_assistant_turn", "no_tool_list", "unknown_tool", "arguments_schema", "invalid_tool_schema",
    "empty_assistant_turn", "reasoning_without_state", "reasoning_placeholder_state", "anthropic_blank_text",
    "anthropic_results_first", "anthropic_thinking_first", "gemini_response_turn", "gemini_call_signature",
    "openai_chat_tool_order", "flattened_tool_call",
    # What a log source cannot carry (conversation.meta.lacks).
    "source_reasoning_unsigned", "source_reasoning_not_logged", "source_reasoning_summary_only",
    "source_tool_output_truncated", "source_no_tool_list",
]


def test_the_public_names():
    assert pipeline.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(pipeline, name) is not None
    assert set(PUBLIC) <= set(dir(pipeline))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        pipeline.nothing_here


def test_render_and_validate_are_the_functions_whatever_was_imported_first():
    import pipeline.render.engine  # noqa: F401  (importing the wings again must not rebind the names)
    import pipeline.validate.flattened  # noqa: F401

    assert pipeline.render is render_function and callable(pipeline.render)
    assert pipeline.render.__module__ == "pipeline.render.registry"
    assert pipeline.validate.__module__ == "pipeline.validate.validator"
    assert pipeline.parse is formats.parse and pipeline.build_report is qa.build_report


def test_formats_and_templates():
    assert list(formats.FORMATS) == ["anthropic", "openai-chat", "openai-responses", "gemini"]
    for name in ("detect", "parse", "serialize", "get"):
        assert callable(getattr(formats, name))
    for module in formats.FORMATS.values():
        assert {"NAME", "detect", "parse", "serialize"} <= set(dir(module))
    assert {"chatml", "qwen3", "llama3", "harmony", "mistral"} <= set(FAMILIES)
    assert set(BUILTIN_TOKENIZERS) == {"qwen2.5", "qwen3", "llama3", "gpt-oss", "mistral"}


def test_render_and_qa_names():
    assert {"render", "load_template", "load_tokenizer", "MaskPolicy", "RenderOptions", "Rendered", "Span",
            "parse_back", "check_roundtrip", "mask_view"} <= set(RENDER_NAMES)
    assert {"build_report", "render_html", "render_terminal", "write_html"} <= set(qa.__all__)


def test_validation_codes_are_stable():
    assert list(RULES) == VALIDATION_CODES


def test_canonical_types():
    block_tags = {cls.__struct_config__.tag for cls in (conversation.Text, conversation.Media, conversation.ToolCall,
                                                          conversation.ToolResult, conversation.Reasoning,
                                                          conversation.Opaque)}
    assert block_tags == {"text", "media", "tool_call", "tool_result", "reasoning", "opaque"}
    assert set(conversation.Conversation.__struct_fields__) == {
        "messages", "system", "developer", "tools", "meta", "extras", "form", "original"}
    for name in ("InputError", "ShapeError", "ParseError", "ConversionError", "RenderError", "ConfigError"):
        assert issubclass(getattr(errors, name), errors.SftprepError)
