#!/usr/bin/env python3
"""Batch-mode throughput: sentences per second with one bert-explain process for a whole
dataset (--input) against one process per sentence, on the same sentences and flags.

Usage: python3 scripts/bench/throughput.py [--dataset data/agreement.jsonl]
           [--model models/tiny-bert-modern] [--flags=--evaluate]  (--flags= for none)
Builds the release binary, then prints a markdown table. Needs only the system python3.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(REPO, "target", "release", "bert-explain")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="data/agreement.jsonl")
    ap.add_argument("--model", default="models/tiny-bert-modern")
    ap.add_argument("--flags", default="--evaluate")
    args = ap.parse_args()
    os.chdir(REPO)
    subprocess.run(["cargo", "build", "--release", "--quiet"], check=True)
    flags = shlex.split(args.flags)
    examples = [json.loads(l) for l in open(args.dataset) if l.strip()]

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([BIN, "--model", args.model, *flags, "--input", args.dataset,
                        "--output", os.path.join(tmp, "out.jsonl")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        batch = time.perf_counter() - start

    start = time.perf_counter()
    for ex in examples:
        cmd = [BIN, "--model", args.model, *flags, "--json"]
        if ex.get("target") is not None:
            cmd += ["--target", str(ex["target"])]
        if ex.get("candidates"):
            cmd += ["--candidates", ",".join(ex["candidates"])]
        subprocess.run(cmd + [ex["text"]], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    single = time.perf_counter() - start

    n = len(examples)
    print(f"| {n} sentences of {args.dataset}, {args.model} {args.flags} | wall time | sentences/s |")
    print("|---|---|---|")
    print(f"| batch (`--input`, one process) | {batch:.2f} s | {n / batch:.1f} |")
    print(f"| one process per sentence | {single:.2f} s | {n / single:.1f} |")
    print(f"\nbatch mode: {single / batch:.1f}× the throughput of one process per sentence")


if __name__ == "__main__":
    sys.exit(main())
