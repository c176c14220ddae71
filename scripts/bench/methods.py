"""What each SPEC §8 method costs on top of a plain explain, on the real all-MiniLM-L6-v2.

Runs the release binary (whole process, model load included) on sentences of a few lengths,
once plainly and once per --mixing method, median of --repeat runs each, and prints a
markdown table of seconds and the ratio to the plain run.

Usage: python3 scripts/bench/methods.py [--binary target/release/bert-explain]
           [--model models/downloaded/all-MiniLM-L6-v2] [--lengths 16,64,128] [--repeat 3]
"""

import argparse
import statistics
import subprocess
import time

METHODS = ["attention", "norm", "alti", "value-zeroing"]
WORDS = ("the author talked to sara about the book that her friend had written last "
         "summer while they were travelling along the coast of the northern sea").split()


def sentence(tokens):
    """A text of about `tokens` wordpieces (two are [CLS] and [SEP]), with one [MASK]."""
    words = [WORDS[i % len(WORDS)] for i in range(tokens - 3)]
    words.insert(len(words) // 2, "[MASK]")
    return " ".join(words)


def seconds(command, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/bert-explain")
    parser.add_argument("--model", default="models/downloaded/all-MiniLM-L6-v2")
    parser.add_argument("--lengths", default="16,64,128")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    print("| tokens | plain | " + " | ".join(METHODS) + " |")
    print("|---|---|" + "---|" * len(METHODS))
    for n in lengths:
        base = [args.binary, "--json", "--model", args.model, sentence(n)]
        plain = seconds(base, args.repeat)
        cells = []
        for method in METHODS:
            t = seconds(base + ["--mixing", method], args.repeat)
            cells.append(f"{t:.2f} s ({t / plain:.1f}×)")
        print(f"| {n} | {plain:.2f} s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
