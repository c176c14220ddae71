#!/usr/bin/env python3
"""Regenerate tests/fixtures/<name>.json from tests/fixtures/cases.json with reference.py.

Each case is {"name", "model", "text", "target", "candidates", "top_k"}; "model" is a folder
name under models/ (tiny-bert-legacy, tiny-bert-modern, tiny-bert-encoder) or
all-MiniLM-L6-v2, which lives in models/downloaded/ and is fetched with scripts/fetch-minilm.sh
when missing. For the tiny models the float32 attention probabilities (L×H×n×n) the reference
used are also written to tests/fixtures/attention/<name>.json, so that rollout and flow can be
checked on exactly the same attention tensors.

Usage (with the reference venv's python):
  make_fixtures.py                  all cases
  make_fixtures.py --only NAME      one case (repeat or comma-separate for more)
  make_fixtures.py --skip-slow      skip the all-MiniLM-L6-v2 cases (download + slow networkx flow)
  make_fixtures.py --jobs 2         run cases in parallel processes
"""

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
MINILM = "all-MiniLM-L6-v2"
SLOW_MODELS = {MINILM}

sys.path.insert(0, HERE)


def model_dir(model):
    if model == MINILM:
        return os.path.join(REPO, "models", "downloaded", MINILM)
    return os.path.join(REPO, "models", model)


def ensure_model(model):
    folder = model_dir(model)
    if os.path.isfile(os.path.join(folder, "config.json")):
        return folder
    if model == MINILM:
        print(f"make_fixtures: fetching {MINILM}", file=sys.stderr, flush=True)
        subprocess.run([os.path.join(REPO, "scripts", "fetch-minilm.sh"), folder], check=True)
        return folder
    sys.exit(f"make_fixtures: {folder} is missing; run scripts/reference/make_tiny_models.py first")


def run_case(case, threads):
    import torch

    import reference

    if threads:
        torch.set_num_threads(threads)
    start = time.time()
    folder = model_dir(case["model"])
    attention_out = None
    if case["model"] not in SLOW_MODELS:
        os.makedirs(os.path.join(FIXTURES, "attention"), exist_ok=True)
        attention_out = os.path.join(FIXTURES, "attention", case["name"] + ".json")
    report = reference.run(folder, case["text"], case.get("target"), case.get("candidates", ["his", "her"]),
                           case.get("top_k", 5), attention_out)
    out = os.path.join(FIXTURES, case["name"] + ".json")
    with open(out, "w") as f:
        f.write(json.dumps(report, indent=1) + "\n")
    return case["name"], time.time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=os.path.join(FIXTURES, "cases.json"))
    ap.add_argument("--only", action="append", default=[], help="case name(s) to regenerate")
    ap.add_argument("--skip-slow", action="store_true", help=f"skip the {MINILM} cases")
    ap.add_argument("--jobs", type=int, default=1, help="parallel processes (default 1)")
    args = ap.parse_args()

    with open(args.cases) as f:
        cases = json.load(f)
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        sys.exit("make_fixtures: duplicate case names in cases.json")
    only = {n.strip() for group in args.only for n in group.split(",") if n.strip()}
    unknown = only - set(names)
    if unknown:
        sys.exit(f"make_fixtures: unknown case(s): {sorted(unknown)}; known: {names}")
    if only:
        cases = [c for c in cases if c["name"] in only]
    if args.skip_slow:
        cases = [c for c in cases if c["model"] not in SLOW_MODELS]
    if not cases:
        sys.exit("make_fixtures: nothing to do")

    for model in sorted({c["model"] for c in cases}):
        ensure_model(model)

    start = time.time()
    if args.jobs <= 1:
        for case in cases:
            print(f"make_fixtures: {case['name']}", file=sys.stderr, flush=True)
            name, secs = run_case(case, 0)
            print(f"make_fixtures: {name} done in {secs:.1f} s", file=sys.stderr, flush=True)
    else:
        # Slowest first, so the parallel run ends sooner.
        cases = sorted(cases, key=lambda c: (c["model"] not in SLOW_MODELS, -len(c["text"])))
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_case, c, 1) for c in cases]
            for fut in as_completed(futures):
                name, secs = fut.result()
                print(f"make_fixtures: {name} done in {secs:.1f} s", file=sys.stderr, flush=True)
    print(f"make_fixtures: {len(cases)} case(s) in {time.time() - start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
