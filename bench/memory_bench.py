"""Peak memory of `sftprep run` at 1x and 10x the input: it should stay flat, not grow with the input.

    python bench/memory_bench.py [--quick] [--n N] [--workers N] [--keep DIR]

The input is the agent-log workload of render_bench.py (tau-bench airline trajectories from the corpus,
SFTPREP_CORPUS, scaled up), N and 10*N conversations, written to a temporary directory. Each run is the
real command, `python -m pipeline run configs/default.toml --input ... --output ...`, in a child process;
its peak memory is the peak of the summed RSS of its process tree (parent, forkserver, workers), sampled
every 20 ms. The job runs twice per size: as configured (the QA report included) and with the QA
report off, so that the pipeline's own memory and the report's are told apart.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from render_bench import ROOT, _TreeSampler, machine, write_workload  # noqa: E402


def run(workload: Path, out: Path, workers: int, config: Path, cwd: Path = ROOT) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of one `sftprep run` (of the checkout at `cwd`)."""
    command = [sys.executable, "-m", "pipeline", "run", str(config), "--input", str(workload), "--output", str(out),
               "--workers", str(workers), "--quiet"]
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = _TreeSampler(child.pid)
    _, stderr = child.communicate()
    peak = sampler.stop()
    if child.returncode != 0:
        sys.exit(f"memory_bench: sftprep run failed ({child.returncode}): {stderr.strip()[-500:]}")
    return time.perf_counter() - started, peak


def without_qa_report(config_text: str) -> str:
    """A job config's TOML with the QA report off: default.toml may set qa_report itself, so it is turned
    off there rather than set twice (TOML refuses a key given twice)."""
    if re.search(r"(?m)^qa_report = ", config_text):
        return re.sub(r"(?m)^qa_report = \w+", "qa_report = false", config_text, count=1)
    return config_text.replace("[output]\n", "[output]\nqa_report = false\n", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000, help="conversations at 1x (10x runs ten times as many)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 and 2,000 conversations")
    parser.add_argument("--keep", help="write inputs and outputs here (kept) instead of a temp dir")
    args = parser.parse_args()
    n = 200 if args.quick else args.n
    print(f"memory_bench: {machine()}; workers={args.workers}")
    with tempfile.TemporaryDirectory(prefix="sftprep-memory-bench-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        default = ROOT / "configs" / "default.toml"
        no_qa = base / "no-qa.toml"
        no_qa.write_text(without_qa_report(default.read_text(encoding="utf-8")), encoding="utf-8")
        peaks: dict[tuple[str, int], int] = {}
        print(f"  {'config':22} {'input':>20} {'seconds':>8} {'conv/s':>8} {'peak RSS':>10}")
        for scale in (1, 10):
            count = n * scale
            workload = base / f"agent-{count}.jsonl"
            write_workload(workload, "agent", count)
            size = workload.stat().st_size / 2**20
            for label, config in (("default.toml", default), ("default.toml, no QA", no_qa)):
                seconds, peak = run(workload, base / f"out-{count}-{config.stem}", args.workers, config)
                peaks[(label, scale)] = peak
                print(f"  {label:22} {f'{count:,} conv, {size:,.0f} MiB':>20} {seconds:8.1f} {count / seconds:8,.0f} "
                      f"{peak / 2**20:9,.0f}M", flush=True)
        for label in ("default.toml", "default.toml, no QA"):
            print(f"  {label}: peak at 10x / peak at 1x = {peaks[(label, 10)] / peaks[(label, 1)]:.2f}")


if __name__ == "__main__":
    main()
