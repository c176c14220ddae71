#!/usr/bin/env python3
"""Writes tests/fixtures/deberta-buckets.json: transformers' DeBERTa-v2 log buckets
(`make_log_bucket_position`, float32 as it computes them) of every relative position from
−2047 to 2047, for the bucket settings real checkpoints have (deberta-v3-*: 256 buckets up to
512 positions) and a few others, so that bert-explain's buckets are checked edge by edge.

Usage: .venv-reference/bin/python scripts/reference/make_deberta_buckets.py
"""

import json
import os

import torch
from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SETTINGS = [(256, 512), (256, 1024), (128, 512), (8, 64), (64, 2048)]


def main():
    deltas = torch.arange(-2047, 2048)
    cases = [{"buckets": b, "max_relative": m,
              "positions": make_log_bucket_position(deltas, b, m).to(torch.long).tolist()}
             for b, m in SETTINGS]
    out = os.path.join(REPO, "tests", "fixtures", "deberta-buckets.json")
    with open(out, "w") as f:
        json.dump({"first": -2047, "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
