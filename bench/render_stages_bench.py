"""What each stage of the render core after the template costs (split at added tokens, segment encoding,
regions, index, spans, mask, mask checks), per conversation, optionally beside another checkout.

    python bench/render_stages_bench.py [--kind agent|distinct] [--n N] [--repeat N] [--baseline-root DIR]

Conversations come from the tau-bench trajectories of the corpus (SFTPREP_CORPUS), as render_bench.py
builds them. Each is rendered once (chatml, qwen2.5, the default backend) while the state after `_strip` is
captured; then every stage runs alone over all of them, --repeat times, and the fastest pass is reported in
microseconds per conversation (CPU time; the minimum because the machine is shared). The garbage collector
is set as a worker sets it. "encode cold" clears the segment cache first; "encode warm" runs on the cache
the previous pass left. With --baseline-root, the same measurement runs in a child process on that
checkout's code, and the ratios are printed.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def measure(kind: str, n: int, repeat: int) -> dict[str, float]:
    sys.path.insert(0, os.getcwd())  # the checkout this runs in (the baseline's, in the child)
    sys.path.insert(1, str(Path(__file__).resolve().parent))
    import pipeline
    from pipeline import load_config
    from pipeline.run.render_stage import Renderer
    from workloads import load_trajectories, make_conversation

    trajectories = load_trajectories()
    convs = [pipeline.parse(make_conversation(trajectories, k, kind)) for k in range(n)]
    renderer = Renderer(load_config(None, {"render.template": "chatml", "render.tokenizer": "qwen2.5"}).render)
    engine = importlib.import_module("pipeline.render.engine")
    spans = importlib.import_module("pipeline.render.spans")
    tokenizer, mask = renderer.tokenizer, renderer.mask
    encoder = tokenizer.segment_encoder
    captured = []
    strip = engine._strip

    def capture(*args, **kwargs):
        captured.append(strip(*args, **kwargs))
        return captured[-1]

    engine._strip = capture
    for conv in convs:
        renderer.render_buffers(conv)
    engine._strip = strip
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    eot_ids = {t for t in (tokenizer.token_id(x) for x in engine._eot_tokens(renderer.template.family, tokenizer))
               if t is not None}
    rows = [{"text": text, "found": found, "blocks": engine._ordered_blocks(found), "conv": conv}
            for (text, found), conv in zip(captured, convs)]
    has_texts = hasattr(encoder, "split_texts")  # a checkout from before split_texts splits and slices

    def split():
        for r in rows:
            r["pieces"], r["texts"] = encoder.split_texts(r["text"]) if has_texts else (encoder.split(r["text"]), None)

    def check_added():
        for r in rows:
            engine._check_added_tokens_in_content(r["pieces"], sorted(r["found"].pieces, key=lambda p: (p[0], p[1])),
                                                  tokenizer)

    def encode():
        for r in rows:
            r["seg"] = (encoder.encode(r["text"], r["pieces"], r["texts"]) if has_texts
                        else encoder.encode(r["text"], r["pieces"]))

    def encode_cold():
        with encoder._lock:
            encoder._cache.clear()
            encoder._cached_tokens = 0
        encode()

    def regions():
        for r in rows:
            r["regions"] = spans._regions(r["found"], r["blocks"], r["pieces"], eot_ids, r["conv"])

    def index():
        for r in rows:
            r["seg"].starting.clear()
            r["seg"].ending.clear()
            r["seg"].index(spans._boundaries(r["text"], r["blocks"], r["found"], r["regions"]))

    def span_list():
        for r in rows:
            r["spans"] = spans._spans(r["text"], r["blocks"], r["regions"], r["seg"])

    def loss_mask():
        for r in rows:
            r["trained"] = spans._trained_messages(r["conv"], r["regions"], mask, r["blocks"])
            r["mask"] = spans._mask(r["regions"], r["blocks"], r["trained"], mask, r["seg"])

    def check_mask():
        for r in rows:
            spans._check_mask(r["mask"], r["blocks"], r["regions"], r["trained"], mask, r["seg"], r["spans"])

    stages = {"split": split, "check_added": check_added, "encode cold": encode_cold, "encode warm": encode,
              "regions": regions, "boundaries+index": index, "spans": span_list, "trained+mask": loss_mask,
              "check_mask": check_mask}
    out = {}
    for name, stage in stages.items():
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            stage()
            best = min(best, time.process_time() - start)
        out[name] = best * 1e6 / len(rows)
    out["sum (warm)"] = sum(v for k, v in out.items() if k != "encode cold")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=("agent", "distinct"), default="agent")
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--baseline-root", type=Path)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # the child's output
    args = parser.parse_args()
    ours = measure(args.kind, args.n, args.repeat)
    if args.json:
        print(json.dumps(ours))
        return
    base = None
    if args.baseline_root:
        child = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json", "--kind", args.kind,
                                "--n", str(args.n), "--repeat", str(args.repeat)], cwd=args.baseline_root,
                               capture_output=True, text=True, check=True)
        base = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"{args.kind}, {args.n} conversations, fastest of {args.repeat} passes, us/conversation")
    print(f"{'stage':20s} {'this':>9s}" + (f" {'baseline':>9s} {'ratio':>6s}" if base else ""))
    for name, value in ours.items():
        line = f"{name:20s} {value:9.1f}"
        if base:
            line += f" {base[name]:9.1f} {value / base[name]:6.2f}"
        print(line)


if __name__ == "__main__":
    main()
