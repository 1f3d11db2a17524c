"""Mergeable run counts: per stage what came in, passed, was rejected (by code) or filtered (by reason),
plus free-form tallies (issues by code, ledger entries by kind, tokens). Workers each keep one and the
parent merges them; the JSON form is deterministic."""

from __future__ import annotations

from collections import Counter
from typing import Any

STAGES = ("read", "parse", "validate", "scrub", "shape", "render", "dedup", "fold", "write")


class StageCounts:
    __slots__ = ("seen", "passed", "rejected", "filtered")

    def __init__(self) -> None:
        self.seen = 0
        self.passed = 0
        self.rejected: Counter[str] = Counter()
        self.filtered: Counter[str] = Counter()

    def merge(self, other: "StageCounts") -> None:
        self.seen += other.seen
        self.passed += other.passed
        self.rejected.update(other.rejected)
        self.filtered.update(other.filtered)

    def to_dict(self) -> dict[str, Any]:
        return {"in": self.seen, "passed": self.passed, "rejected": dict(sorted(self.rejected.items())),
                "filtered": dict(sorted(self.filtered.items()))}


class Stats:
    def __init__(self) -> None:
        self.stages = {name: StageCounts() for name in STAGES}
        self.tallies: dict[str, Counter[str]] = {}

    def tally(self, group: str, key: str, n: int = 1) -> None:
        self.tallies.setdefault(group, Counter())[key] += n

    def merge(self, other: "Stats") -> "Stats":
        for name, counts in other.stages.items():
            self.stages[name].merge(counts)
        for group, counter in other.tallies.items():
            self.tallies.setdefault(group, Counter()).update(counter)
        return self

    @property
    def read(self) -> int:
        return self.stages["read"].seen

    @property
    def written(self) -> int:
        return self.stages["write"].passed

    @property
    def rejected(self) -> int:
        return sum(sum(c.rejected.values()) for c in self.stages.values())

    @property
    def filtered(self) -> int:
        return sum(sum(c.filtered.values()) for c in self.stages.values())

    @property
    def internal_errors(self) -> int:
        """Records rejected by an unexpected exception (code internal_error): bugs to report."""
        return sum(c.rejected.get("internal_error", 0) for c in self.stages.values())

    def balanced(self) -> bool:
        return self.read == self.written + self.rejected + self.filtered

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": {"read": self.read, "written": self.written, "rejected": self.rejected,
                        "filtered": self.filtered, "balanced": self.balanced()},
            "stages": {name: counts.to_dict() for name, counts in self.stages.items()},
            "tallies": {group: dict(sorted(c.items())) for group, c in sorted(self.tallies.items())},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Stats":
        stats = cls()
        for name, counts in data.get("stages", {}).items():
            target = stats.stages.setdefault(name, StageCounts())
            target.seen, target.passed = counts["in"], counts["passed"]
            target.rejected.update(counts["rejected"])
            target.filtered.update(counts["filtered"])
        for group, counter in data.get("tallies", {}).items():
            stats.tallies[group] = Counter(counter)
        return stats

    def summary_line(self, *, running: bool = False) -> str:
        """`running`: mid-run, records not yet decided (held for session folding, or in a batch being
        written) are shown as pending; at the end any gap is a fault and says so."""
        internal = f" ({self.internal_errors} internal errors: see rejects.jsonl)" if self.internal_errors else ""
        line = (f"read {self.read}, written {self.written}, rejected {self.rejected}{internal}, "
                f"filtered {self.filtered}")
        if self.balanced():
            return line
        if running:
            return f"{line}, {self.read - self.written - self.rejected - self.filtered} pending"
        return line + "  (UNBALANCED)"
