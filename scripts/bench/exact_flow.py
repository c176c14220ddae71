#!/usr/bin/env python3
"""Exact attention flow for one row of a map (issue 31, item 4): how far each engine's values
lie from the exact maximum flows, where the two engines disagree most.

The graph is the stack's fused, residual-augmented layers (heads averaged, 0.5 A + 0.5 I,
rows renormalised: SPEC §1) in f64, as other_maxflow.py builds it. Every f64 capacity is a
whole multiple of 2^-E for one E, so every arc above zero is scaled by 2^E to a Python
integer and Dinic's algorithm runs on integers: no rounding anywhere, and no
threshold under which a residual counts as zero. The maximum flows from (LAYER, POSITION)
into every sink, normalised with exact fractions, are then compared with the JSON maps that
the engines wrote (`bert-explain --attention STACK --target POSITION --json > FILE`).

    .venv-reference/bin/python scripts/bench/exact_flow.py [--zero EPS] STACK.npy LAYER POSITION
        ENGINE.json...

--zero EPS: leave out the arcs of capacity at or below EPS (as an engine that counts them as
zero does), to tell apart what that costs from what the search's own rounding does.

Prints, per engine, the largest difference from the exact row: relative to the exact entry,
relative to the row's largest entry, and absolute (where, and the entry's value); and how many
entries it gives where the exact flow is 0. numpy's
fusion may differ from an engine's in the last bits of a capacity (another order of sums):
capacities changed by at most r, relative, change every maximum flow by at most r, relative
(the flow scaled by 1 - r is still a flow; the cut's capacity grows by at most r), so a few
units in the last place stay far below the differences looked for here.
"""

import json
import sys
from collections import deque
from fractions import Fraction

import numpy as np

from attention_graphs import fused


class Network:
    """A residual network on integer capacities: arc `e` and its reverse `e ^ 1`."""

    def __init__(self, nodes):
        self.out = [[] for _ in range(nodes)]
        self.head, self.residual = [], []

    def arc(self, tail, head, capacity):
        self.out[tail].append(len(self.head))
        self.out[head].append(len(self.head) + 1)
        self.head += [head, tail]
        self.residual += [capacity, 0]

    def levels(self, source):
        level = [-1] * len(self.out)
        level[source] = 0
        queue = deque([source])
        while queue:
            u = queue.popleft()
            for e in self.out[u]:
                v = self.head[e]
                if self.residual[e] > 0 and level[v] < 0:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level

    def max_flow(self, source, sink):
        """Dinic's algorithm, iterative; returns the flow's value, exact."""
        total = 0
        while True:
            level = self.levels(source)
            if level[sink] < 0:
                return total
            cursor = [0] * len(self.out)
            while True:
                path, u = [], source
                while u != sink:
                    arcs = self.out[u]
                    while cursor[u] < len(arcs):
                        e = arcs[cursor[u]]
                        v = self.head[e]
                        if self.residual[e] > 0 and level[v] == level[u] + 1:
                            break
                        cursor[u] += 1
                    if cursor[u] == len(arcs):
                        if u == source:
                            break
                        level[u] = -1  # a dead end for the rest of the phase
                        u = self.head[path.pop() ^ 1]
                        continue
                    path.append(arcs[cursor[u]])
                    u = self.head[arcs[cursor[u]]]
                if u != sink:
                    break
                amount = min(self.residual[e] for e in path)
                for e in path:
                    self.residual[e] -= amount
                    self.residual[e ^ 1] += amount
                total += amount


def exact_max_flow(layers, layer, position, sink, zero=0.0):
    """The exact maximum flow from (layer, position) into (0, sink), a Fraction; arcs at or
    below `zero` left out."""
    n = layers.shape[1]
    positive = layers[:layer][layers[:layer] > 0]
    shift = max(-int(np.frexp(c)[1]) + 53 for c in positive.ravel())
    scale = 1 << shift

    def whole(c):
        num, den = float(c).as_integer_ratio()
        assert scale % den == 0
        return num * (scale // den)

    # Node (k, i) is k * n + i; of layer 0 only the sink has arcs.
    net = Network((layer + 1) * n)
    for k in range(layer - 1, 0, -1):
        rows = [position] if k == layer - 1 else range(n)
        for i in rows:
            for j in range(n):
                if layers[k][i][j] > zero:
                    net.arc((k + 1) * n + i, k * n + j, whole(layers[k][i][j]))
    for i in range(n):
        if layers[0][i][sink] > zero:
            net.arc(n + i, sink, whole(layers[0][i][sink]))
    return Fraction(net.max_flow(layer * n + position, sink), scale)


def exact_row(layers, layer, position, zero=0.0):
    """Exact maximum flows from (layer, position) into every sink, as Fractions."""
    flows = []
    for sink in range(layers.shape[1]):
        if layer == 1:
            flows.append(Fraction(float(layers[0][position][sink]) if layers[0][position][sink] > zero else 0))
        else:
            flows.append(exact_max_flow(layers, layer, position, sink, zero))
        print(f"sink {sink}: {float(flows[-1]):.17e}", file=sys.stderr, flush=True)
    return flows


def main():
    zero = 0.0
    if len(sys.argv) > 2 and sys.argv[1] == "--zero":
        zero = float(sys.argv[2])
        del sys.argv[1:3]
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    stack, layer, position = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    layers = fused(stack)
    flows = exact_row(layers, layer, position, zero)
    total = sum(flows)
    exact = [f / total for f in flows]
    top = max(exact)
    print(f"{stack}, from ({layer}, {position}); exact row largest {float(top):.6e}, smallest {float(min(exact)):.6e}")
    print()
    print("| engine | to the entry | where (sink, exact value) | to the row's largest | absolute "
          "| not 0 where the exact flow is |")
    print("|---|---|---|---|---|---|")
    for path in sys.argv[4:]:
        with open(path) as f:
            row = json.load(f)["relevance"]["flow"][layer - 1]
        diffs = [abs(Fraction(v) - e) for v, e in zip(row, exact)]
        worst = max(range(len(diffs)), key=lambda j: diffs[j] / exact[j] if exact[j] else 0)
        print(
            f"| {path} | {float(diffs[worst] / exact[worst]):.1e} "
            f"| {worst}, {float(exact[worst]):.3e} | {float(max(diffs) / top):.1e} "
            f"| {float(max(diffs)):.1e} "
            f"| {sum(1 for d, e in zip(diffs, exact) if e == 0 and d != 0)} of {exact.count(0)} |"
        )


if __name__ == "__main__":
    main()
