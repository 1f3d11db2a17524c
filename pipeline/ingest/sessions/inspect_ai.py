"""inspect_ai eval logs (UKGovernmentBEIS/inspect_ai, `inspect_ai.log`): the zipped `.eval` format
(`header.json`, one `samples/<id>_epoch_<n>.json` per sample) and the older single `.json` log
(`{"version", "status", "eval", ..., "samples": [...]}`). Every sample is one record: its `messages`
(ChatMessage: role, content as text or parts `text` / `reasoning` / `image` / `audio` / `video`,
`tool_calls` with `arguments` as an object, `tool_call_id`, `error`) with the tools of its last `model`
event. Large strings are stored once in the sample's `attachments` and referenced as
`attachment://<hash>`: they are resolved here. A `.eval` file is read one sample entry at a time; a
`.json` log is one document (bounded by the record size limit).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from ... import jsonpolicy
from ...conversation import Conversation, Message, Meta, Reasoning, Text
from ...errors import InputError, ParseError
from ..blocks import Calls, media
from ..readers import RawRecord, open_bytes
from ..traces.otel_genai import tool_list

NAME = "inspect-ai"
_ATTACHMENT = "attachment://"


@dataclass
class InspectSample:
    source: str
    sample: dict
    header: dict = field(default_factory=dict)  # the eval's task, model, run ids


def detect(path: str | Path) -> bool:
    name = str(path)
    try:
        with open_bytes(path) as stream:
            head = stream.read(4096)
    except OSError:
        return False
    if name.endswith(".eval"):
        return head[:2] == b"PK"
    if name.endswith((".json", ".json.gz")):
        compact = b"".join(head.split())
        return compact.startswith(b"{") and b'"eval":{' in compact and b'"version":' in compact and b'"status":' in compact
    return False


def read_log(path: str | Path, limit: int) -> Iterator[RawRecord]:
    if str(path).endswith(".eval"):
        yield from _zipped(path, limit)
    else:
        yield from _document(path, limit)


def _zipped(path: str | Path, limit: int) -> Iterator[RawRecord]:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        yield RawRecord(f"{path}:1", None, InputError(f"not a readable .eval archive: {exc}", source=f"{path}:1",
                                                      code="unreadable_file"))
        return
    with archive:
        names = archive.namelist()
        header = _header(_load(archive, "header.json", limit)) if "header.json" in names else {}
        for name in sorted(n for n in names if n.startswith("samples/") and n.endswith(".json")):
            source = f"{path}:1#{name}"
            try:
                sample = _load(archive, name, limit)
            except InputError as exc:
                yield RawRecord(source, None, exc.at(source))
                continue
            yield RawRecord(source, InspectSample(source, sample, header) if isinstance(sample, dict) else sample)


def _load(archive: zipfile.ZipFile, name: str, limit: int) -> Any:
    info = archive.getinfo(name)
    if info.file_size > limit:
        raise InputError(f"{name} is {info.file_size:,} bytes, over the limit of {limit:,}", code="record_too_large")
    try:
        return jsonpolicy.loads(archive.read(name))
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{name} is not valid JSON: {exc}", code="invalid_json") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"cannot read {name}: {exc}", code="unreadable_file") from None


def _document(path: str | Path, limit: int) -> Iterator[RawRecord]:
    source = f"{path}:1"
    with open_bytes(path) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        yield RawRecord(source, None, InputError(f"log is over the limit of {limit:,} bytes (the .eval format is "
                                                 "read sample by sample)", source=source, code="record_too_large"))
        return
    try:
        log = jsonpolicy.loads(data)
    except orjson.JSONDecodeError as exc:
        yield RawRecord(source, None, InputError(f"invalid JSON: {exc}", source=source, code="invalid_json"))
        return
    header = _header(log)
    samples = log.get("samples") if isinstance(log, dict) else None
    if not isinstance(samples, list) or not samples:
        yield RawRecord(source, None, InputError("the log holds no samples (written with --no-log-samples?)",
                                                 source=source, code="content_not_captured"))
        return
    for i, sample in enumerate(samples):
        where = f"{source}#samples[{i}]"
        yield RawRecord(where, InspectSample(where, sample, header) if isinstance(sample, dict) else sample)


def _header(log: Any) -> dict:
    spec = log.get("eval") if isinstance(log, dict) and isinstance(log.get("eval"), dict) else {}
    return {k: spec[k] for k in ("task", "model", "eval_id", "run_id", "created") if isinstance(spec.get(k), str)}


def to_conversation(record: InspectSample, *, strict: bool = False) -> Conversation:
    sample = _resolved(record.sample, record.sample.get("attachments") or {}, "$")
    if sample.get("error"):
        error = sample["error"]
        text = error.get("message") if isinstance(error, dict) else error
        raise ParseError(f"the sample failed: {str(text)[:200]}", path="$.error", code="failed_sample")
    history = sample.get("messages")
    if not isinstance(history, list):
        raise ParseError("a sample needs 'messages'", path="$.messages")
    calls = Calls()
    system: list = []
    messages: list[Message] = []
    for i, item in enumerate(history):
        path = f"$.messages[{i}]"
        if not isinstance(item, dict) or item.get("role") not in ("system", "user", "assistant", "tool"):
            raise ParseError("a message needs a role: system, user, assistant or tool", path=path)
        role = item["role"]
        blocks = list(_content(item.get("content"), f"{path}.content"))
        if role == "system" and not messages:
            system.extend(b for b in blocks if isinstance(b, Text))
        elif role == "tool":
            call_id = item.get("tool_call_id") if isinstance(item.get("tool_call_id"), str) else None
            error = item.get("error")
            if isinstance(error, dict) and not blocks and isinstance(error.get("message"), str):
                blocks = [Text(error["message"])]
            messages.append(Message("tool", (calls.result(call_id, blocks, is_error=bool(error), name=item.get("function")),)))
        else:
            for j, call in enumerate(item.get("tool_calls") or [] if role == "assistant" else []):
                if not isinstance(call, dict) or not isinstance(call.get("function"), str):
                    raise ParseError("a tool call needs 'function' (the tool's name)", path=f"{path}.tool_calls[{j}]")
                blocks.append(calls.call(call["function"], call.get("arguments"),
                                         call.get("id") if isinstance(call.get("id"), str) else None))
            messages.append(Message(role, tuple(blocks)))
    tools = ()
    for event in reversed(sample.get("events") or []):
        if isinstance(event, dict) and event.get("event") == "model" and isinstance(event.get("tools"), list):
            tools = tool_list(event["tools"], "$.events[model].tools")
            break
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    model = output.get("model") or record.header.get("model")
    keep = {"id": sample.get("id"), "epoch": sample.get("epoch"), "target": sample.get("target"), **record.header}
    return Conversation(messages=tuple(messages), system=tuple(system), tools=tools, meta=Meta(
        source=record.source, provider=NAME, shape=NAME, model=model if isinstance(model, str) else None,
        created=record.header.get("created"),
        notes=() if tools else ("the sample has no model event with its tools (logged without events?)",)),
        extras={NAME: {k: v for k, v in keep.items() if v is not None}})


def _resolved(value: Any, attachments: dict, path: str) -> Any:
    if isinstance(value, str) and value.startswith(_ATTACHMENT):
        key = value[len(_ATTACHMENT):]
        if key not in attachments:
            raise ParseError(f"{value} is not among the sample's attachments", path=path, code="attachment_missing")
        return attachments[key]
    if isinstance(value, dict):
        return {k: (v if k == "attachments" else _resolved(v, attachments, f"{path}.{k}")) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v, attachments, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _content(value: Any, path: str) -> Iterator:
    if value is None or value == "":
        return
    if isinstance(value, str):
        yield Text(value)
        return
    if not isinstance(value, list):
        raise ParseError("content must be text or a list of parts", path=path)
    for k, part in enumerate(value):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            yield Text(str(part.get("text", "")))
        elif kind == "reasoning":
            redacted = part.get("redacted") is True
            yield Reasoning(text=None if redacted else part.get("reasoning"), signature=part.get("signature"),
                            redacted=part.get("reasoning") if redacted else None,
                            summary=(part["summary"],) if isinstance(part.get("summary"), str) else ())
        elif kind in ("image", "audio", "video"):
            ref = part.get(kind)
            if isinstance(ref, str) and ref.startswith("data:") and ";base64," in ref:
                mime, data = ref[5:].split(";base64,", 1)
                yield media(kind, mime, data=data)
            else:
                yield media(kind, f"{kind}/{part['format']}" if isinstance(part.get("format"), str) else None, url=ref)
        else:
            raise ParseError(f"unknown content part type {kind!r}", path=f"{path}[{k}]")
