"""Per chunk of data rows, what the report's sessions section needs (`sessions`): one line per row
(session, folded, window, tokens by role, whether it has a user turn) and the first flagged rows."""

from __future__ import annotations

import polars as pl

from ..run.writers import ROLE_KEYS
from .reading import _clip_expr, _file

LOW_TRAINED = 16  # rows training fewer tokens than this are flagged
FLAG_EXAMPLES = 5

_ROLE_TOKENS = pl.Struct({k: pl.Int64 for k in ROLE_KEYS})


def shape_rows(frame: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    """One line per row of a chunk: the figures this section needs."""
    users = blocks.filter(pl.col("role") == "user").group_by("row").agg(user_blocks=pl.len())
    roles = pl.col("role_tokens").str.json_decode(_ROLE_TOKENS)
    return (frame.select("row", "source", "session", "folded", "window", "windows", "num_tokens",
                         "num_trained_tokens", roles.alias("roles"))
            .with_columns(file=_file(pl.col("source")), session=pl.col("session").fill_null(""),
                          folded=pl.col("folded").fill_null(0).cast(pl.Int64),
                          window=pl.col("window").fill_null(0).cast(pl.Int64),
                          windows=pl.col("windows").fill_null(1).cast(pl.Int64),
                          num_tokens=pl.col("num_tokens").cast(pl.Int64),
                          num_trained_tokens=pl.col("num_trained_tokens").cast(pl.Int64))
            .unnest("roles").with_columns(pl.col(ROLE_KEYS).fill_null(0).cast(pl.Int64))
            .join(users, on="row", how="left")
            .with_columns(no_user=pl.col("user_blocks").is_null()).drop("user_blocks"))


def flagged(frame: pl.DataFrame, rows: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    """The first few rows of a chunk with no user turn, and with fewer than LOW_TRAINED trained tokens."""
    texts = (blocks.filter(pl.col("type") == "text").sort("row", "mi", "bi").group_by("row")
             .agg(preview=pl.col("text").first()))
    marked = pl.concat([rows.filter(pl.col("no_user")).with_columns(flag=pl.lit("no_user_turn")),
                        rows.filter(pl.col("num_trained_tokens") < LOW_TRAINED).with_columns(flag=pl.lit("low_trained"))])
    return (marked.sort("row").group_by("flag", maintain_order=True).head(FLAG_EXAMPLES)
            .select("flag", "row", "source", "window", "windows", "num_tokens", "num_trained_tokens")
            .join(texts, on="row", how="left")
            .with_columns(preview=_clip_expr(pl.col("preview").fill_null(""))))


def combine_flagged(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort("row").group_by("flag", maintain_order=True).head(FLAG_EXAMPLES)
