"""The public names, pinned: renaming or removing one is a visible, deliberate change. Validation codes
are part of the interface (configs and rejects files name them), so they are pinned too."""

import pipeline.formats
import pipeline.qa
import pipeline.render
import pipeline.validate
from pipeline import conversation, errors

VALIDATION_CODES = [
    "orphan_result", "duplicate_result", "unanswered_call", "unanswered_call_at_end", "duplicate_call_id",
    "reused_call_id", "result_name_mismatch", "arguments_not_object", "call_in_user_turn",
    "result_in_assistant_turn", "no_tool_list", "unknown_tool", "arguments_schema", "invalid_tool_schema",
    "empty_assistant_turn", "reasoning_without_state", "reasoning_placeholder_state", "anthropic_blank_text",
    "anthropic_results_first", "anthropic_thinking_first", "gemini_response_turn", "gemini_call_signature",
    "openai_chat_tool_order", "flattened_tool_call",
]


def test_formats_and_templates():
    assert list(pipeline.formats.FORMATS) == ["anthropic", "openai-chat", "openai-responses", "gemini"]
    for name in ("detect", "parse", "serialize", "get"):
        assert callable(getattr(pipeline.formats, name))
    for module in pipeline.formats.FORMATS.values():
        assert {"NAME", "detect", "parse", "serialize"} <= set(dir(module))
    assert {"chatml", "llama3", "harmony"} <= set(pipeline.render.FAMILIES)
    assert set(pipeline.render.BUILTIN_TOKENIZERS) == {"qwen2.5", "llama3", "gpt-oss"}


def test_render_and_qa_names():
    assert {"render", "load_template", "load_tokenizer", "MaskPolicy", "RenderOptions", "Rendered", "Span",
            "parse_back", "check_roundtrip", "mask_view"} <= set(pipeline.render.__all__)
    assert {"build_report", "render_html", "render_terminal", "write_html"} <= set(pipeline.qa.__all__)


def test_validation_codes_are_stable():
    assert list(pipeline.validate.RULES) == VALIDATION_CODES


def test_canonical_types():
    block_tags = {cls.__struct_config__.tag for cls in (conversation.Text, conversation.Media, conversation.ToolCall,
                                                          conversation.ToolResult, conversation.Reasoning,
                                                          conversation.Opaque)}
    assert block_tags == {"text", "media", "tool_call", "tool_result", "reasoning", "opaque"}
    assert set(conversation.Conversation.__struct_fields__) == {
        "messages", "system", "developer", "tools", "meta", "extras", "form", "original"}
    for name in ("InputError", "ShapeError", "ParseError", "ConversionError", "RenderError", "ConfigError"):
        assert issubclass(getattr(errors, name), errors.SftprepError)
