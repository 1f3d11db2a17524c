"""Agent session logs: one file (or subagent file) of an agent's events is one conversation, or one per
window where the agent compacted its history. Claude Code's reader is wired in ingest.shapes; the
others register here: a detector, a reader of records and the conversation of a record."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

from ...conversation import Conversation
from ..readers import RawRecord
from . import codex, gemini_cli, hf_sts, inspect_ai


class Source(NamedTuple):
    name: str  # the shape name (`--shape`)
    detect: Callable[[str | Path], bool]
    read: Callable[[str | Path, int], Iterator[RawRecord]]
    record_type: type
    to_conversation: Callable[..., Conversation]


SOURCES: tuple[Source, ...] = (
    Source(codex.NAME, codex.detect, codex.read_rollout, codex.CodexWindow, codex.to_conversation),
    Source(gemini_cli.NAME, gemini_cli.detect, gemini_cli.read_recording, gemini_cli.Recording,
           gemini_cli.to_conversation),
    Source(hf_sts.NAME, hf_sts.detect, hf_sts.read_session, hf_sts.StsSession, hf_sts.to_conversation),
    Source(inspect_ai.NAME, inspect_ai.detect, inspect_ai.read_log, inspect_ai.InspectSample,
           inspect_ai.to_conversation),
)
SHAPES = tuple(s.name for s in SOURCES)


def source_for(path: str | Path, shape: str | None) -> Source | None:
    """The session source that reads this file: the one `shape` names, else the one that detects it."""
    for source in SOURCES:
        if shape == source.name or (shape is None and source.detect(path)):
            return source
    return None


def record_source(value: Any) -> Source | None:
    for source in SOURCES:
        if isinstance(value, source.record_type):
            return source
    return None
