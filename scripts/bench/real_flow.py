#!/usr/bin/env python3
"""Attention flow on real attention: this checkout's engine against an earlier one, side by side.

Both are whole `bert-explain --attention FILE --json` processes on the same saved attention of the
real all-MiniLM-L6-v2 (scripts/bench/real_attention.py: English text of exactly n tokens; its 6
layers, and the same 6 tiled to 12, bert-base's depth). For each stack: flow from one position
(best of 5 runs, old and new in turn, several targets), and flow from every position
(`--all-positions`, one run). Prints a markdown table with the wall times, their ratio, the peak
RSS of each process, and the largest difference between the two engines' maps, relative to the
larger of the two values. A timed run from one position is the bare process (at n = 128 a run
takes a few milliseconds, and GNU time around it would add its own start to both engines); its
peak RSS comes from one more run under GNU time.

    real_flow.py --new BIN --old BIN --attention-dir DIR [--sizes 128,512] [--all-positions 128]

The attention files must exist in DIR as minilm-L{6,12}-n{N}.npy (scripts/bench/real_flow.sh makes
them and both binaries).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(binary, args):
    """One process: (wall seconds, peak RSS in MiB, parsed JSON report).

    The peak RSS comes from GNU time's %M: the rusage of a child as this script sees it would
    also count the script's own memory, which the child holds between fork and exec."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as peak:
        command = ["/usr/bin/time", "-f", "%M", "-o", peak.name, binary, *args, "--json"]
        start = time.perf_counter()
        done = subprocess.run(command, stdout=out, stderr=subprocess.PIPE)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"{binary} {' '.join(args)} failed: {done.stderr.decode()}")
        out.seek(0)
        return wall, int(peak.read().split()[-1]) / 1024, json.load(out)


def side_by_side(runs, binaries, args):
    """Each binary `runs` times, in turn: per binary (best wall seconds, peak RSS in MiB, parsed
    JSON report of its first run)."""
    walls = [[] for _ in binaries]
    reports = [None for _ in binaries]
    for _ in range(runs):
        for b, binary in enumerate(binaries):
            with tempfile.TemporaryFile() as out:
                start = time.perf_counter()
                done = subprocess.run([binary, *args, "--json"], stdout=out,
                                      stderr=subprocess.PIPE)
                walls[b].append(time.perf_counter() - start)
                if done.returncode != 0:
                    sys.exit(f"{binary} {' '.join(args)} failed: {done.stderr.decode()}")
                if reports[b] is None:
                    out.seek(0)
                    reports[b] = json.load(out)
    return [(min(walls[b]), run(binary, args)[1], reports[b])
            for b, binary in enumerate(binaries)]


def largest_difference(a, b):
    """Largest |x - y| / max(|x|, |y|) over two nested lists of numbers."""
    if isinstance(a, list):
        return max((largest_difference(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--attention-dir", required=True)
    parser.add_argument("--sizes", default="128,512")
    parser.add_argument("--all-positions", default="128", help="sizes for --all-positions")
    parser.add_argument("--new-only-all-positions", default="",
                        help="sizes for --all-positions with the new engine alone (the old one "
                             "takes too long there)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print("| stack | run | old engine (s) | this engine (s) | ratio | old peak RSS (MiB) "
          "| this peak RSS (MiB) | largest relative difference |")
    print("|---|---|---|---|---|---|---|---|")
    for layers in (6, 12):
        for n in sizes:
            path = os.path.join(args.attention_dir, f"minilm-L{layers}-n{n}.npy")
            for target in (0, n // 4, n // 2):
                case = ["--attention", path, "--target", str(target)]
                old, new = side_by_side(5, [args.old, args.new], case)
                diff = largest_difference(old[2]["relevance"]["flow"], new[2]["relevance"]["flow"])
                print(f"| L = {layers}, n = {n} | flow from position {target} | {old[0]:.3f} "
                      f"| {new[0]:.3f} | {old[0] / new[0]:.1f}× | {old[1]:.0f} | {new[1]:.0f} "
                      f"| {diff:.1e} |", flush=True)
            every = [int(s) for s in args.all_positions.split(",") if s]
            alone = [int(s) for s in args.new_only_all_positions.split(",") if s]
            if n in every or n in alone:
                case = ["--attention", path, "--target", "0", "--all-positions"]
                new = run(args.new, case)
                if n in every:
                    old = run(args.old, case)
                    diff = largest_difference(old[2]["all_positions"]["flow"],
                                              new[2]["all_positions"]["flow"])
                    print(f"| L = {layers}, n = {n} | --all-positions | {old[0]:.1f} "
                          f"| {new[0]:.1f} | {old[0] / new[0]:.1f}× | {old[1]:.0f} "
                          f"| {new[1]:.0f} | {diff:.1e} |", flush=True)
                else:
                    print(f"| L = {layers}, n = {n} | --all-positions | not run "
                          f"| {new[0]:.1f} | – | – | {new[1]:.0f} | – |", flush=True)


if __name__ == "__main__":
    main()
