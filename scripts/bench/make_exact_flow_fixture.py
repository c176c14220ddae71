#!/usr/bin/env python3
"""Writes tests/fixtures/flow_exact.json: a seeded random Â with peaked rows (L = 5, n = 16;
softmax of N(0, 20²) logits, residual 0.5, rows renormalised), whose narrowest arcs lie far
below 1e-14, and the exact maximum flow from every node (l, i) to every input token (0, j),
found by exact_flow.py's Dinic on integers (no rounding, no zero threshold) and rounded once
to f64. The script checks that the narrow arcs matter: leaving out those at or below 1e-14
moves some flow by more than 1e-12 of itself. Run in the reference venv:
  .venv-reference/bin/python scripts/bench/make_exact_flow_fixture.py
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from exact_flow import exact_max_flow  # noqa: E402

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
layers, n, seed = 5, 16, 31
rng = np.random.default_rng(seed)
logits = rng.normal(0.0, 20.0, size=(layers, n, n))
att = np.exp(logits - logits.max(axis=2, keepdims=True))
att /= att.sum(axis=2, keepdims=True)
aug = 0.5 * att + 0.5 * np.eye(n)
aug /= aug.sum(axis=2, keepdims=True)


def flow(l, i, j, zero=0.0):
    if l == 1:
        return float(aug[0][i][j]) if aug[0][i][j] > zero else 0.0
    return exact_max_flow(aug, l, i, j, zero)


flows = [[[float(flow(l, i, j)) for j in range(n)] for i in range(n)] for l in range(1, layers + 1)]


def moved(zero):
    """How far leaving out the arcs at or below `zero` moves a flow, relative (every fifth
    source of layers 3 and up)."""
    return max(
        abs(float(flow(l, i, j, zero)) / flows[l - 1][i][j] - 1)
        for l in range(3, layers + 1)
        for i in range(0, n, 5)
        for j in range(n)
    )


share = ((aug > 0) & (aug <= 1e-14)).mean()
old_zero, new_zero = moved(1e-14), moved(1e-20)
print(f"arcs at or below 1e-14: {share:.1%}; leaving them out moves a flow by up to {old_zero:.1e}, "
      f"those at or below 1e-20 by {new_zero:.1e}", file=sys.stderr)
assert old_zero > 1e-12, "the fixture's narrow arcs must matter"
out = os.path.join(repo, "tests", "fixtures", "flow_exact.json")
with open(out, "w") as f:
    json.dump({"note": "scripts/bench/make_exact_flow_fixture.py; max_flow[l][i][j] from (l+1, i) to (0, j), exact, rounded once",
               "augmented": aug.tolist(), "max_flow": flows}, f)
    f.write("\n")
print(f"wrote {out}", file=sys.stderr)
