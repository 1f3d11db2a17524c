"""'Did you mean' for a name the user mistyped: the nearest valid names, worded for an error message."""

from __future__ import annotations

import difflib
from typing import Iterable


def nearest(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The valid names close to `word` (difflib's ratio >= 0.6, case folded), best first."""
    options = list(dict.fromkeys(choices))
    folded = {choice.lower(): choice for choice in options}
    return [folded[m] for m in difflib.get_close_matches(word.lower(), list(folded), n=n, cutoff=0.6)]


def did_you_mean(word: str, choices: Iterable[str], prefix: str = "") -> str:
    """" (did you mean 'x'?)" (or 'x' or 'y'), or "" when nothing is close: put after the name in an error.
    `prefix` is shown before each name but not compared (a config key's section)."""
    found = nearest(word, choices)
    if not found:
        return ""
    return " (did you mean " + " or ".join(f"'{prefix}{name}'" for name in found) + "?)"
