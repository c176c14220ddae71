#!/usr/bin/env python3
"""Regenerate tests/fixtures/families/ from tests/fixtures/families/cases.json with
family_reference.py (the encoder families and task heads of SPEC §7), and optionally compare
bert-explain's output with them.

Each case is {"name", "model", "text", "pair" (optional), "target" (null or an index),
"candidates" (masked LM; empty for other heads), "top_k", "label" (optional), "blank" (optional,
unk or mask)}; "model" is a folder under models/ (make_family_models.py). Writes

  tests/fixtures/families/<name>.json             the report (SPEC §4 + "family", "task")
  tests/fixtures/families/attention/<name>.json   the float32 attention probabilities (L×H×n×n)
  tests/fixtures/families/importance/<name>.json  for cases with a "label": importance scores of
                                                  that label (name or id) and their correlations,
                                                  as tests/fixtures/importance/ for masked LMs

Usage (with the reference venv's python):
  make_family_fixtures.py                      every case
  make_family_fixtures.py --only NAME[,NAME]   some cases
  make_family_fixtures.py --check BINARY       also run BINARY --json on every case and compare
                                               every probability and relevance (1e-5) and
                                               importance score (1e-4); exit 1 on a difference
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures", "families")
sys.path.insert(0, HERE)

TOLERANCE = 1e-5
IMPORTANCE_TOLERANCE = 1e-4


def write(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


def generate(case, checkpoints):
    import family_reference as fam
    import importance as importance_ref

    folder = os.path.join(REPO, "models", case["model"])
    if case["model"] not in checkpoints:
        checkpoints[case["model"]] = fam.Checkpoint(folder)
    ck = checkpoints[case["model"]]
    name = case["name"]
    os.makedirs(os.path.join(FIXTURES, "attention"), exist_ok=True)
    report = fam.run(folder, case["text"], case.get("pair"), case.get("target"), case.get("candidates", []),
                     case.get("top_k", 5), os.path.join(FIXTURES, "attention", name + ".json"), ck)
    write(os.path.join(FIXTURES, name + ".json"), report)
    if "label" in case:
        blank = case.get("blank", "unk")
        scores = fam.importance(folder, case["text"], case.get("pair"), case.get("target"), None,
                                case["label"], blank, ck)
        write(os.path.join(FIXTURES, "importance", name + ".json"),
              {"name": name, "case": name, "word": None, "label": case["label"], "blank": blank,
               "text": case["text"], "pair": case.get("pair"), "model": case["model"],
               "target": case.get("target"), "importance": scores,
               "evaluation": importance_ref.evaluation(report, scores)})


def rust_command(binary, case, evaluate=False):
    cmd = [binary, "--json", "--model", os.path.join("models", case["model"])]
    if case.get("candidates"):
        cmd += ["--candidates", ",".join(case["candidates"]), "--top-k", str(case.get("top_k", 5))]
    if case.get("pair") is not None:
        cmd += ["--pair", case["pair"]]
    if case.get("target") is not None:
        cmd += ["--target", str(case["target"])]
    if evaluate:
        cmd += ["--evaluate", "--label", case["label"], "--blank", case.get("blank", "unk")]
    return cmd + [case["text"]]


def differences(want, got, tolerance, path=""):
    """Every place where two JSON values differ (numbers: by more than tolerance)."""
    if isinstance(want, bool) or isinstance(got, bool) or want is None or got is None:
        return [] if want == got else [f"{path}: {got!r} vs reference {want!r}"]
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return [] if abs(want - got) <= tolerance else [f"{path}: {got!r} vs reference {want!r} ({abs(want - got):.1e})"]
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: length {len(got)} vs reference {len(want)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, tolerance, f"{path}[{i}]")]
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in want:
            if key not in got:
                out.append(f"{path}.{key}: missing")
            else:
                out += differences(want[key], got[key], tolerance, f"{path}.{key}")
        return out
    return [] if want == got else [f"{path}: {got!r} vs reference {want!r}"]


def check(binary, case):
    """Differences between bert-explain and the stored fixtures of one case."""
    name = case["name"]
    problems = []

    def run(evaluate):
        proc = subprocess.run(rust_command(binary, case, evaluate), cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            problems.append(f"exit {proc.returncode}: {proc.stderr.strip()}")
            return None
        return json.loads(proc.stdout)

    got = run(False)
    if got is not None:
        with open(os.path.join(FIXTURES, name + ".json")) as f:
            want = json.load(f)
        for key in ("family", "task", "tokens", "target", "prediction", "layers", "heads", "relevance"):
            problems += differences(want.get(key), got.get(key), TOLERANCE, key)
    if "label" in case:
        got = run(True)
        if got is not None:
            with open(os.path.join(FIXTURES, "importance", name + ".json")) as f:
                want = json.load(f)
            problems += differences(want["importance"], got.get("importance"), IMPORTANCE_TOLERANCE, "importance")
            problems += differences(want["evaluation"], got.get("evaluation"), 1e-9, "evaluation")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=os.path.join(FIXTURES, "cases.json"))
    ap.add_argument("--only", action="append", default=[], help="case name(s)")
    ap.add_argument("--check", metavar="BINARY", default=None, help="compare bert-explain's output (no regeneration)")
    args = ap.parse_args()
    with open(args.cases) as f:
        cases = json.load(f)
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        sys.exit("duplicate case names")
    only = {n.strip() for group in args.only for n in group.split(",") if n.strip()}
    if only - set(names):
        sys.exit(f"unknown case(s) {sorted(only - set(names))}")
    cases = [c for c in cases if not only or c["name"] in only]

    if args.check:
        binary = os.path.abspath(args.check)
        failed = 0
        for case in cases:
            problems = check(binary, case)
            status = "ok" if not problems else f"{len(problems)} difference(s)"
            print(f"{case['name']}: {status}")
            for p in problems[:8]:
                print(f"    {p}")
            failed += bool(problems)
        print(f"{len(cases) - failed}/{len(cases)} cases agree")
        sys.exit(1 if failed else 0)

    checkpoints = {}
    for case in cases:
        print(f"make_family_fixtures: {case['name']}", file=sys.stderr, flush=True)
        generate(case, checkpoints)


if __name__ == "__main__":
    main()
