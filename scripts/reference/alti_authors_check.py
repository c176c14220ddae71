#!/usr/bin/env python3
"""bert-explain's ALTI against its authors' own code (mt-upc/transformer-contributions, not
vendored here: give the path of a checkout with its src/).

Runs the authors' ModelWrapper on a checkpoint and a text, normalises their contributions as
their evaluation does (`min_sum` with the resultants' L1 norms: clip(−d_ij + ‖y_i‖₁, 0), each row
summed to 1), and compares the target's row at every layer with bert-explain's
`methods.alti.layer` (`--json --mixing alti`). Twice: with torch's pairwise_distance as their code
calls it (eps = 1e-6 added to every coordinate) and with eps = 0, SPEC §8's reading.

Usage (the reference venv, which has torch, transformers, captum and PyYAML):
  .venv-reference/bin/python scripts/reference/alti_authors_check.py --repo DIR
      [--model models/tiny-bert-cls] [--text "..."] [--binary target/release/bert-explain]
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import types

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def authors_rows(repo, model_dir, text, eps):
    import torch
    import torch.nn.functional as F
    import yaml
    from transformers import AutoModelForSequenceClassification, AutoModelForMaskedLM, AutoTokenizer

    # Their module reads ./src/config.yaml through pyaml_env at import: a stand-in with PyYAML.
    sys.modules.setdefault("pyaml_env", types.SimpleNamespace(
        parse_config=lambda path: yaml.safe_load(open(os.path.join(repo, path)))))
    sys.path.insert(0, repo)
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        from src import contributions
    finally:
        os.chdir(cwd)
    tok = AutoTokenizer.from_pretrained(model_dir)
    config = json.load(open(os.path.join(model_dir, "config.json")))
    auto = AutoModelForMaskedLM if "ForMaskedLM" in config["architectures"][0] else AutoModelForSequenceClassification
    model = auto.from_pretrained(model_dir, attn_implementation="eager").eval()
    inputs = tok(text, return_tensors="pt")
    original = F.pairwise_distance
    contributions.F.pairwise_distance = functools.partial(original, eps=eps)
    try:
        _, _, _, data = contributions.ModelWrapper(model)(inputs)
    finally:
        contributions.F.pairwise_distance = original
    c = data["contributions"]  # [L, n, n]: −‖y_i − t_ij‖₁
    norms = data["resultants"].abs().sum(-1)  # [L, n]
    m = torch.clip(c + norms.unsqueeze(-1), min=0)
    return (m / m.sum(-1, keepdim=True)).double(), tok.convert_ids_to_tokens(inputs["input_ids"][0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True, help="a checkout of mt-upc/transformer-contributions")
    ap.add_argument("--model", default=os.path.join(REPO, "models", "tiny-bert-cls"))
    ap.add_argument("--text", default="the man gave a book to the boy .")
    ap.add_argument("--target", type=int, default=0)
    ap.add_argument("--binary", default=os.path.join(REPO, "target", "release", "bert-explain"))
    args = ap.parse_args()
    out = subprocess.run([args.binary, "--model", args.model, "--json", "--mixing", "alti", "--target",
                          str(args.target), args.text], capture_output=True, text=True, check=True)
    ours = json.loads(out.stdout)["methods"]["alti"]["layer"]
    worst = {}
    for eps in (1e-6, 0.0):
        theirs, tokens = authors_rows(os.path.abspath(args.repo), args.model, args.text, eps)
        assert tokens == json.loads(out.stdout)["tokens"], (tokens, json.loads(out.stdout)["tokens"])
        worst[eps] = max(abs(float(theirs[l, args.target, j]) - ours[l][j])
                         for l in range(len(ours)) for j in range(len(ours[l])))
    print(f"{os.path.basename(args.model)}, {len(ours)} layers, target {args.target}: largest difference of "
          f"the ALTI layer maps from the authors' code: {worst[1e-6]:.1e} as it runs (pairwise eps 1e-6), "
          f"{worst[0.0]:.1e} with eps 0")
    return 0 if worst[0.0] <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
