#!/usr/bin/env python3
"""Writes tests/fixtures/flow_networkx.json: a seeded random Â (L = 4, n = 9) and networkx
edmonds_karp's maximum flow from every node (l, i) to every input token (0, j), the
reference's compute_flows before normalisation. Run in the reference venv:
  .venv-reference/bin/python scripts/bench/make_flow_fixture.py
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_graphs import attention_stack, augment, networkx_max_flows  # noqa: E402

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
layers, heads, n, seed = 4, 3, 9, 2020
aug = augment(attention_stack(layers, heads, n, seed))
flows = networkx_max_flows(aug, list(range(n)))
out = os.path.join(repo, "tests", "fixtures", "flow_networkx.json")
with open(out, "w") as f:
    json.dump({"note": "scripts/bench/make_flow_fixture.py; max_flow[l][i][j] from (l+1, i) to (0, j)",
               "augmented": aug.tolist(), "max_flow": flows.tolist()}, f)
    f.write("\n")
print(f"wrote {out}", file=sys.stderr)
