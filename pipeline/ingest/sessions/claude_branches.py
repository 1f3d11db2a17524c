"""Which message lines of a Claude Code session lie on abandoned branches.

A session file is a tree, not a list: every line names its parent (`parentUuid`; a compaction boundary
`logicalParentUuid`). Rewinding to an earlier prompt, or a turn retried after an interruption, starts a
new branch from an earlier line and leaves the old one in the file. The conversation is the live branch:
the ancestors of the last message line. Off that chain but still live are the lines Claude Code writes
beside it: the other content blocks of an assistant message it split over lines (same `message.id`), and
the results of those blocks' calls.

A line is abandoned only when its ancestors meet the live chain through a message line that is neither on
it nor beside it (a user prompt or an assistant message the conversation did not keep). Everything else is
kept: lines joined to the chain through progress or hook events, and lines whose ancestry breaks off (a
parent not in the file, a cycle, a repeated uuid), where the tree cannot say which branch is live.
"""

from __future__ import annotations

from typing import Any

Graph = dict[str, "str | None"]  # uuid -> the uuid of its parent (None at a root)


def parent_of(event: dict) -> str | None:
    parent = event.get("parentUuid")
    if not isinstance(parent, str):
        parent = event.get("logicalParentUuid")  # a compaction boundary points back across the summary
    return parent if isinstance(parent, str) else None


def abandoned(messages: list[dict], graph: Graph, repeated: bool) -> list[int]:
    """Indexes into `messages` (the message events of one side, in file order) of those on abandoned
    branches; `graph` holds every line's uuid and parent, `repeated` whether a uuid came twice."""
    uuids = [m.get("uuid") for m in messages]
    if not messages or repeated or not all(isinstance(u, str) for u in uuids):
        return []
    chain: set[str] = set()
    node: str | None = uuids[-1]
    while node is not None:
        if node in chain or node not in graph:
            return []  # a cycle or a parent outside the file: no way to tell the live branch
        chain.add(node)
        node = graph[node]
    kept_ids = {_message_id(m) for m in messages if m.get("type") == "assistant" and m["uuid"] in chain}
    kept_ids.discard(None)
    beside: set[str] = set()
    calls: set[str] = set()
    for m in messages:
        if m.get("type") == "assistant" and (m["uuid"] in chain or _message_id(m) in kept_ids):
            beside.add(m["uuid"])
            calls.update(b["id"] for b in _blocks(m) if b.get("type") == "tool_use" and isinstance(b.get("id"), str))
    for m in messages:
        if m.get("type") == "user" and any(b.get("type") == "tool_result" and b.get("tool_use_id") in calls
                                           for b in _blocks(m)):
            beside.add(m["uuid"])
    by_uuid = {m["uuid"]: m for m in messages}
    verdicts: dict[str, bool] = {}
    return [i for i, u in enumerate(uuids)
            if u not in chain and u not in beside and _left(u, graph, chain, beside, by_uuid, verdicts)]


def _left(uuid: str, graph: Graph, chain: set[str], beside: set[str], by_uuid: dict[str, dict],
          verdicts: dict[str, bool]) -> bool:
    """Whether the branch holding `uuid` left the live chain at a message line (memoized per line)."""
    path: list[str] = []
    walked: set[str] = set()
    node: str | None = uuid
    verdict = False
    while node is not None and node not in verdicts:
        if node in walked:
            break  # a cycle: keep
        path.append(node)
        walked.add(node)
        parent = graph.get(node)
        if parent in chain:
            verdict = node in by_uuid and node not in beside  # the first line off the chain
            break
        if parent is None or parent not in graph:
            break  # another root or a parent outside the file: keep
        node = parent
    else:
        verdict = verdicts.get(node, False) if node is not None else False
    for step in path:
        verdicts[step] = verdict
    return verdict


def _message_id(event: dict) -> Any:
    message = event.get("message")
    return message.get("id") if isinstance(message, dict) and isinstance(message.get("id"), str) else None


def _blocks(event: dict) -> list[dict]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
