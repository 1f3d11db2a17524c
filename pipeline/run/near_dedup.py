"""Near-duplicates: rows whose rendered token streams are nearly the same (a task re-run, a retried call,
a timestamp that differs). Workers compute a MinHash of each row's token 5-grams; the parent, in input
order, keeps the first row of each cluster and filters the later ones as `near_duplicate_of` it, so the
decision is the same whatever the worker count or batch size. Memory: one signature (1 KiB) per kept row."""

from __future__ import annotations

import numpy as np
from datasketch import MinHash, MinHashLSH

NUM_PERM = 128
SHINGLE = 5  # tokens per shingle: short enough that one changed value changes few shingles
_SEED = 1  # fixed: signatures must agree across worker processes and reruns
SCHEME = "affine32"  # datasketch 2: 32-bit shingle hashes, affine permutations


def _identity(value):
    return value


def signature(input_ids) -> np.ndarray:
    """The MinHash of a row's distinct token 5-grams, each 5-gram folded into 32 bits."""
    ids = np.asarray(input_ids, dtype=np.uint64)
    if len(ids) < SHINGLE:
        shingles = np.array([int(ids.sum()) if len(ids) else 0], dtype=np.uint64)
    else:
        shingles = np.zeros(len(ids) - SHINGLE + 1, dtype=np.uint64)
        for k in range(SHINGLE):  # a polynomial hash of each window, wrapping in 64 bits
            shingles = shingles * np.uint64(1_000_003) + ids[k:len(ids) - SHINGLE + 1 + k]
        shingles = np.unique((shingles ^ (shingles >> np.uint64(32))) & np.uint64(0xFFFFFFFF))
    minhash = MinHash(num_perm=NUM_PERM, seed=_SEED, hashfunc=_identity, scheme=SCHEME)
    minhash.update_batch(shingles.tolist())
    return minhash.hashvalues


class NearDuplicates:
    """The rows kept so far, indexed for similarity queries (MinHash LSH)."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.index = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
        self.kept: dict[int, tuple[str, str, np.ndarray]] = {}  # order -> (row id, source, hashvalues)

    def check(self, row_id: str, source: str, hashvalues: np.ndarray) -> tuple[str, str, float] | None:
        """(kept row id, its source, estimated similarity) when the row is a near-duplicate of a kept row
        (the earliest such row), else None after keeping it."""
        minhash = MinHash(num_perm=NUM_PERM, seed=_SEED, hashvalues=hashvalues, scheme=SCHEME)
        best = None
        for order in sorted(self.index.query(minhash)):
            kept_id, kept_source, kept_values = self.kept[order]
            similarity = float(np.count_nonzero(kept_values == hashvalues)) / NUM_PERM
            if similarity >= self.threshold:
                best = (kept_id, kept_source, similarity)
                break
        if best is None:
            order = len(self.kept)
            self.kept[order] = (row_id, source, hashvalues)
            self.index.insert(order, minhash)
        return best
