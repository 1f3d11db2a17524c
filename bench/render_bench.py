"""Render + tokenize + write a training set, three ways, beside two bounds, on the same conversations and
tokenizer:

  (a) baseline: `datasets.Dataset.map` calling `tokenizer.apply_chat_template(messages, tools=...,
      chat_template=<trl 1.16.0 qwen2_5_training.jinja>, tokenize=True, return_dict=True,
      return_assistant_tokens_mask=True)` with num_proc = cores, then `to_parquet`;
  (b) bound: `tokenizers.Tokenizer.encode_batch` over the already-rendered texts (tokenizing everything);
  (b') the new bound: the fast engine that `tokenizer_backend = "auto"` picks for qwen2.5 (fastokens,
      else gigatoken) encoding the same rendered texts, on every core;
  (c) `sftprep run` (pipeline.run_job): chatml + qwen2.5, Parquet out, workers = cores, scrubbing off
      (the baseline does not scrub, and redacted rows could not be compared with its ids);
  (c+scrub) the same with the default scrub stage on (secrets and personal data redacted), for its cost.

    python bench/render_bench.py [--quick] [--agent N] [--unique N] [--distinct N] [--workers N] [--repeat N]
                                 [--keep DIR]

Workloads, written to a temporary directory (never into the repo) from the tau-bench airline trajectories
of the corpus (SFTPREP_CORPUS, default ../shared/corpus):
  agent         the 120 trajectories scaled up to N conversations (--agent, 20,000 by default), the first
                user message of each tagged with the conversation's number: logs of repeated sessions, or of
                every request of a session, repeat everything else (system prompt, tools, turns);
  unique-turns  every user, tool and assistant text tagged: only the system prompt, the tool definitions,
                the template scaffolding and the tool-call bodies repeat;
  distinct      unique-turns plus a distinct system prompt and tool order per conversation (little
                repetition).

Each measured phase runs in its own child process, started from this one, so that its peak memory (the
sum of RSS over the child's process tree, sampled) is its own. With --repeat N each phase runs N times,
interleaved, and the median run is reported, with the spread. Load time of the input into a Dataset is not
charged to (a); (c) reads and parses the JSONL itself. Both are charged loading their tokenizer (module imports
are not timed for either). After the phases the bench checks, row for row, that
(c)'s input_ids equal (a)'s and that the loss masks are equal up to one documented difference: trl's
template trains the newline after `<|im_start|>assistant` and the newline after an assistant's
`<|im_end|>`; sftprep's chatml trains neither (they are template scaffolding, not what the model writes).
(b) and (b') must give (a)'s ids on every row too. Exit status 1 if any row differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TRL_TEMPLATE = "trl/chat_templates/qwen2_5_training.jinja"
TRL_TEMPLATE_SHA256 = "0cd86fb80f520885e35040a8df321540e729d3358da41f27cf74d33103d94f62"

from workloads import (AIRLINE_TOOLS, CORPUS, TAU, WORKLOADS, hf_inputs, load_trajectories,  # noqa: E402,F401
                       make_conversation, write_workload)


# --- the phases (each runs in a child process) -------------------------------------------------------

def _cpu() -> float:
    """CPU seconds of this process and its finished children (workers, pool processes): on a shared
    machine a steadier measure than the wall clock, which counts the time others hold the cores."""
    import resource

    own, done = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + done.ru_utime + done.ru_stime


def trl_template() -> str:
    """trl 1.16.0's qwen2_5_training.jinja, from the wheel (downloaded once with pip, sha256 checked)."""
    from pipeline.render.builtin_tokenizers import cache_dir

    cache = cache_dir() / "test-downloads"
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("trl-1.16.0-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "trl==1.16.0", "-d",
                        str(cache)], check=True, timeout=300)
        wheels = sorted(cache.glob("trl-1.16.0-*.whl"))
    with zipfile.ZipFile(wheels[0]) as wheel:
        data = wheel.read(TRL_TEMPLATE)
    if hashlib.sha256(data).hexdigest() != TRL_TEMPLATE_SHA256:
        sys.exit(f"render_bench: {TRL_TEMPLATE} does not have the expected sha256")
    return data.decode("utf-8")


