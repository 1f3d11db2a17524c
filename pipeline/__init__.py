"""sftprep: logged LLM conversations with tool calls, turned into fine-tuning data without losing
the structure of a single tool call."""

__version__ = "0.1.0"
