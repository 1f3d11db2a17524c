"""The report's sessions section: folded prefixes per source, branches per session, windows per
conversation, trained tokens per row (a log-scale histogram where the range is wide), rows with no user
turn or training fewer than LOW_TRAINED tokens (with examples), and where the tokens go by role.

Everything comes from the run's columns (`session`, `folded`, `window`, `windows`, `role_tokens`) and
stats.json (the fold stage, the window tallies); rows from runs that wrote no such columns count as one
conversation each, unfolded and unwindowed."""

from __future__ import annotations

import polars as pl

from ..run.writers import ROLE_KEYS
from . import report as r
from .figures import token_bins
from .session_parts import LOW_TRAINED

TOP_SOURCES = 15

BRANCH_BINS = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 9), (10, None))
WINDOW_BINS = ((2, 2), (3, 4), (5, 9), (10, 19), (20, 49), (50, None))


def sessions(rows: pl.DataFrame, flags: pl.DataFrame, stats: dict | None, config: dict | None) -> r.Sessions:
    stages = (stats or {}).get("stages") or {}
    fold = stages.get("fold")
    tally = ((stats or {}).get("tallies") or {}).get("window") or {}
    firsts = rows.filter(pl.col("window") == 0)  # one line per conversation
    per_session = (firsts.filter(pl.col("session") != "").group_by("session").agg(n=pl.len())["n"])
    windowed = firsts.filter(pl.col("windows") > 1)["windows"]
    by_source = (rows.filter(pl.col("window") == 0).group_by("file")
                 .agg(rows=pl.len(), folded=pl.col("folded").sum())
                 .filter(pl.col("folded") > 0).sort(["folded", "file"], descending=[True, False]).head(TOP_SOURCES))
    trained = rows["num_trained_tokens"]
    histogram, log = trained_bins(trained)
    total = sum(int(rows[k].sum() or 0) for k in ROLE_KEYS)
    roles = [r.RoleShare(k, int(rows[k].sum() or 0), (int(rows[k].sum() or 0) / total) if total else None)
             for k in ROLE_KEYS]
    shape = (config or {}).get("shape") or {}
    return r.Sessions(
        mode=shape.get("sessions"), long=shape.get("long"),
        folded=fold.get("filtered", {}).get("prefix_of", 0) if fold is not None else None,
        folded_in_rows=int(rows["folded"].sum() or 0),
        folded_by_source=[r.FoldedSource(f, int(n), int(k)) for f, n, k in by_source.select("file", "rows", "folded").iter_rows()],
        sessions=per_session.len(), branched_sessions=int((per_session > 1).sum()),
        max_branches=int(per_session.max() or 0), branches=_bins(per_session, BRANCH_BINS),
        windowed=windowed.len(), window_rows=int(rows.filter(pl.col("windows") > 1).height),
        windows_per_conversation=_bins(windowed, WINDOW_BINS),
        lost_units=tally.get("lost_units"), lost_assistant_turns=tally.get("lost_assistant_turns"),
        trained_histogram=histogram, trained_log_scale=log, low_trained_threshold=LOW_TRAINED,
        low_trained=int((trained < LOW_TRAINED).sum()), no_user_turn=int(rows["no_user"].sum() or 0),
        low_trained_examples=_examples(flags, "low_trained"), no_user_examples=_examples(flags, "no_user_turn"),
        role_tokens=roles)


def trained_bins(values: pl.Series) -> tuple[list[r.Bin], bool]:
    """Linear bins, or 1-2-5 logarithmic ones when the largest value is over 100 times the smallest
    non-zero one (a few long rows would squash every other into the first bin)."""
    if values.len() == 0:
        return [], False
    high = int(values.max())
    positive = values.filter(values > 0)
    low = int(positive.min()) if positive.len() else 0
    if low and high / low > 100:
        edges = [0]
        while edges[-1] <= high:
            edges.append(_log_edge(len(edges)))
        return _bins(values, [(a, b - 1) for a, b in zip(edges, edges[1:])]), True
    width = token_bins(high)
    return _bins(values, [(i * width, (i + 1) * width - 1) for i in range(high // width + 1)]), False


def _log_edge(i: int) -> int:
    """1, 2, 5, 10, 20, 50, ...: the i-th edge after 0."""
    return (1, 2, 5)[(i - 1) % 3] * 10 ** ((i - 1) // 3)


def _bins(values: pl.Series, spans) -> list[r.Bin]:
    out = []
    for low, high in spans:
        inside = (values >= low) & (values <= high) if high is not None else values >= low
        label = str(low) if high == low else (f"{low:,}–{high:,}" if high is not None else f"{low:,}+")
        out.append(r.Bin(label, low, high, int(inside.sum())))
    return out


def _examples(flags: pl.DataFrame, flag: str) -> list[r.RowFlag]:
    return [r.RowFlag(e["source"] or "", int(e["window"]), int(e["windows"]), int(e["num_tokens"]),
                      int(e["num_trained_tokens"]), e["preview"])
            for e in flags.filter(pl.col("flag") == flag).sort("row").iter_rows(named=True)]