def _baseline_row(example, tokenizer, template):
    messages, tools = json.loads(example["messages"]), json.loads(example["tools"])
    out = tokenizer.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=True,
                                        return_dict=True, return_assistant_tokens_mask=True)
    return {"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}


def phase_baseline(workload: Path, out: Path, workers: int) -> dict:
    import datasets

    from pipeline import load_tokenizer
    from pipeline.render.tokenizers import quiet_transformers

    datasets.disable_progress_bars()
    quiet_transformers()
    import transformers  # noqa: F401  (imported untimed, as (c)'s modules are)

    template = trl_template()
    columns: dict[str, list[str]] = {"messages": [], "tools": []}
    with open(workload, encoding="utf-8") as handle:
        for line in handle:
            messages, tools = hf_inputs(json.loads(line))
            # JSON strings: Arrow would merge the differing argument objects into one struct type and
            # fill the missing keys with nulls, which the template would then render.
            columns["messages"].append(json.dumps(messages, ensure_ascii=False))
            columns["tools"].append(json.dumps(tools, ensure_ascii=False))
    dataset = datasets.Dataset.from_dict(columns)
    del columns
    # Loading the tokenizer is timed, as (c) is timed loading its own (and building its fast engine).
    started, cpu = time.perf_counter(), _cpu()
    tokenizer = load_tokenizer("qwen2.5").to_transformers()
    mapped = dataset.map(_baseline_row, fn_kwargs={"tokenizer": tokenizer, "template": template},
                         num_proc=workers, remove_columns=["messages", "tools"])
    mapped.to_parquet(str(out / "baseline.parquet"))
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    import pyarrow.parquet as pq

    import pyarrow.compute as pc

    ids = pq.read_table(out / "baseline.parquet", columns=["input_ids"]).column("input_ids")
    tokens = pc.sum(pc.list_value_length(ids)).as_py() or 0
    return {"seconds": seconds, "cpu": cpu, "conversations": len(mapped), "tokens": tokens}


_CHUNK_ROWS = 500  # rows turned into Python lists at a time: whole columns would need GBs at the default sizes


def _baseline_ids(out: Path):
    import pyarrow.parquet as pq

    return pq.read_table(out / "baseline.parquet", columns=["input_ids"]).column("input_ids").combine_chunks()


def _rendered_texts(backend, ids) -> list[str]:
    """(a)'s rendered texts, decoded back from its ids (not timed)."""
    texts: list[str] = []
    for start in range(0, len(ids), _CHUNK_ROWS):
        texts += backend.decode_batch(ids.slice(start, _CHUNK_ROWS).to_pylist(), skip_special_tokens=False)
    return texts


def _same_rows(encoded: list[list[int]], ids) -> int:
    """Rows of `encoded` equal to (a)'s ids."""
    same = 0
    for start in range(0, len(ids), _CHUNK_ROWS):
        chunk = ids.slice(start, _CHUNK_ROWS).to_pylist()
        same += sum(a == b for a, b in zip(encoded[start:start + _CHUNK_ROWS], chunk))
    return same


def phase_bound(out: Path) -> dict:
    from pipeline import load_tokenizer

    backend = load_tokenizer("qwen2.5").backend
    ids = _baseline_ids(out)
    texts = _rendered_texts(backend, ids)
    started, cpu = time.perf_counter(), _cpu()
    encodings = backend.encode_batch(texts, add_special_tokens=False)
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    encoded = [e.ids for e in encodings]
    del encodings  # each Encoding also holds tokens, offsets and masks: drop them before comparing
    return {"seconds": seconds, "cpu": cpu, "conversations": len(texts), "tokens": sum(map(len, encoded)),
            "same_ids": _same_rows(encoded, ids)}


def phase_fast_bound(out: Path) -> dict:
    """(b'): the fast engine `auto` picks for qwen2.5, encoding the rendered texts whole (added tokens
    matched by the engine), on every core as (b) is."""
    from pipeline import load_tokenizer
    from pipeline.render.fast_tokenizer import choose_backend

    tok = load_tokenizer("qwen2.5")
    chosen, note = choose_backend(tok, "auto", 0)
    if chosen is None:
        sys.exit(f"render_bench: no fast engine for (b'): {note}")
    ids = _baseline_ids(out)
    texts = _rendered_texts(tok.backend, ids)
    cores = os.cpu_count() or 1
    if chosen.name == "fastokens":
        os.environ["FASTOKENS_BPE_THREADS"] = str(cores)  # read when the tokenizer is built
        import fastokens

        engine = fastokens.Tokenizer.from_json_str(tok.backend.to_str())
        encode = lambda: [e.ids for e in engine.encode_batch(texts)]  # noqa: E731
    else:
        import gigatoken

        engine = gigatoken.Tokenizer.from_json(tok.backend.to_str())
        encode = lambda: engine.encode_batch_list(texts, parallel=True)  # noqa: E731
    started, cpu = time.perf_counter(), _cpu()
    encoded = encode()
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    return {"seconds": seconds, "cpu": cpu, "conversations": len(texts), "tokens": sum(len(e) for e in encoded),
            "same_ids": _same_rows(encoded, ids), "engine": chosen.name}


def phase_sftprep(workload: Path, out: Path, workers: int, qa: bool = False, scrub: bool = False) -> dict:
    """The default job, but: no token limit (the baseline trims nothing), no provider export and (unless
    `qa`) no QA report (the baseline makes neither), no scrubbing unless `scrub`."""
    from pipeline import load_config, run_job

    name = "sftprep" + ("-qa" if qa else "") + ("-scrub" if scrub else "")
    config = load_config(None, {
        "input.paths": [str(workload)], "output.dir": str(out / name),
        "render.template": "chatml", "render.tokenizer": "qwen2.5", "run.workers": workers, "shape.max_tokens": 0,
        "convert.to": "", "output.qa_report": qa, "scrub.enabled": scrub})
    started, cpu = time.perf_counter(), _cpu()
    result = run_job(config, progress=False)
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    import pyarrow.parquet as pq

    tokens = sum(pq.read_metadata(p).num_rows and sum(pq.read_table(p, columns=["num_tokens"]).column(0).to_pylist())
                 for p in result.shards)
    stats = result.stats.to_dict()
    return {"seconds": seconds, "cpu": cpu, "conversations": result.stats.read, "written": result.stats.written,
            "tokens": tokens, "rejected": stats["records"]["rejected"], "filtered": stats["records"]["filtered"],
            "reasons": {stage: {**c["rejected"], **c["filtered"]} for stage, c in stats["stages"].items()
                        if c["rejected"] or c["filtered"]}}


PHASES = {"baseline": phase_baseline, "bound": phase_bound, "fast-bound": phase_fast_bound, "sftprep": phase_sftprep,
          "sftprep-qa": lambda workload, out, workers: phase_sftprep(workload, out, workers, qa=True),
          "sftprep-scrub": lambda workload, out, workers: phase_sftprep(workload, out, workers, scrub=True)}


def _child_main(argv: list[str]) -> None:
    name, workload, out, workers, result = argv
    fn = PHASES[name]
    args = (Path(out),) if name in ("bound", "fast-bound") else (Path(workload), Path(out), int(workers))
    Path(result).write_text(json.dumps(fn(*args)))


# --- orchestration ------------------------------------------------------------------------------------

class _TreeSampler:
    """Peak of the summed RSS of a process and all its descendants, sampled every 50 ms."""

    def __init__(self, pid: int):
        import psutil

        self.psutil, self.root, self.peak = psutil, psutil.Process(pid), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            try:
                for proc in [self.root, *self.root.children(recursive=True)]:
                    try:
                        total += proc.memory_info().rss
                    except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                        pass
            except self.psutil.NoSuchProcess:
                return
            self.peak = max(self.peak, total)
            self._stop.wait(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_phase(name: str, workload: Path, out: Path, workers: int) -> dict:
    result = out / f"{name}.result.json"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "true", "HF_DATASETS_CACHE": str(out / "hf-cache")}
    child = subprocess.Popen([sys.executable, __file__, "_phase", name, str(workload), str(out), str(workers),
                              str(result)], env=env)
    sampler = _TreeSampler(child.pid)
    code = child.wait()
    peak = sampler.stop()
    if code != 0:
        sys.exit(f"render_bench: phase {name} failed (exit {code})")
    data = json.loads(result.read_text())
    data["peak_rss"] = peak
    return data


def median_run(runs: list[dict]) -> dict:
    """The run of median time, with every run's seconds and the highest peak memory."""
    ordered = sorted(runs, key=lambda run: run["seconds"])
    return {**ordered[(len(ordered) - 1) // 2], "all_seconds": [run["seconds"] for run in runs],
            "peak_rss": max(run["peak_rss"] for run in runs)}


def _flat(column) -> tuple["np.ndarray", "np.ndarray"]:
    """A list<int> column as (every value, row offsets): numpy arrays, no Python int per token (at the
    default sizes, lists of ints would need about 10 GB)."""
    import numpy as np
    import pyarrow as pa

    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    values = np.asarray(lists.values)[offsets[0]:offsets[-1]]
    return values, offsets - offsets[0]


def check_same(out: Path, workload: Path) -> dict:
    """(c)'s rows against (a)'s: ids equal; masks equal once trl's two trained newlines are cleared."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline import load_tokenizer

    tok = load_tokenizer("qwen2.5")
    (nl,), (assistant,) = tok.encode("\n"), tok.encode("assistant")
    im_start, im_end = tok.token_id("<|im_start|>"), tok.token_id("<|im_end|>")
    base = pq.read_table(out / "baseline.parquet", columns=["input_ids", "assistant_masks"])
    base_ids, base_offsets = _flat(base.column("input_ids"))
    base_mask, _ = _flat(base.column("assistant_masks"))
    # trl's template trains the newline after <|im_end|> and after <|im_start|>assistant: clear them.
    # A newline at a row's first token has no predecessor in its row.
    after_end = np.zeros(len(base_ids), dtype=bool)
    after_end[1:] = base_ids[:-1] == im_end
    after_open = np.zeros(len(base_ids), dtype=bool)
    after_open[2:] = (base_ids[1:-1] == assistant) & (base_ids[:-2] == im_start)
    first = np.zeros(len(base_ids), dtype=bool)
    first[base_offsets[:-1][base_offsets[:-1] < len(base_ids)]] = True
    second = np.zeros(len(base_ids), dtype=bool)
    starts = base_offsets[:-1] + 1
    second[starts[(starts < base_offsets[1:]) & (starts < len(base_ids))]] = True
    clear = (base_ids == nl) & (base_mask != 0) & ~first & (after_end | (after_open & ~second))
    expected = np.where(clear, 0, base_mask).astype(np.int8)
    shards = [pq.read_table(shard, columns=["source", "input_ids", "loss_mask"])
              for shard in sorted((out / "sftprep").glob("data-*.parquet"))]
    ours = pa.concat_tables(shards) if shards else None
    compared = ids_equal = masks_equal = cleared = 0
    failures: list[str] = []
    prefix = f"{workload}:"
    if ours is not None:
        ids, offsets = _flat(ours.column("input_ids"))
        mask, _ = _flat(ours.column("loss_mask"))
        for k, source in enumerate(ours.column("source").to_pylist()):
            assert source.startswith(prefix), source
            row = int(source[len(prefix):]) - 1
            compared += 1
            lo, hi = base_offsets[row], base_offsets[row + 1]
            mine = slice(offsets[k], offsets[k + 1])
            if not np.array_equal(ids[mine], base_ids[lo:hi]):
                failures.append(f"row {row}: input_ids differ")
                continue
            ids_equal += 1
            cleared += int(clear[lo:hi].sum())
            differ = np.flatnonzero(mask[mine] != expected[lo:hi])
            if not len(differ):
                masks_equal += 1
            else:
                at = int(differ[0])
                window = base_ids[lo + max(0, at - 5):lo + at + 5].tolist()
                failures.append(f"row {row}: masks differ at token {at} ({tok.decode(window)!r})")
    return {"rows_a": len(base_offsets) - 1, "compared": compared, "ids_equal": ids_equal,
            "repeated": repeated_share(base_ids, base_offsets, min(tok.added_tokens.values())),
            "masks_equal": masks_equal, "newlines_cleared": cleared, "failures": failures}


def repeated_share(ids: "np.ndarray", offsets: "np.ndarray", first_added: int) -> float:
    """Share of tokens lying in segments (runs between added tokens) that occurred in an earlier row or
    earlier in the same row: what a segment cache can serve, given room."""
    import numpy as np

    seen: set[bytes] = set()
    repeated = 0
    for row in range(len(offsets) - 1):
        array = ids[offsets[row]:offsets[row + 1]]
        for segment in np.split(array, np.flatnonzero(array >= first_added)):
            key = hashlib.blake2b(segment.tobytes(), digest_size=12).digest()
            if key in seen:
                repeated += len(segment)
            else:
                seen.add(key)
    return repeated / max(1, len(ids))


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown CPU")
    try:
        import psutil

        memory = f"{psutil.virtual_memory().total / 2**30:.0f} GiB"
    except ImportError:
        memory = "unknown memory"
    return f"{os.cpu_count()} cores ({model}), {memory}, Python {platform.python_version()}, {platform.system()}"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def report(kind: str, n: int, phases: dict[str, dict], check: dict) -> bool:
    a, b, fast, c = phases["a"], phases["b"], phases["b'"], phases["c"]
    labels = {"a": "(a) datasets.map + apply_chat_template", "b": "(b) encode_batch of the rendered texts",
              "b'": f"(b') {fast['engine']} encode of the rendered texts", "c": "(c) sftprep run",
              "c+scrub": "(c) with scrubbing (the default)", "c+qa": "(c) sftprep run, QA report included"}
    rate = {key: data["conversations"] / data["seconds"] for key, data in phases.items()}
    print(f"\n== workload '{kind}': {n:,} conversations, {a['tokens']:,} tokens "
          f"({a['tokens'] / max(1, a['conversations']):,.0f} per conversation)")
    print(f"  {'':44} {'seconds':>8} {'conv/s':>9} {'tokens/s':>12} {'CPU s':>8} {'peak RSS':>10}  runs (s)")
    for key, data in phases.items():
        spread = ", ".join(f"{x:.1f}" for x in data["all_seconds"])
        print(f"  {labels[key]:44} {data['seconds']:8.1f} {rate[key]:9,.0f} {data['tokens'] / data['seconds']:12,.0f} "
              f"{data['cpu']:8.1f} {_mib(data['peak_rss']):>10}  {spread}")
    to_fast = rate["c"] / rate["b'"]
    print(f"  (c)/(a) = {rate['c'] / rate['a']:.2f}x    (c)/(b) = {rate['c'] / rate['b']:.2f}x    "
          f"(c)/(b') = {to_fast:.2f}x   (conversations/s)")
    per_cpu = {key: data["conversations"] / max(data["cpu"], 1e-9) for key, data in phases.items()}
    cpu_fast = per_cpu["c"] / per_cpu["b'"]
    print(f"  by CPU time: (c)/(a) = {per_cpu['c'] / per_cpu['a']:.2f}x    (c)/(b) = {per_cpu['c'] / per_cpu['b']:.2f}x"
          f"    (c)/(b') = {cpu_fast:.2f}x   (conversations per CPU second)")
    for key in ("c+scrub", "c+qa"):
        if key in phases:
            print(f"  {key}: (c)/(a) = {rate[key] / rate['a']:.2f}x by conversations/s, "
                  f"{per_cpu[key] / per_cpu['a']:.2f}x by CPU time; {phases[key]['cpu'] / c['cpu']:.2f}x (c)'s CPU")
    if c["rejected"] or c["filtered"]:
        print(f"  sftprep wrote {c['written']:,} of {c['conversations']:,}: {c['reasons']}")
    print(f"  repetition: {check['repeated']:.1%} of the tokens are in segments (text between special tokens) seen "
          f"earlier in the workload")
    print(f"  check: {check['compared']:,} rows compared, ids equal {check['ids_equal']:,}, masks equal "
          f"{check['masks_equal']:,} (after clearing {check['newlines_cleared']:,} newlines trl trains); "
          f"(b) re-encoded {b['same_ids']:,}/{b['conversations']:,} identically, (b') {fast['same_ids']:,}/"
          f"{fast['conversations']:,}")
    for line in check["failures"][:10]:
        print("  MISMATCH", line)
    return (not check["failures"] and check["compared"] == c["written"] and b["same_ids"] == b["conversations"]
            and fast["same_ids"] == fast["conversations"])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_phase":
        _child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", type=int, default=20_000, help="conversations in the agent-log workload")
    parser.add_argument("--unique", type=int, default=5_000, help="conversations in the unique-turns workload")
    parser.add_argument("--distinct", type=int, default=5_000, help="conversations in the low-repetition workload")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes for (a) and (c)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per phase; the median is reported")
    parser.add_argument("--quick", action="store_true", help="smoke run: 600, 300 and 300 conversations")
    parser.add_argument("--keep", help="write workloads and outputs here (kept) instead of a temp dir")
    parser.add_argument("--with-qa", action="store_true", help="also time (c) with its QA report (on by default "
                        "in sftprep run; neither (a) nor (b) makes one)")
    args = parser.parse_args()
    if args.quick:
        args.agent, args.unique, args.distinct = 600, 300, 300
    print(f"render_bench: {machine()}; workers={args.workers}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="sftprep-render-bench-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        for kind, n in (("agent", args.agent), ("unique-turns", args.unique), ("distinct", args.distinct)):
            if n <= 0:
                continue
            out = base / kind
            out.mkdir(parents=True, exist_ok=True)
            workload = out / "conversations.jsonl"
            write_workload(workload, kind, n)
            print(f"{kind}: {n:,} conversations, {workload.stat().st_size / 2**20:,.0f} MiB of JSONL", flush=True)
            names = {"a": "baseline", "b": "bound", "b'": "fast-bound", "c": "sftprep", "c+scrub": "sftprep-scrub",
                     **({"c+qa": "sftprep-qa"} if args.with_qa else {})}
            runs: dict[str, list[dict]] = {key: [] for key in names}
            for _ in range(args.repeat):
                for key, name in names.items():
                    runs[key].append(run_phase(name, workload, out, args.workers))
            phases = {key: median_run(done) for key, done in runs.items()}
            ok &= report(kind, n, phases, check_same(out, workload))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
