"""What the scrub stage and near-duplicate filtering cost a run, on a workload of render_bench.py (the
tau-bench trajectories scaled up, written to a temporary directory): agent logs (repeated prompts and
turns, which the per-text cache of findings absorbs) or distinct (little repeats: every text is scanned):

  off     `sftprep run` with [scrub] enabled = false
  scrub   the default job: [scrub] on (redact)
  near    scrub and [shape] near_dedup = true

    python bench/scrub_bench.py [--workload agent|distinct] [--conversations N] [--workers N] [--repeat N]

Runs are interleaved (off, scrub, near, off, ...) and the median of each is reported, wall and CPU
seconds (this process and its workers), with the ratio to `off`: the machine is shared and noisy, so only
ratios within one invocation mean much, CPU ones most.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from render_bench import write_workload  # noqa: E402

VARIANTS = {"off": {"scrub.enabled": False}, "scrub": {}, "near": {"shape.near_dedup": True}}


def _cpu() -> float:
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def run_once(workload: Path, out: Path, workers: int, overrides: dict) -> tuple[float, float, dict]:
    from pipeline import load_config, run_job

    config = load_config(None, {"input.paths": [str(workload)], "output.dir": str(out), "run.workers": workers,
                                "shape.max_tokens": 0, "convert.to": "", "output.qa_report": False, **overrides})
    started, cpu = time.perf_counter(), _cpu()
    result = run_job(config, progress=False)
    return time.perf_counter() - started, _cpu() - cpu, result.stats.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("agent", "distinct"), default="agent")
    parser.add_argument("--conversations", "--agent", dest="agent", type=int, default=5000,
                        help="conversations (default 5,000)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sftprep-scrub-bench-") as tmp:
        workload = Path(tmp) / f"{args.workload}.jsonl"
        write_workload(workload, args.workload, args.agent)
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
        cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
        last: dict[str, dict] = {}
        for _ in range(args.repeat):
            for name, overrides in VARIANTS.items():
                took, used, stats = run_once(workload, Path(tmp) / name, args.workers, overrides)
                print(f"  run {name}: {took:.2f} s, CPU {used:.2f} s", file=sys.stderr, flush=True)
                seconds[name].append(took)
                cpu[name].append(used)
                last[name] = stats
        base, base_cpu = statistics.median(seconds["off"]), statistics.median(cpu["off"])
        print(f"{args.workload} workload: {args.agent:,} conversations, {args.workers} workers, median of {args.repeat}")
        for name in VARIANTS:
            med, med_cpu = statistics.median(seconds[name]), statistics.median(cpu[name])
            records = last[name]["records"]
            print(f"  {name:<6} {med:7.2f} s  x{med / base:5.2f} of off   CPU {med_cpu:7.2f} s  x{med_cpu / base_cpu:5.2f}"
                  f"   spread {min(seconds[name]):.2f}-{max(seconds[name]):.2f} s  written {records['written']:,}"
                  f" filtered {records['filtered']:,}")
        redacted = last["scrub"].get("tallies", {}).get("redacted", {})
        print(f"  redactions in the scrub run: {dict(redacted) or 'none'}")


if __name__ == "__main__":
    main()
