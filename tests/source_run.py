"""Run `sftprep run` (the CLI entry) on one input and read back what it wrote: the conversations of the
written rows, the rejects and the stats. Shared by the log-source tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from pipeline.cli.main import main


class Run(NamedTuple):
    rows: list[dict]  # written rows, each with its `conversation` decoded
    rejects: list[dict]
    stats: dict


def sftprep_run(tmp_path: Path, *inputs: Path, flags: tuple[str, ...] = (), fold: bool = False) -> Run:
    """Every record a row unless `fold`: these tests check what each reader gives, and session folding
    (tested in tests/run) would keep only the longest span of a trace or request of a batch."""
    out = tmp_path / "out"
    tmp_path.mkdir(parents=True, exist_ok=True)
    job = tmp_path / "job.toml"
    job.write_text(f'[shape]\nsessions = "{"longest" if fold else "all"}"\n')
    args = ["run", str(job), "--output", str(out), "--format", "jsonl", "--workers", "1", "--quiet"]
    for path in inputs:
        args += ["--input", str(path)]
    assert main([*args, *flags]) == 0
    rows = [json.loads(line) for shard in sorted(out.glob("data-*.jsonl")) for line in shard.read_text().splitlines()]
    for row in rows:
        row["conversation"] = json.loads(row["conversation"])
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    stats = json.loads((out / "stats.json").read_text())
    records = stats["records"]
    assert records["read"] == records["written"] + records["rejected"] + records["filtered"]
    return Run(rows, rejects, stats)


def blocks(message: dict) -> list[tuple]:
    """A message's blocks, each as (type, the fields a test names) for compact expectations."""
    out = []
    for block in message.get("blocks", []):
        kind = block["type"]
        if kind == "text":
            out.append(("text", block["text"]))
        elif kind == "tool_call":
            out.append(("tool_call", block["name"], block.get("arguments"), block.get("provider_id")))
        elif kind == "tool_result":
            content = [c.get("text") for c in block.get("content", [])] if "content" in block else block.get("output")
            out.append(("tool_result", block.get("provider_id"), content, block.get("is_error", False)))
        elif kind == "reasoning":
            out.append(("reasoning", block.get("text"), tuple(block.get("summary", ()))))
        elif kind == "media":
            out.append(("media", block["kind"], block.get("url") or block.get("data") or block.get("file_id")))
        else:
            out.append((kind, block.get("item_type")))
    return out


def paired(conv: dict) -> bool:
    """Every result names the canonical id of an earlier call."""
    seen = set()
    for message in conv["messages"]:
        for block in message.get("blocks", []):
            if block["type"] == "tool_call":
                seen.add(block["id"])
            elif block["type"] == "tool_result" and block.get("call_id") not in seen:
                return False
    return True
