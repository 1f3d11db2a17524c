"""Segment encoding, the way the renderer tokenizes: text split at added tokens, each piece encoded on its
own (identical ids to encoding the whole text), with a bounded LRU of repeated pieces.
"""

from __future__ import annotations

import re
import struct
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from functools import reduce
from itertools import accumulate, compress
from operator import iadd, itemgetter, not_, sub
from typing import Any, Iterable, NamedTuple, Protocol, Sequence

import numpy as np
import tokenizers as hf_tokenizers

from .fast_tokenizer import choose_backend, hf_encode

__all__ = ["SegmentEncoder", "Segmented"]

_INT32 = "i" if array("i").itemsize == 4 else "l"
_INT32_NP = np.dtype(np.int32)  # native order, as array(_INT32) stores
_ZERO = array(_INT32, [0])
# The fields of a piece as the encoder keeps it: an encoding (ids, token starts, token ends, ids as
# bytes) and the (starts, ends) pair Segmented.offsets holds (None for an added token), made once per piece.
_IDS, _STARTS, _ENDS, _BUFFER, _OFFSETS = map(itemgetter, range(5))
_START, _END = itemgetter(0), itemgetter(1)  # of a (start, end, token) piece


_Part = tuple[list[int], array, array, bytes, "tuple[array, array] | None"]


class Segmented(NamedTuple):
    """Token ids of a text and what is needed to map character positions to tokens without a
    per-token table: per segment its first character and first token, and token offsets inside it."""

    ids: list[int]
    char_starts: list[int]  # first character of each segment
    token_starts: list[int]  # first token of each segment
    offsets: list[tuple[Sequence[int], Sequence[int]] | None]  # per segment (starts, ends), relative; None = one added token
    lengths: list[int]  # characters per segment
    buffer: bytes = b""  # the ids as little-endian int32 (what writers store), joined from cached pieces
    # Each token's start and end within its segment, as native int32, for `index`.
    relative_starts: bytes = b""
    relative_ends: bytes = b""
    # Answers computed in bulk by `index`, for the positions a render asks about: pos -> token.
    starting: dict[int, int] | None = None
    ending: dict[int, int] | None = None

    def index(self, positions: Iterable[int]) -> None:
        """Answer `first_token_starting_at` and `first_token_ending_after` for these positions in one
        vectorized pass (the methods then look them up). Over the whole text, the tokens' absolute
        starts and ends are sorted, so: tokens starting at or after pos = count of starts below pos;
        first ending after pos = count of ends at or below pos."""
        if self.starting is None or self.ending is None or not self.ids:
            return
        # Array methods, not np.diff/np.repeat/np.searchsorted: equal results without their Python dispatch.
        firsts = np.array([*self.token_starts, len(self.ids)], dtype=np.int64)
        base = np.array(self.char_starts, dtype=np.int64).repeat(firsts[1:] - firsts[:-1])
        starts = np.frombuffer(self.relative_starts, dtype=_INT32_NP) + base
        ends = np.frombuffer(self.relative_ends, dtype=_INT32_NP) + base
        keys = list(positions)  # repeats and any order: searchsorted answers each, the dicts keep one
        wanted = np.array(keys, dtype=np.int64)
        self.starting.update(zip(keys, starts.searchsorted(wanted, "left").tolist()))
        self.ending.update(zip(keys, ends.searchsorted(wanted, "right").tolist()))

    def first_token_ending_after(self, pos: int) -> int:
        """Index of the first token whose characters end after `pos` (the token holding char `pos`)."""
        if self.ending:
            found = self.ending.get(pos)
            if found is not None:
                return found
        seg = bisect_right(self.char_starts, pos) - 1
        if seg < 0:
            return 0
        table = self.offsets[seg]
        rel = pos - self.char_starts[seg]
        if table is None:
            return self.token_starts[seg] + (0 if rel < self.lengths[seg] else 1)
        return self.token_starts[seg] + bisect_right(table[1], rel)

    def first_token_starting_at(self, pos: int) -> int:
        """Index of the first token that starts at or after `pos`."""
        if self.starting:
            found = self.starting.get(pos)
            if found is not None:
                return found
        seg = bisect_right(self.char_starts, pos) - 1
        if seg < 0:
            return 0
        table = self.offsets[seg]
        rel = pos - self.char_starts[seg]
        if table is None:
            return self.token_starts[seg] + (0 if rel <= 0 else 1)
        return self.token_starts[seg] + bisect_left(table[0], rel)

    def overlapping(self, start: int, end: int) -> tuple[int, int]:
        """Token range [a, b) of every token sharing a character with [start, end)."""
        if end <= start:
            a = self.first_token_starting_at(start)
            return a, a
        # The indexed answers straight from the tables (what the methods would return), else the methods.
        a = self.ending.get(start) if self.ending else None
        b = self.starting.get(end) if self.starting else None
        return (self.first_token_ending_after(start) if a is None else a,
                self.first_token_starting_at(end) if b is None else b)

    def inside(self, start: int, end: int) -> tuple[int, int]:
        """Token range [a, b) of the tokens lying wholly within [start, end)."""
        a = self.starting.get(start) if self.starting else None
        b = self.ending.get(end) if self.ending else None  # tokens before it end at or before `end`
        if a is None:
            a = self.first_token_starting_at(start)
        if b is None:
            b = self.first_token_ending_after(end)
        return a, max(a, b)


