"""What every part of the Gemini codec shares: its name, the camelCase and snake_case spellings of its
keys, and the error for a value of the wrong type."""

from __future__ import annotations

from typing import Any

from ...errors import ParseError
from ..base import _type_name

NAME = "gemini"

# camelCase -> snake_case for every multi-word key the codec reads or writes. The API accepts both; the
# spelling read is kept in `form["gemini"]["snake"]` (the camelCase names written in snake_case) so a
# same-format round trip is exact.
SNAKE = {
    "thoughtSignature": "thought_signature", "inlineData": "inline_data", "fileData": "file_data",
    "functionCall": "function_call", "functionResponse": "function_response",
    "executableCode": "executable_code", "codeExecutionResult": "code_execution_result",
    "toolCall": "tool_call", "toolResponse": "tool_response", "mimeType": "mime_type", "fileUri": "file_uri",
    "systemInstruction": "system_instruction", "functionDeclarations": "function_declarations",
    "parametersJsonSchema": "parameters_json_schema", "finishReason": "finish_reason",
    "usageMetadata": "usage_metadata", "modelVersion": "model_version", "responseId": "response_id",
    "createTime": "create_time", "promptFeedback": "prompt_feedback",
}
CAMEL = {snake: camel for camel, snake in SNAKE.items()}


def k(name: str, snake: Any) -> str:
    """The key to write: snake_case when the source spelled this name that way."""
    return SNAKE[name] if snake and name in snake else name


def _bad(value: Any, what: str, path: str) -> ParseError:
    return ParseError(f"{what}, got {_type_name(value)}", path=path)


def unset(obj: dict) -> tuple[dict, list[str]]:
    """The fields of a wire object that are set, and the keys given as null. JSON null is an unset field
    (the API reads JSON as protobuf does), and the SDKs' `model_dump()` writes one for every field left
    out, so `{"text": "hi", "inline_data": null}` is a text part. The keys are layout, kept in
    `form["gemini"]["nulls"]` so a same-format round trip writes them back."""
    nulls = [key for key, value in obj.items() if value is None]
    return ({key: value for key, value in obj.items() if value is not None}, nulls) if nulls else (obj, nulls)


def put_nulls(obj: dict, nulls: Any) -> dict:
    """Write back the null fields `unset` took out; `outer.inner` names one inside the object at `outer`."""
    for key in nulls or ():
        outer, _, inner = key.rpartition(".")
        target = obj.get(outer) if outer else obj
        if isinstance(target, dict):
            target.setdefault(inner, None)
    return obj
