#!/usr/bin/env python3
"""Attention flow, one target position through all 12 layers, three ways on the same
saved attention (L = 12, H = 12, seeded): networkx edmonds_karp (the reference, n <= 32),
scipy's maximum_flow on integer-scaled capacities (GlobEnc's approach), and bert-explain
(whole process: `bert-explain --attention FILE.npy --target T --json`, reading the file
included). Prints a markdown table. Run through scripts/bench/run.sh.
"""

import argparse
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_graphs import (attention_stack, augment, networkx_max_flows,  # noqa: E402
                              normalise, scipy_max_flows, timed)

SCALE = 10**6  # scipy needs integer capacities: round(Â · 1e6), as GlobEnc does


def bert_explain(binary, path, target, extra=()):
    """Wall time and peak RSS (KiB) of one bert-explain process, and its flow rows."""
    import json

    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    # --flow: past 1,024 tokens flow is left out unless asked for.
    out = subprocess.run([binary, "--attention", path, "--target", str(target), "--json", "--flow", *extra],
                         check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    report = json.loads(out.stdout)
    # ru_maxrss of children is the maximum over all children so far: report it only
    # when it grew (the largest n runs last).
    return wall, max(peak, before), np.array(report["relevance"]["flow"])


def best_of(k, fn):
    runs = [fn() for _ in range(k)]
    return min(runs, key=lambda r: r[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--dir", required=True, help="where the .npy files go")
    ap.add_argument("--sizes", default="16,32,64,128,512")
    ap.add_argument("--networkx-max", type=int, default=32)
    ap.add_argument("--scipy-max", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3, help="bert-explain runs per size (best)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    os.makedirs(args.dir, exist_ok=True)
    rows = []
    for n in sizes:
        att = attention_stack(12, 12, n, seed=n)
        path = os.path.join(args.dir, f"attention-L12-H12-n{n}.npy")
        np.save(path, att)
        aug = augment(att)
        target = n // 2
        wall, peak, ours = best_of(args.repeat, lambda: bert_explain(args.binary, path, target))
        print(f"n={n}: bert-explain {wall:.3f} s", file=sys.stderr, flush=True)
        nx_time = sp_time = None
        agree_nx = agree_sp = None
        if n <= args.networkx_max:
            flows, nx_time = timed(networkx_max_flows, aug, [target])
            agree_nx = float(np.abs(normalise(flows[:, 0, :]) - ours).max())
            print(f"n={n}: networkx {nx_time:.1f} s", file=sys.stderr, flush=True)
        if n <= args.scipy_max:
            flows, sp_time = timed(scipy_max_flows, aug, target, SCALE)
            agree_sp = float(np.abs(normalise(flows) - ours).max())
            print(f"n={n}: scipy {sp_time:.2f} s", file=sys.stderr, flush=True)
        rows.append((n, nx_time, sp_time, wall, peak, agree_nx, agree_sp))

    def fmt(t):
        return "–" if t is None else (f"{t:.3f}" if t < 10 else f"{t:.1f}")

    def ratio(a, b):
        return "–" if a is None else f"{a / b:,.0f}×"

    print("| n | networkx (s) | scipy-int (s) | bert-explain process (s) | vs networkx | vs scipy-int "
          "| max diff vs networkx | max diff vs scipy-int | bert-explain peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, nx_t, sp_t, wall, peak, d_nx, d_sp in rows:
        d1 = "–" if d_nx is None else f"{d_nx:.1e}"
        d2 = "–" if d_sp is None else f"{d_sp:.1e}"
        print(f"| {n} | {fmt(nx_t)} | {fmt(sp_t)} | {fmt(wall)} | {ratio(nx_t, wall)} | {ratio(sp_t, wall)} "
              f"| {d1} | {d2} | {peak / 1024:.0f} |")
    print(f"\nscipy-int: capacities rounded to integers at scale {SCALE:.0e}. "
          "networkx and scipy times are one run; bert-explain is the best of "
          f"{args.repeat} whole-process runs (reading the .npy, raw, rollout and flow, JSON out).")


if __name__ == "__main__":
    main()
