"""Langfuse exports: observations as the public API returns them (`GET /api/public/observations`: a page
`{"data": [...], "meta"}`; a trace `GET /api/public/traces/{id}` with its `observations`) and as the UI
exports them (JSON arrays or JSONL of observations). An observation (`{"id", "traceId", "type", "name",
"startTime", "model", "modelParameters", "input", "output", "usageDetails", "level", "statusMessage",
"metadata"}`) is a model call when its type is GENERATION; its `input` is what the integration logged of
the request (a list of provider messages, or a request body), its `output` the answer (a provider
message, a content-block list, or text). The conversation is the input's messages plus the answer, read
by the codec of whichever provider they are written in.

What an observation may lack: integrations log the messages but not always the tool list (then
`no_tool_list` says so), and reasoning only where the provider's message carries it."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from ... import formats
from ...conversation import Conversation
from ...errors import ParseError, SftprepError

NAME = "langfuse"
TYPES = frozenset({"GENERATION", "SPAN", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR",
                   "EMBEDDING", "GUARDRAIL"})


def is_observation(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] in TYPES and "traceId" in value
            and ("input" in value or "output" in value))


def split(value: Any) -> list[tuple[str, Any]] | None:
    """The observations of a trace or an API page, with their paths; None for anything else."""
    if not isinstance(value, dict):
        return None
    for key in ("observations", "data"):
        items = value.get(key)
        if isinstance(items, list) and items and all(is_observation(o) for o in items):
            return [(f"$.{key}[{i}]", o) for i, o in enumerate(items)]
    return None


def parse(obs: dict, *, fmt: str | None = None, strict: bool = False) -> Conversation:
    kind = obs.get("type")
    if kind != "GENERATION":
        raise ParseError(f"observation '{obs.get('name')}' has type {kind}: not a model call (GENERATION)", path="$.type",
                         code="not_a_model_call")
    if obs.get("level") == "ERROR":
        raise ParseError(f"the generation failed: {str(obs.get('statusMessage') or 'level ERROR')[:200]}",
                         path="$.level", code="failed_generation")
    body, messages = _request(obs.get("input"))
    answer = _answer(obs.get("output"))
    if not messages and answer is None:
        raise ParseError("the generation logged neither input nor output", path="$.input", code="content_not_captured")
    if "tools" not in body:
        for holder in (obs.get("metadata"), obs.get("modelParameters")):
            if isinstance(holder, dict) and isinstance(holder.get("tools"), list):
                body["tools"] = holder["tools"]
                break
    if isinstance(obs.get("model"), str) and "model" not in body:
        body["model"] = obs["model"]
    body["messages"] = messages + ([answer] if answer is not None else [])
    try:
        conv = formats.parse(body, fmt, "request", strict=strict)
    except SftprepError as exc:
        if exc.path.startswith("$.messages["):
            index = int(exc.path[len("$.messages["):].split("]", 1)[0])
            rest = exc.path.split("]", 1)[1]
            exc.path = (f"$.output{rest}" if answer is not None and index == len(messages)
                        else _input_path(obs.get("input"), index) + rest)
        raise
    usage = obs.get("usageDetails") or obs.get("usage")
    meta_usage = {}
    if isinstance(usage, dict):
        for ours, theirs in (("input_tokens", ("input", "promptTokens")), ("output_tokens", ("output", "completionTokens"))):
            value = next((usage[k] for k in theirs if isinstance(usage.get(k), int)), None)
            if value is not None:
                meta_usage[ours] = value
    meta = replace(conv.meta, shape=NAME, model=obs.get("model") or conv.meta.model,
                   created=obs.get("startTime") if isinstance(obs.get("startTime"), str) else None,
                   **({"usage": meta_usage} if meta_usage else {}))
    ids = {k: obs[k] for k in ("id", "traceId", "parentObservationId", "name", "environment", "promptName")
           if isinstance(obs.get(k), str)}
    return replace(conv, meta=meta, extras={**conv.extras, NAME: ids})


def _request(value: Any) -> tuple[dict, list]:
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        body = {k: v for k, v in value.items() if k != "messages"}
        return body, list(value["messages"])
    if isinstance(value, list):
        return {}, list(value)
    if isinstance(value, str):
        return {}, [{"role": "user", "content": value}]
    if value is None:
        return {}, []
    raise ParseError("the generation's input is neither a message list, a request body nor text", path="$.input")


def _answer(value: Any) -> dict | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {"role": "assistant", "content": value}
    if isinstance(value, list):
        return {"role": "assistant", "content": value}
    if isinstance(value, dict):
        if isinstance(value.get("choices"), list) and value["choices"]:  # a whole Chat Completions response
            choice = value["choices"][0]
            value = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(value, dict):
                raise ParseError("the output's first choice has no message", path="$.output.choices[0]")
        return {"role": "assistant", **{k: v for k, v in value.items() if k != "role"}}
    raise ParseError("the generation's output is neither a message, content blocks nor text", path="$.output")


def _input_path(value: Any, index: int) -> str:
    return f"$.input.messages[{index}]" if isinstance(value, dict) else f"$.input[{index}]"
