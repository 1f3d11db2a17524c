"""How fast validation is, beside parsing, over every record of the third-party corpus.

    python bench/validate_bench.py [--runs 7] [--corpus DIR]

Records are read and decoded once (not timed). Then, per run: parse every record into a conversation
(as `sftprep validate` does),
and validate every conversation (all rules, then without the flattened-call detector and without JSON
Schema checks, to show what they cost). Prints the median over the runs in conversations per second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline import SftprepError, ValidateConfig, expand_paths, iter_raw, parse_record, validate  # noqa: E402

FOLDERS = ("pydantic_ai_anthropic", "pydantic_ai_openai_chat", "pydantic_ai_openai_responses", "pydantic_ai_google",
           "vercel_ai_anthropic", "vercel_ai_google", "vercel_ai_openai_chat", "vercel_ai_openai_responses",
           "claude_code_spotter_sessions")


def load(corpus: Path) -> list:
    """Every decoded record (HTTP exchanges, responses, streams), plus the tau-bench trajectories as
    OpenAI Chat message lists."""
    import json
    values = []
    paths = expand_paths([str(corpus / folder) for folder in FOLDERS if (corpus / folder).is_dir()])
    for raw in iter_raw(paths):
        if raw.error is None:
            values.append((raw.value, None))
    tau = corpus / "tau_bench_gpt4o_airline" / "gpt-4o-airline.json"
    if tau.is_file():
        values.extend((item["traj"], "openai-chat") for item in json.loads(tau.read_text()))
    return values


def parse_all(values: list) -> list:
    out = []
    for value, fmt in values:
        try:
            out.append(parse_record(value, "bench", fmt=fmt))
        except SftprepError:
            pass
    return out


def timed(fn, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--corpus", default=os.environ.get("SFTPREP_CORPUS", str(ROOT.parent / "shared" / "corpus")))
    args = parser.parse_args()
    values = load(Path(args.corpus))
    parse_s, convs = timed(lambda: parse_all(values), args.runs)
    n = len(convs)
    blocks = sum(len(m.blocks) for c in convs for m in c.messages)
    print(f"{len(values)} records, {n} parsed into conversations ({blocks} blocks); median of {args.runs} runs")
    print(f"  {'parse':<34} {n / parse_s:>10,.0f} conv/s  ({parse_s * 1000:8.1f} ms)")
    variants = {
        "validate, all rules": ValidateConfig(),
        "validate, without flattened_tool_call": ValidateConfig({"flattened_tool_call": "off"}),
        "validate, without JSON Schema": ValidateConfig({"arguments_schema": "off", "invalid_tool_schema": "off"}),
        "validate, structure only": ValidateConfig({code: "off" for code in
                                                   ("flattened_tool_call", "arguments_schema", "invalid_tool_schema")}),
    }
    for label, config in variants.items():
        seconds, issues = timed(lambda: sum(len(validate(c, config)) for c in convs), args.runs)
        print(f"  {label:<34} {n / seconds:>10,.0f} conv/s  ({seconds * 1000:8.1f} ms, {issues} issues, "
              f"{parse_s / seconds:.1f}x faster than parsing)")


if __name__ == "__main__":
    main()
