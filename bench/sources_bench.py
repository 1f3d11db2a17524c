"""Peak memory and speed of reading the log sources at 1x and 10x the input: reading must stream, so the
peak should stay flat while the input grows ten times.

    python bench/sources_bench.py [--n N] [--repeat R]

For each source (an OTLP JSON trace export in JSONL, a Codex rollout with a compaction every 200 lines, an
OpenAI Batch output file with its requests file), files of N and 10*N records are generated in a
temporary directory from the samples in data/. Each measurement is a child process that reads and parses
every record (`pipeline.ingest.iter_parsed`) and reports its peak RSS (ru_maxrss) and time; the baseline
is a child that loads the same file whole (`json.loads` of every line into one list), which is what a
reader that does not stream costs. Medians over R runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"

_CHILD = r"""
import json, resource, sys, time
mode, paths = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
count = 0
if mode == "sftprep":
    from pipeline.ingest import iter_parsed
    for parsed in iter_parsed(paths):
        count += 1
else:
    for path in paths:
        with open(path) as handle:
            held = [json.loads(line) for line in handle]
        count += len(held)
print(json.dumps({"seconds": time.perf_counter() - started, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "records": count}))
"""


def _otel(folder: Path, n: int) -> list[Path]:
    line = (DATA / "traces" / "otel_genai.jsonl").read_text().splitlines()[0]
    path = folder / "trace.jsonl"
    with path.open("w") as out:
        for _ in range(n // 3 + 1):  # three spans a line
            out.write(line + "\n")
    return [path]


def _codex(folder: Path, n: int) -> list[Path]:
    lines = (DATA / "sessions" / "codex_rollout.jsonl").read_text().splitlines()
    body = [json.loads(x) for x in lines if json.loads(x)["type"] == "response_item"]
    path = folder / "rollout-bench.jsonl"
    with path.open("w") as out:
        out.write(lines[0] + "\n")
        written = 0
        while written < n:
            for item in body:
                out.write(json.dumps(item) + "\n")
            written += len(body)
            if written % 200 < len(body):
                out.write(json.dumps({"timestamp": "t", "type": "compacted", "payload": {"message": "summary"}}) + "\n")
    return [path]


def _batch(folder: Path, n: int) -> list[Path]:
    requests = [json.loads(x) for x in (DATA / "batch" / "openai_requests.jsonl").read_text().splitlines()]
    results = {json.loads(x)["custom_id"]: json.loads(x) for x in (DATA / "batch" / "openai_output.jsonl").read_text().splitlines()}
    req_path, out_path = folder / "requests.jsonl", folder / "output.jsonl"
    with req_path.open("w") as req, out_path.open("w") as out:
        for i in range(n):
            template = requests[i % 2]  # req-1 and req-2: both answered
            req.write(json.dumps({**template, "custom_id": f"r{i}"}) + "\n")
        for i in reversed(range(n)):  # results in the opposite order
            out.write(json.dumps({**results[requests[i % 2]["custom_id"]], "custom_id": f"r{i}"}) + "\n")
    return [out_path]


SOURCES = {"otel-genai": _otel, "codex": _codex, "openai-batch": _batch}


def _measure(mode: str, paths: list[Path], repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", _CHILD, mode, *map(str, paths)], cwd=ROOT, capture_output=True,
                              text=True, check=True)
        runs.append(json.loads(done.stdout))
    return {"seconds": statistics.median(r["seconds"] for r in runs), "peak": statistics.median(r["peak"] for r in runs),
            "records": runs[0]["records"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="records at 1x (default 2000)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'source':<14}{'size':>6}{'MB':>8}{'records':>9}{'s':>8}{'rec/s':>9}{'peak MiB':>10}"
          f"{'baseline MiB':>14}{'peak ratio 10x/1x':>19}")
    for name, make in SOURCES.items():
        peaks = []
        for scale in (1, 10):
            with tempfile.TemporaryDirectory() as tmp:
                paths = make(Path(tmp), args.n * scale)
                size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
                ours = _measure("sftprep", paths, args.repeat)
                whole = _measure("baseline", paths, args.repeat)
            peaks.append(ours["peak"])
            ratio = f"{peaks[1] / peaks[0]:.2f}x" if scale == 10 else ""
            print(f"{name:<14}{scale:>5}x{size:>8.1f}{ours['records']:>9,}{ours['seconds']:>8.2f}"
                  f"{ours['records'] / ours['seconds']:>9,.0f}{ours['peak'] / 2**20:>10.0f}{whole['peak'] / 2**20:>14.0f}"
                  f"{ratio:>19}")


if __name__ == "__main__":
    main()
