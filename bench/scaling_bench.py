"""Does the work grow linearly with the input? Two shapes that used to grow super-linearly:

1. N parallel calls in one turn (and their N results): parse, validate and serialize to each format.
   Prints CPU seconds per stage and microseconds per call; linear means the per-call figure stays flat.
2. A .json array holding one huge string, against the same record as a JSONL line: reading time and
   peak traced memory, and the array/JSONL ratio.

Baseline (the fault report this bench answers): 8,000 calls 12.6 s, 16,000 calls 39 s, 100,000 calls
over 10 minutes (validate's tool-order step); an 8 MB string in a .json array 12 s (JSONL: 2 s).

    python bench/scaling_bench.py [--calls 4000,16000,64000] [--mb 8,16] [--passes 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pipeline  # noqa: E402
from pipeline.ingest import parse_record, read_records  # noqa: E402

BASELINE_CALLS = {8000: 12.6, 16000: 39.0}
BASELINE_ARRAY = {8: 12.0, 16: 47.0}


def parallel_calls(n: int) -> dict:
    calls = [{"id": f"call_{i}", "type": "function",
              "function": {"name": "get", "arguments": orjson.dumps({"i": i}).decode()}} for i in range(n)]
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": calls}]
    messages += [{"role": "tool", "tool_call_id": f"call_{i}", "content": f"r{i}"} for i in range(n)]
    messages.append({"role": "assistant", "content": "done"})
    return {"model": "gpt-4o", "messages": messages, "tools": [{"type": "function", "function": {
        "name": "get", "parameters": {"type": "object", "properties": {"i": {"type": "integer"}}}}}]}


def cpu(fn, passes: int) -> float:
    times = []
    for _ in range(passes):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def bench_calls(sizes: list[int], passes: int) -> None:
    print("parallel calls: CPU seconds (median of passes), microseconds per call in brackets")
    stages = ["parse", "validate", "anthropic", "gemini", "openai-responses", "openai-chat"]
    print(f"{'calls':>8} " + " ".join(f"{s:>22}" for s in stages) + "   baseline (validate)")
    for n in sizes:
        record = parallel_calls(n)
        conv = parse_record(record, "bench:1")
        figures = [cpu(lambda: parse_record(record, "bench:1"), passes), cpu(lambda: pipeline.validate(conv), passes)]
        figures += [cpu(lambda f=f: pipeline.serialize(conv, f), passes) for f in stages[2:]]
        cells = " ".join(f"{t:>10.3f} s ({1e6 * t / n:>6.1f} us)" for t in figures)
        baseline = f"{BASELINE_CALLS[n]} s" if n in BASELINE_CALLS else "-"
        print(f"{n:>8} {cells}   {baseline}")


def bench_array(sizes_mb: list[int], passes: int) -> None:
    print("\none huge string: .json array vs JSONL (seconds, median; peak traced MB); 'escapes': a quote")
    print("escaped in every 5 bytes, the splitter's worst case (it looks at each quote); 'plain': base64-like")
    print(f"{'MB':>4} {'kind':>8} {'array s':>9} {'jsonl s':>9} {'ratio':>6} {'array peak':>11} {'jsonl peak':>11}"
          "   baseline array")
    with tempfile.TemporaryDirectory() as tmp:
        for mb, kind in ((mb, kind) for mb in sizes_mb for kind in ("plain", "escapes")):
            unit = "abcd+/==" if kind == "plain" else 'ab\\"c'
            record = {"s": unit * (mb * 1024 * 1024 // len(unit))}
            array, lines = Path(tmp) / "a.json", Path(tmp) / "a.jsonl"
            array.write_bytes(orjson.dumps([record, {"t": 1}]))
            lines.write_bytes(orjson.dumps(record) + b"\n" + orjson.dumps({"t": 1}) + b"\n")
            limit = 4 * mb * 1024 * 1024
            seconds = [cpu(lambda p=p: list(read_records(p, max_record_bytes=limit)), passes) for p in (array, lines)]
            peaks = []
            for path in (array, lines):
                tracemalloc.start()
                list(read_records(path, max_record_bytes=limit))
                peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
                tracemalloc.stop()
            baseline = f"{BASELINE_ARRAY[mb]} s" if mb in BASELINE_ARRAY else "-"
            print(f"{mb:>4} {kind:>8} {seconds[0]:>9.2f} {seconds[1]:>9.2f} {seconds[0] / seconds[1]:>6.2f} "
                  f"{peaks[0]:>10.0f}M {peaks[1]:>10.0f}M   {baseline}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="4000,16000,64000")
    parser.add_argument("--mb", default="8,16")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    bench_calls([int(n) for n in args.calls.split(",")], args.passes)
    bench_array([int(n) for n in args.mb.split(",")], args.passes)


if __name__ == "__main__":
    main()
