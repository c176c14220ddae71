#!/usr/bin/env python3
"""Sanity checks for tests/fixtures (run after make_fixtures.py, with the reference venv).

For every case in cases.json: the fixture exists and has the SPEC §4 shape; raw/rollout/flow
are L×n with entries in [0, 1] and rows summing to 1; flow and rollout agree on layer 1 (where
they must be equal). Where tests/fixtures/attention/<name>.json exists, raw and rollout are
recomputed from it and flow is recomputed with a different max-flow algorithm (networkx
preflow_push) as a cross-check. Also prints how peaked the attention is.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
KEYS = ["model", "device", "tokens", "target", "prediction", "layers", "heads", "relevance"]


def flow_preflow(aug, t):
    import networkx as nx
    from networkx.algorithms.flow import preflow_push

    L, n, _ = aug.shape
    G = nx.DiGraph()
    for l in range(1, L + 1):
        for i in range(n):
            for j in range(n):
                G.add_edge((l, i), (l - 1, j), capacity=float(aug[l - 1][i][j]))
    F = np.array([[nx.maximum_flow_value(G, (l, t), (0, j), flow_func=preflow_push) for j in range(n)]
                  for l in range(1, L + 1)])
    return F / F.sum(axis=1, keepdims=True)


def main():
    with open(os.path.join(FIXTURES, "cases.json")) as f:
        cases = json.load(f)
    problems = []
    for case in cases:
        name = case["name"]
        path = os.path.join(FIXTURES, name + ".json")
        if not os.path.isfile(path):
            problems.append(f"{name}: missing {path}")
            continue
        with open(path) as f:
            r = json.load(f)
        if list(r) != KEYS:
            problems.append(f"{name}: keys {list(r)}")
        n, L = len(r["tokens"]), r["layers"]
        t = r["target"]["index"]
        if case.get("target") is not None and t != case["target"]:
            problems.append(f"{name}: target {t} != {case['target']}")
        if r["tokens"][0] != "[CLS]" or r["tokens"][-1] != "[SEP]" or "[PAD]" in r["tokens"]:
            problems.append(f"{name}: odd tokens {r['tokens']}")
        rel = {k: np.array(v) for k, v in r["relevance"].items()}
        for k, v in rel.items():
            if v.shape != (L, n):
                problems.append(f"{name}: {k} shape {v.shape} != {(L, n)}")
                continue
            if v.min() < 0 or v.max() > 1 + 1e-12:
                problems.append(f"{name}: {k} out of [0, 1]")
            err = np.abs(v.sum(axis=1) - 1).max()
            if err > 1e-6:
                problems.append(f"{name}: {k} rows sum off by {err}")
        if np.abs(rel["flow"][0] - rel["rollout"][0]).max() > 1e-12:
            problems.append(f"{name}: layer-1 flow != layer-1 rollout")
        pred = r["prediction"]
        has_head = case["model"] in ("tiny-bert-legacy", "tiny-bert-modern")
        if has_head != (pred is not None):
            problems.append(f"{name}: prediction {'missing' if has_head else 'present'}")
        extra = ""
        if pred:
            probs = [c["probability"] for c in pred["top"]]
            if probs != sorted(probs, reverse=True) or len(probs) != case.get("top_k", 5):
                problems.append(f"{name}: top list not sorted or wrong length")
            extra = (" top " + ", ".join(f"{c['word']}={c['probability']:.3f}" for c in pred["top"][:3])
                     + " | " + ", ".join(f"p({c['word']})={c['probability']:.2e}" for c in pred["candidates"]))
        att_path = os.path.join(FIXTURES, "attention", name + ".json")
        peak = ""
        if os.path.isfile(att_path):
            with open(att_path) as f:
                att = np.array(json.load(f)["attention"], dtype=np.float64)
            mean = att.mean(axis=1)
            aug = mean + np.eye(n)
            aug /= aug.sum(axis=-1, keepdims=True)
            roll, joint = [], None
            for l in range(L):
                joint = aug[l] if joint is None else aug[l] @ joint
                roll.append(joint[t])
            d_raw = np.abs(mean[:, t, :] - rel["raw"]).max()
            d_roll = np.abs(np.array(roll) - rel["rollout"]).max()
            d_flow = np.abs(flow_preflow(aug, t) - rel["flow"]).max()
            if max(d_raw, d_roll) > 1e-12 or d_flow > 1e-9:
                problems.append(f"{name}: recomputation differs raw {d_raw} rollout {d_roll} flow {d_flow}")
            peak = (f" head max/row mean {att.max(-1).mean():.2f}, fused max/row mean {mean.max(-1).mean():.2f},"
                    f" preflow diff {d_flow:.1e}")
        print(f"{name}: n={n} L={L} t={t}{peak}{extra}")
    if problems:
        print("\n".join(["PROBLEMS:"] + problems))
        sys.exit(1)
    print(f"all {len(cases)} fixtures OK")


if __name__ == "__main__":
    main()