class _Tokenizer(Protocol):
    """What the encoder reads of the tokenizer it serves (`tokenizers.Tokenizer`, not imported here:
    that class builds its encoder from this module)."""

    @property
    def backend(self) -> hf_tokenizers.Tokenizer: ...

    @property
    def added_tokens(self) -> dict[str, int]: ...

    @property
    def segmentable(self) -> bool: ...


class SegmentEncoder:
    """Encodes text as the concatenation of independently encoded segments: every added token is its
    own segment, and the text between two added tokens is tokenized alone. Pieces that repeat across a
    dataset (system prompts, tool definitions) are served from an LRU keyed by their text, bounded both
    in entries (`cache_size`) and in tokens (`cache_tokens`, about 50 bytes each), so its memory stays
    flat whatever the input."""

    def __init__(self, tokenizer: _Tokenizer, cache_size: int = 4096, cache_tokens: int = 1_000_000):
        self.tokenizer = tokenizer
        self.cache_size = cache_size
        self.cache_tokens = cache_tokens
        self.hits = 0
        self.misses = 0
        # piece -> (ids, token starts, token ends, ids as int32 bytes); offsets relative to the piece
        self._cache: OrderedDict[str, _Part] = OrderedDict()
        self._cached_tokens = 0
        self._lock = threading.Lock()
        added = sorted(tokenizer.added_tokens, key=len, reverse=True)  # longest first = leftmost-longest
        self._split = re.compile("(" + "|".join(re.escape(t) for t in added) + ")") if added else None
        self._segmentable = tokenizer.segmentable
        self._token_bytes = {token_id: struct.pack("<i", token_id) for token_id in tokenizer.added_tokens.values()}
        self._token_parts: dict[tuple[int, int], _Part] = {}  # see encode
        self.fast = None  # a FastEncoder once `use_backend` chose one; None: HF tokenizers
        self.backend_note = "HF tokenizers"
        self._backend_choice: tuple[str, int] = ("hf", 0)

    def use_backend(self, backend: str = "auto", check_every: int = 100) -> str:
        """Encode pieces with a fast engine where it gives HF's ids (`fast_tokenizer.choose_backend`):
        "auto", "hf" or an engine's name. Returns a sentence saying what was chosen and why. Choosing
        again with the same settings keeps the choice (a forked worker inherits its parent's)."""
        if (backend, check_every) != self._backend_choice:
            self.fast, self.backend_note = choose_backend(self.tokenizer, backend, check_every)
            self._backend_choice = (backend, check_every)
        return self.backend_note

    def split(self, text: str) -> list[tuple[int, int, int | None]]:
        """(start, end, id) pieces: id is the added token's id, or None for text between them."""
        return self.split_texts(text)[0]

    def split_texts(self, text: str) -> tuple[list[tuple[int, int, int | None]], list[str]]:
        """`split`, and the text of each piece between added tokens (what `encode` encodes), in order:
        the split makes those strings anyway, so `encode` need not slice them again."""
        if self._split is None or not self._segmentable:
            return ([(0, len(text), None)], [text]) if text else ([], [])
        added = self.tokenizer.added_tokens
        pieces: list[tuple[int, int, int | None]] = []
        texts: list[str] = []
        # The pattern captures: split() alternates text between tokens and the tokens themselves.
        parts = self._split.split(text)
        pos = 0
        for between, token in zip(parts[0::2], parts[1::2]):
            if between:
                end = pos + len(between)
                pieces.append((pos, end, None))
                texts.append(between)
                pos = end
            end = pos + len(token)
            pieces.append((pos, end, added[token]))
            pos = end
        if parts[-1]:
            pieces.append((pos, len(text), None))
            texts.append(parts[-1])
        return pieces, texts

    def encode(self, text: str, pieces: list[tuple[int, int, int | None]] | None = None,
               texts: list[str] | None = None) -> Segmented:
        """`texts`: the pieces' texts between added tokens, as `split_texts` gives them (else sliced here)."""
        if pieces is None:
            pieces, texts = self.split_texts(text)
        elif texts is None:
            texts = [text[a:b] for a, b, token in pieces if token is None]
        encoded = iter(self._encode_texts(texts))
        token_parts = self._token_parts
        # per piece: its _Part; an added token's is built once
        parts = [next(encoded) if token is None else (token_parts.get((token, end - start))
                                                      or self._token_part(token, end - start))
                 for start, end, token in pieces]
        id_lists = list(map(_IDS, parts))
        token_starts = list(accumulate(map(len, id_lists), initial=0))
        token_starts.pop()
        # `+=` extends one new list in C, piece by piece; chaining the ids yields one at a time (5x slower)
        ids: list[int] = reduce(iadd, id_lists, [])
        return Segmented(ids, list(map(_START, pieces)), token_starts, list(map(_OFFSETS, parts)),
                         list(map(sub, map(_END, pieces), map(_START, pieces))), b"".join(map(_BUFFER, parts)),
                         b"".join(map(_STARTS, parts)), b"".join(map(_ENDS, parts)), {}, {})

    def _token_part(self, token: int, length: int) -> _Part:
        part = ([token], _ZERO, array(_INT32, [length]), self._token_bytes[token], None)
        self._token_parts[(token, length)] = part
        return part

    def _encode_texts(self, texts: list[str]):
        with self._lock:
            cache = self._cache
            out: list[Any] = list(map(cache.get, texts))
            misses = out.count(None)
            # Lookups first, then the hits refreshed in their order (in C): the LRU ends as if each
            # piece were looked up and refreshed in turn (a refresh removes nothing, and nothing is
            # evicted before the misses are stored).
            deque(map(cache.move_to_end, compress(texts, out) if misses else texts), maxlen=0)
            self.hits += len(texts) - misses
            if not misses:  # all hits (the usual case on repeated data)
                return out
            missing = list(dict.fromkeys(compress(texts, map(not_, out))))  # each missed text once, first seen first
            self.misses += len(missing)
        encoded = [(*value, (value[1], value[2])) for value in
                   (self.fast.encode(missing) if self.fast is not None else hf_encode(self.tokenizer.backend, missing))]
        with self._lock:
            cache, budget, added = self._cache, self.cache_tokens, 0
            for piece, value in zip(missing, encoded):
                if self.cache_size and 0 < len(value[0]) <= budget and piece not in cache:
                    cache[piece] = value
                    added += len(value[0])
            # One eviction after the batch evicts what one after each store would: both pop the
            # oldest entries until the bounds hold, and bounds that hold over a window of the LRU
            # hold over each shorter window with the same first entry.
            self._cached_tokens += added
            self._evict()
        found = dict(zip(missing, encoded)).get
        return [hit or found(piece) for piece, hit in zip(texts, out)]

    def limit(self, tokens: int) -> None:
        """Hold at most this many tokens from now on (0: cache nothing)."""
        with self._lock:
            self.cache_tokens = tokens
            self._evict()

    def _evict(self) -> None:
        while len(self._cache) > self.cache_size or self._cached_tokens > self.cache_tokens:
            self._cached_tokens -= len(self._cache.popitem(last=False)[1][0])

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "entries": len(self._cache), "tokens": self._cached_tokens}
