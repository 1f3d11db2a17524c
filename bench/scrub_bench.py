"""What the scrub stage and near-duplicate filtering cost a run, on the agent-log workload of
render_bench.py (the tau-bench trajectories scaled up, written to a temporary directory):

  off     `sftprep run` with [scrub] enabled = false
  scrub   the default job: [scrub] on (redact)
  near    scrub and [shape] near_dedup = true

    python bench/scrub_bench.py [--agent N] [--workers N] [--repeat N]

Runs are interleaved (off, scrub, near, off, ...) and the median of each is reported, with the ratio to
`off`: the machine is shared and noisy, so only ratios within one invocation mean much.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from render_bench import write_workload  # noqa: E402

VARIANTS = {"off": {"scrub.enabled": False}, "scrub": {}, "near": {"shape.near_dedup": True}}


def run_once(workload: Path, out: Path, workers: int, overrides: dict) -> tuple[float, dict]:
    from pipeline import load_config, run_job

    config = load_config(None, {"input.paths": [str(workload)], "output.dir": str(out), "run.workers": workers,
                                "shape.max_tokens": 0, "convert.to": "", "output.qa_report": False, **overrides})
    started = time.perf_counter()
    result = run_job(config, progress=False)
    return time.perf_counter() - started, result.stats.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", type=int, default=5000, help="conversations (default 5,000)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sftprep-scrub-bench-") as tmp:
        workload = Path(tmp) / "agent.jsonl"
        write_workload(workload, "agent", args.agent)
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
        last: dict[str, dict] = {}
        for _ in range(args.repeat):
            for name, overrides in VARIANTS.items():
                took, stats = run_once(workload, Path(tmp) / name, args.workers, overrides)
                print(f"  run {name}: {took:.2f} s", file=sys.stderr, flush=True)
                seconds[name].append(took)
                last[name] = stats
        base = statistics.median(seconds["off"])
        print(f"agent workload: {args.agent:,} conversations, {args.workers} workers, median of {args.repeat}")
        for name in VARIANTS:
            med = statistics.median(seconds[name])
            records = last[name]["records"]
            print(f"  {name:<6} {med:7.2f} s  x{med / base:5.2f} of off   spread {min(seconds[name]):.2f}-"
                  f"{max(seconds[name]):.2f} s  written {records['written']:,} filtered {records['filtered']:,}")
        redacted = last["scrub"].get("tallies", {}).get("redacted", {})
        print(f"  redactions in the scrub run: {dict(redacted) or 'none'}")


if __name__ == "__main__":
    main()
