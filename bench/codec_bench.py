"""Same-format round trips per second over the corpus: parse + serialize of every request body and
response object, per format. Prints conversations/s and MB/s (median of several passes, one core).

    python bench/codec_bench.py [--passes 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from corpus import CORPUS, request_bodies, response_bodies, tau_bench_trajectories  # noqa: E402

import pipeline  # noqa: E402


def workload() -> dict[str, list[tuple[object, str, int]]]:
    """format -> [(record, shape, bytes)] for every record a codec claims."""
    out: dict[str, list] = defaultdict(list)
    records = [(b, None) for _, b in request_bodies()] + [(b, "response") for _, b in response_bodies()]
    records += [(t, "messages") for _, t in tau_bench_trajectories()]
    for record, shape in records:
        try:
            found = pipeline.detect(record)
        except pipeline.SftprepError:
            continue
        out[found.format].append((record, shape or found.shape, len(orjson.dumps(record))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"corpus not found at {CORPUS} (set SFTPREP_CORPUS)")
    print(f"{'format':18} {'records':>8} {'MB':>7} {'conv/s':>10} {'MB/s':>8}   (median of {args.passes} passes)")
    total_n = total_bytes = total_time = 0.0
    for fmt, items in sorted(workload().items()):
        size = sum(b for _, _, b in items)
        times = []
        for _ in range(args.passes):
            start = time.perf_counter()
            for record, shape, _ in items:
                conv = pipeline.parse(record, fmt, shape)
                pipeline.serialize(conv, fmt, shape=shape)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        total_n, total_bytes, total_time = total_n + len(items), total_bytes + size, total_time + median
        print(f"{fmt:18} {len(items):8d} {size / 1e6:7.2f} {len(items) / median:10,.0f} {size / 1e6 / median:8.1f}")
    print(f"{'all':18} {int(total_n):8d} {total_bytes / 1e6:7.2f} {total_n / total_time:10,.0f} "
          f"{total_bytes / 1e6 / total_time:8.1f}")


if __name__ == "__main__":
    main()
