#!/usr/bin/env python3
"""Adds importance scores from a second batch run over the same lines to the first run's reports:
for the first run's reports written before those scores existed (the 1,000-review sentiment run
took two hours of the machine; a second run with `--ig-steps 1 --mixing attention` takes minutes
and holds the new scores). Each pair of lines must be the same text through the same model: the
tokens, the prediction and attention's raw, rollout and flow maps must be equal, or it stops.

Usage: python3 scripts/paper/merge_scores.py FIRST.jsonl SECOND.jsonl OUT.jsonl SCORE [SCORE ...]
"""

import json
import sys


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    first, second, out, scores = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    merged = 0
    with open(first) as a, open(second) as b, open(out, "w") as o:
        for number, (line_a, line_b) in enumerate(zip(a, b, strict=True), start=1):
            ra, rb = json.loads(line_a), json.loads(line_b)
            if "error" in ra or "error" in rb:
                if ("error" in ra) != ("error" in rb):
                    sys.exit(f"line {number}: an error in one run only")
                o.write(line_a)
                continue
            same = (ra["tokens"] == rb["tokens"] and ra["prediction"] == rb["prediction"]
                    and ra["relevance"] == rb["relevance"])
            if not same:
                sys.exit(f"line {number}: the two runs did not explain the same text the same way")
            for score in scores:
                ra["importance"][score] = rb["importance"][score]
            o.write(json.dumps(ra, ensure_ascii=False) + "\n")
            merged += 1
    print(f"{merged} reports merged", file=sys.stderr)


if __name__ == "__main__":
    main()
