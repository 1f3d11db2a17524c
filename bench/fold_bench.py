"""What session folding costs: `sftprep run` with `[shape] sessions = "longest"` against `"all"` (no
folding), and optionally against another checkout of sftprep (the code before folding existed).

    python bench/fold_bench.py [--quick] [--n N] [--workers N] [--repeat N] [--baseline-root DIR] [--keep DIR]

Workloads, written to a temporary directory from the tau-bench trajectories of the corpus (SFTPREP_CORPUS):
  agent   the agent-log workload of render_bench.py (N conversations, 5,000 by default): nothing to fold,
          so this is folding's pure cost (canonical digests in the workers, the session window in the parent);
  loop    every request of each session logged, as an HTTP log of an agent loop keeps them: each trajectory
          once per assistant turn, cut after that turn (N/10 sessions): most records fold.
Each run is the real command, `python -m pipeline run CONFIG ...`, in a child process, QA report off; runs
of the configurations alternate, and the median of --repeat runs is reported, wall time and CPU time (of
the run's whole process tree), with every run's CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memory_bench  # noqa: E402
from render_bench import ROOT, load_trajectories, machine, make_conversation, write_workload  # noqa: E402


def write_loops(path: Path, sessions: int) -> int:
    """Each session logged request by request: the conversation cut after each assistant turn (a call
    turn included, as the exchange that returned it holds it), and the whole conversation last."""
    trajectories = load_trajectories()
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for k in range(sessions):
            body = make_conversation(trajectories, k, "agent")
            messages = body["messages"]
            ends = [end for end, m in enumerate(messages, start=1) if m["role"] == "assistant"]
            for end in ends + ([len(messages)] if ends[-1:] != [len(messages)] else []):
                out.write(json.dumps({**body, "messages": messages[:end]}) + "\n")
                count += 1
    return count


def config_file(base: Path, root: Path, sessions: str | None) -> Path:
    text = (root / "configs" / "default.toml").read_text(encoding="utf-8")
    text = memory_bench.without_qa_report(text)
    if sessions is not None:
        text = text.replace('sessions = "longest"', f'sessions = "{sessions}"', 1)
    path = base / f"{root.name}-{sessions or 'baseline'}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def run(root: Path, config: Path, workload: Path, out: Path, workers: int) -> tuple[float, float, int, dict]:
    """(seconds, CPU seconds, peak RSS, stats.json's record counts) of one `sftprep run` of the checkout at
    `root`. CPU time (user + system of the whole process tree, workers included: each process waits for
    its children) moves far less than wall time when other jobs share the machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, peak = memory_bench.run(workload, out, workers, config, cwd=root)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, peak, json.loads((out / "stats.json").read_text())["records"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5_000, help="conversations in the agent workload")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 500 conversations, one run each")
    parser.add_argument("--baseline-root", help="another sftprep checkout to time on the same input (its "
                                                "default config, QA report off)")
    parser.add_argument("--keep", help="write inputs and outputs here (kept) instead of a temp dir")
    args = parser.parse_args()
    n, repeat = (500, 1) if args.quick else (args.n, args.repeat)
    print(f"fold_bench: {machine()}; workers={args.workers}; median of {repeat}")
    with tempfile.TemporaryDirectory(prefix="sftprep-fold-bench-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        configs = [("sessions = all", ROOT, config_file(base, ROOT, "all")),
                   ("sessions = longest", ROOT, config_file(base, ROOT, "longest"))]
        if args.baseline_root:
            other = Path(args.baseline_root).resolve()
            configs.insert(0, (f"baseline {other}", other, config_file(base, other, None)))
        agent = base / "agent.jsonl"
        write_workload(agent, "agent", n)
        loop = base / "loop.jsonl"
        loop_records = write_loops(loop, max(1, n // 10))
        for name, workload, records in (("agent", agent, n), ("loop", loop, loop_records)):
            times: dict[str, list[float]] = {label: [] for label, _, _ in configs}
            cpus: dict[str, list[float]] = {label: [] for label, _, _ in configs}
            peaks: dict[str, int] = {}
            written: dict[str, dict] = {}
            for i in range(repeat):
                for label, root, config in configs:
                    seconds, cpu, peak, counts = run(root, config, workload, base / f"out-{name}-{i}-{config.stem}",
                                                     args.workers)
                    times[label].append(seconds)
                    cpus[label].append(cpu)
                    peaks[label] = max(peaks.get(label, 0), peak)
                    written[label] = counts
            wall, cpu = statistics.median(times["sessions = all"]), statistics.median(cpus["sessions = all"])
            print(f"\n  {name}: {records:,} records")
            print(f"  {'configuration':34} {'wall s':>7} {'vs all':>7} {'CPU s':>7} {'vs all':>7} {'written':>8} "
                  f"{'filtered':>8} {'peak RSS':>9}  CPU s of each run")
            for label, _, _ in configs:
                w, c = statistics.median(times[label]), statistics.median(cpus[label])
                runs = ", ".join(f"{t:.1f}" for t in cpus[label])
                print(f"  {label[:34]:34} {w:7.1f} {w / wall:6.2f}x {c:7.1f} {c / cpu:6.2f}x "
                      f"{written[label]['written']:8,} {written[label]['filtered']:8,} {peaks[label] / 2**20:8,.0f}M"
                      f"  {runs}", flush=True)


if __name__ == "__main__":
    main()
