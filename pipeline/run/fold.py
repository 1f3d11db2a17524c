"""Session folding (`[shape] sessions = "longest"`): a conversation whose messages are a prefix of another
conversation of the same session is folded into the longer one, which holds every turn it has.

Logs record an agent loop many times over: an HTTP log keeps every request, each with the history so far.
Comparison is on canonical content, message by message, without provider ids (call ids, reasoning item
ids), per-provider extras (cache_control moves from request to request) or layout: so a response logged
with its request and the next request that replays it compare equal. Each conversation gets a chain of
rolling digests (header, then one per message), so "P is a prefix of R" is one comparison.

The session: the HTTP recording, stream log or trace a record was split from (`FILE:LINE#interactions[i]`)
when it came from one, else any record with the same system prompt, developer text, tools and
first message. Only a prefix can fold, so the session key just narrows the search.

The window, in the parent, over results in input order (so decisions never depend on worker count or batch
size): rows wait as "leaves" (the longest conversations of their session seen so far). A recording's
leaves are written when the next record comes from elsewhere (its records are consecutive); any leaf is
written once `session_window` leaves are waiting, the least recently extended first, and all at the end.
A session spread across files farther apart than that window is written as one row per stretch: the
earlier row is then a prefix of a later one that was not folded. Folded records are filtered with reason
`prefix_of`, naming the source of the row that holds them, when that row is written.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections import OrderedDict
from typing import Iterator, assert_never

import msgspec
from msgspec.structs import replace

from ..conversation import Conversation, Media, Message, Opaque, Reasoning, Text, ToolCall, ToolResult
from .item import Item, drop, header_json
from .stats import Stats

_ENCODER = msgspec.json.Encoder(order="deterministic")
_NO_SLOTS: dict = {}


def chain(conv: Conversation, limit: int | None = None) -> tuple[bytes, ...]:
    """Rolling digests: [0] the header (system, developer, tools), [k] the header and messages[:k]; with
    `limit`, only as far as messages[:limit] (the session id needs the first)."""
    # One running hash, copied at each message: JSON values are self-delimiting, so the bytes hashed up
    # to message k determine messages[:k].
    running = _header_hash(conv)
    out = [running.digest()]
    for message in conv.messages[:limit]:
        running.update(_ENCODER.encode(_message(message)))
        out.append(running.copy().digest())
    return tuple(out)


def _header_hash(conv: Conversation) -> "hashlib._Hash":
    """The running hash after the header. A log's conversations share system prompt and tools: the hash
    is kept by their plain JSON (cheaper than the sorted encoding; equal bytes, equal header), the one
    the conversation column and the digest use too."""
    encoded = header_json(conv)
    running = _HEADERS.get(encoded.plain)
    if running is None:
        system = tuple(_block(b) for b in conv.system)
        developer = tuple(_block(b) for b in conv.developer)
        if (all(map(operator.is_, system, conv.system)) and all(map(operator.is_, developer, conv.developer))
                and not any(t.extras or t.form for t in conv.tools)):
            # Nothing to leave out: the header is its own projection (empty slots are omitted, as
            # defaults), whose encoding the digest made already (the same encoder's settings).
            data = b"[" + b",".join(encoded.sorted) + b"]"
        else:
            data = _ENCODER.encode((system, developer, tuple(replace(t, extras=_NO_SLOTS, form=_NO_SLOTS)
                                                             for t in conv.tools)))
        running = _HEADERS[encoded.plain] = hashlib.blake2b(data, digest_size=16)
        if len(_HEADERS) > _HEADERS_MAX:
            _HEADERS.pop(next(iter(_HEADERS)), None)
    return running.copy()


_HEADERS: dict[tuple[bytes, bytes, bytes], "hashlib._Hash"] = {}
_HEADERS_MAX = 256

_SPLIT = re.compile(r"^(.*:\d+)#[A-Za-z_]")  # FILE:LINE#interactions[3], FILE:LINE#responses[0], #resourceSpans[..]


def recording_of(source: str) -> str | None:
    """The record an HTTP recording's exchanges, a stream log's responses or a trace's spans were split
    from (the readers name them FILE:LINE#<path into it>), None for other records. A bare number after the
    `#` is an array element or one of several records on a line: separate conversations, no session."""
    match = _SPLIT.match(source)
    return match[1] if match else None


def session_id(source: str, links: tuple[bytes, ...]) -> str:
    """The session a conversation belongs to: its recording, or none, plus its header and first message."""
    scope = recording_of(source) or ""
    h = hashlib.blake2b(scope.encode("utf-8", "surrogatepass"), digest_size=12)
    h.update(links[min(1, len(links) - 1)])
    return h.hexdigest()


def _message(message: Message) -> Message:
    # An empty text part (a replayed turn that had only calls gets one) renders as nothing; provider
    # items (hosted tool traffic) never render and are not always replayed.
    blocks = []
    same = not message.extras and not message.form
    for b in message.blocks:
        if isinstance(b, Opaque) or (isinstance(b, Text) and not b.text and not b.signature):
            same = False
            continue
        kept = _block(b)
        same = same and kept is b
        blocks.append(kept)
    # Nothing to leave out (a user or assistant text turn): the message itself encodes the same.
    return message if same else replace(message, blocks=tuple(blocks), extras=_NO_SLOTS, form=_NO_SLOTS)


def _block(block):
    """What a training row can hold of a block. Opaque state (signatures, encrypted and redacted reasoning,
    item ids) and provider items' payloads never render, and providers re-encode them on replay (seen in
    logged loops: another base64 alphabet, camelCase keys turned snake_case, nulls written out, encrypted
    reasoning issued anew), so they do not take part; the kept row holds its own."""
    kind = type(block)  # the common blocks first, without the pattern match
    if kind is Text:
        return block if not (block.extras or block.form or block.signature) else _plain_block(block)
    if kind is ToolResult:
        content = block.content
        kept = [_block(c) for c in content]
        if all(k is c for k, c in zip(kept, content)):
            kept = content
        return replace(block, provider_id=None, matched_by=None, extras=_NO_SLOTS, form=_NO_SLOTS,
                       signature=None, content=tuple(kept))
    match block:
        case Text() | Media():
            if not (block.extras or block.form or block.signature):
                return block
            return _plain_block(block)
        case ToolCall():  # parsed arguments are the content; their string is layout (spacing, key order)
            return replace(block, provider_id=None, extras=_NO_SLOTS, form=_NO_SLOTS, signature=None,
                           raw_arguments=None if block.arguments_valid else block.raw_arguments)
        case ToolResult():
            return replace(block, provider_id=None, matched_by=None, extras=_NO_SLOTS, form=_NO_SLOTS,
                           signature=None, content=tuple(_block(c) for c in block.content))
        case Reasoning():
            return replace(block, signature=None, redacted=None, encrypted=None, item_id=None, origin=None,
                           extras=_NO_SLOTS, form=_NO_SLOTS)
        case Opaque():  # left out by _message
            return block
        case _:
            assert_never(block)


def _plain_block(block: Text | Media) -> Text | Media:
    return replace(block, extras=_NO_SLOTS, form=_NO_SLOTS, signature=None)


class _Leaf:
    __slots__ = ("item", "seq", "scope", "absorbed")

    def __init__(self, item: Item, seq: int, scope: str | None):
        self.item, self.seq, self.scope = item, seq, scope
        self.absorbed: list[Item] = []  # folded into this row, waiting for it to be written

    def holds(self, other: tuple[bytes, ...]) -> bool:
        """`other` is a prefix of this leaf's conversation (or equal to it)."""
        mine = self.item.chain
        return len(other) <= len(mine) and mine[len(other) - 1] == other[-1]


class Folder:
    """Items in input order in, items ready to finish (written, or filtered as `prefix_of`) out."""

    def __init__(self, mode: str, window: int, stats: Stats):
        self.enabled = mode == "longest"
        self.window = window
        self.stats = stats
        self.buckets: dict[str, list[_Leaf]] = {}
        self.leaves: OrderedDict[int, _Leaf] = OrderedDict()  # by seq, least recently extended first
        self.recording: str | None = None
        self.seq = 0

    def push(self, item: Item) -> Iterator[Item]:
        scope = recording_of(item.source)
        if self.recording is not None and scope != self.recording:
            yield from self._flush([leaf for leaf in self.leaves.values() if leaf.scope == self.recording])
        self.recording = scope
        if item.outcome is not None:
            yield item
            return
        self.stats.stages["fold"].seen += 1
        if not self.enabled or not item.chain:
            yield from self._emit(_Leaf(item, self.seq, scope))
            return
        self.seq += 1
        bucket = self.buckets.setdefault(item.session, [])
        for leaf in bucket:
            if leaf.holds(item.chain):  # a prefix of (or equal to) a waiting row
                leaf.absorbed.append(_spent(item))
                self.leaves.move_to_end(leaf.seq)
                return
        new = _Leaf(item, self.seq, scope)
        for leaf in [leaf for leaf in bucket if new.holds(leaf.item.chain)]:  # waiting rows it extends
            bucket.remove(leaf)
            del self.leaves[leaf.seq]
            new.absorbed += leaf.absorbed + [_spent(leaf.item)]
        bucket.append(new)
        self.leaves[new.seq] = new
        while len(self.leaves) > self.window:
            yield from self._flush([next(iter(self.leaves.values()))])

    def close(self) -> Iterator[Item]:
        yield from self._flush(list(self.leaves.values()))

    def _flush(self, leaves: list[_Leaf]) -> Iterator[Item]:
        for leaf in sorted(leaves, key=lambda leaf: leaf.seq):
            del self.leaves[leaf.seq]
            bucket = self.buckets[leaf.item.session]
            bucket.remove(leaf)
            if not bucket:
                del self.buckets[leaf.item.session]
            yield from self._emit(leaf)

    def _emit(self, leaf: _Leaf) -> Iterator[Item]:
        keeper = leaf.item
        for row in [*(keeper.windows or [keeper.rendered]), *keeper.extra_rows]:
            row["session"], row["folded"] = keeper.session, len(leaf.absorbed)
        counts = self.stats.stages["fold"]
        counts.passed += 1
        yield keeper
        for folded in leaf.absorbed:
            counts.filtered["prefix_of"] += 1
            yield drop(folded, "fold", "prefix_of", f"a prefix of {keeper.source}, written in its place",
                       detail={"keeper": keeper.source})


def _spent(item: Item) -> Item:
    """A folded item keeps only what its filtered outcome needs: its rows are not written."""
    item.rendered = item.windows = None
    item.extra_rows = []
    item.chain = ()
    return item
