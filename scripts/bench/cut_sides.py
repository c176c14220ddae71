#!/usr/bin/env python3
"""Would a peaked flow be cheaper to search if the search stopped at the sink's side of the
cut? Two hypotheses of issue 31's eleventh session, measured on a plain Dinic's step counts.

For a stack made by peaked_flow.py (float32 [L, H, n, n]; the first LAYERS layers, heads
averaged, 0.5 A + 0.5 I as bert-explain builds the graph), from (LAYERS, SOURCE) to (0, sink)
for each sink given, the same textbook Dinic (breadth-first levels, then a depth-first
blocking flow with a cursor per node that pushes what it received into as many arcs as it
takes; residuals at or below 1e-15 are zero) solves three problems:

- plain: the flow into (0, sink), as bert-explain defines it;
- column: the flow into any node (k, sink) below the source's layer, with those nodes' arcs
  down removed. It is never below the plain flow, and equals it when the amounts it delivers
  into the column can go straight down (each straight arc carries at least α); `ok` says
  whether they can on this problem. If most of a peaked cut's tiny arcs led into the sink's
  own column, each would end its path at once, and the search would take far fewer steps;
- split: the minimum cut is taken from the plain search (what its last breadth-first search
  reaches), and the flow is found in two parts: first into the cut's sink side (its nodes are
  sinks, their arcs down removed), then from the amounts each sink-side node received (a
  super-source) into (0, sink) over the sink side's own arcs. This is the best any method that
  stopped at the cut and routed the rest later could do with this search; `routed` must equal
  the plain flow.

Counted: arcs the depth-first searches examine, arcs the breadth-first searches examine,
and the amounts that reach a sink (a path's end each). Pure Python: 6 layers at n = 128 take
under ten seconds a sink.

    .venv-reference/bin/python scripts/bench/cut_sides.py STACK.npy LAYERS SOURCE SINK[,...]
"""

import collections
import sys

import numpy as np

ZERO = 1e-15


class Network:
    """Arcs in pairs (forward, reverse) over nodes `k * n + i`, plus one spare node."""

    def __init__(self, nodes):
        self.head = []
        self.residual = []
        self.out = [[] for _ in range(nodes)]

    def arc(self, u, v, capacity):
        self.out[u].append(len(self.head))
        self.head.append(v)
        self.residual.append(capacity)
        self.out[v].append(len(self.head))
        self.head.append(u)
        self.residual.append(0.0)


def layered(layers, n, keep=lambda u, v: True, turned=False):
    """The attention graph: `(k, i) → (k - 1, j)` of capacity `layers[k - 1][i][j]`, or with
    every arc turned round, `(k - 1, j) → (k, i)`."""
    net = Network((len(layers) + 1) * n + 1)
    for k in range(1, len(layers) + 1):
        for i in range(n):
            for j in range(n):
                u, v = k * n + i, (k - 1) * n + j
                if keep(u, v):
                    net.arc(*((v, u) if turned else (u, v)), layers[k - 1][i][j])
    return net


def counts():
    """What a search counts, all at zero."""
    return {"dfs": 0, "bfs": 0, "amounts": 0, "phases": 0}


def dinic(net, source, is_sink, usable=ZERO, count=None):
    """The maximum flow's value, the counts, and the levels of the last breadth-first search.
    Only residuals above `usable` are used (ZERO: all of them); `count`, if given, is added to."""
    count = count if count is not None else counts()
    residual, head, out = net.residual, net.head, net.out
    total = 0.0
    while True:
        level = [-1] * len(out)
        level[source] = 0
        queue = collections.deque([source])
        reached = False
        while queue:
            u = queue.popleft()
            if is_sink(u):
                reached = True
                continue
            for e in out[u]:
                count["bfs"] += 1
                if residual[e] > usable and level[head[e]] < 0:
                    level[head[e]] = level[u] + 1
                    queue.append(head[e])
        if not reached:
            return total, count, level
        count["phases"] += 1
        cursor = [0] * len(out)

        def push(u, limit):
            if is_sink(u):
                count["amounts"] += 1
                return limit
            sent = 0.0
            arcs = out[u]
            while cursor[u] < len(arcs) and limit - sent > ZERO:
                e = arcs[cursor[u]]
                count["dfs"] += 1
                v = head[e]
                got = 0.0
                if residual[e] > usable and level[v] == level[u] + 1:
                    got = push(v, min(residual[e], limit - sent))
                    residual[e] -= got
                    residual[e ^ 1] += got
                    sent += got
                if residual[e] <= usable or got <= 0.0:
                    cursor[u] += 1
            return sent

        while (got := push(source, 2.0)) > ZERO:
            total += got


def problem(argv):
    """`STACK.npy LAYERS SOURCE SINK[,...]`: the first LAYERS layers as bert-explain builds
    the graph (heads averaged, 0.5 A + 0.5 I), as lists of rows, with n, the layer count, the
    source's position and the sinks."""
    path, layer_count, position = argv[1], int(argv[2]), int(argv[3])
    stack = np.load(path, mmap_mode="r")
    n = stack.shape[-1]
    layers = [(0.5 * np.asarray(stack[k], dtype=np.float64).mean(axis=0) + 0.5 * np.eye(n)).tolist()
              for k in range(layer_count)]
    return layers, n, layer_count, position, [int(s) for s in argv[4].split(",")]


def main():
    layers, n, layer_count, position, sinks = problem(sys.argv)
    source = layer_count * n + position
    spare = (layer_count + 1) * n
    print("| sink | flow | plain: dfs, bfs, amounts | column: dfs, bfs, amounts, ok | "
          "split, to the cut: dfs, bfs, amounts | split, on from it: dfs, bfs, amounts | "
          "split over plain (dfs + bfs) |")
    print("|---|---|---|---|---|---|---|")
    for sink in sinks:
        plain, p, level = dinic(layered(layers, n), source, lambda u: u == sink)
        in_column = lambda u: u % n == sink and u < layer_count * n
        column_net = layered(layers, n, keep=lambda u, v: not in_column(u))
        column, c, _ = dinic(column_net, source, in_column)
        straight = True
        below = 0.0
        for k in range(layer_count - 1, 0, -1):
            below += sum(column_net.residual[e] for e in column_net.out[k * n + sink] if e % 2)
            straight &= below <= layers[k - 1][sink][sink] + ZERO
        source_side = [x >= 0 for x in level]
        cut_net = layered(layers, n, keep=lambda u, v: source_side[u])
        to_cut, a, _ = dinic(cut_net, source, lambda u: not source_side[u])
        received = collections.Counter()
        for u, arcs in enumerate(cut_net.out):
            for e in arcs:
                if e % 2 == 0 and source_side[u] and not source_side[cut_net.head[e]]:
                    received[cut_net.head[e]] += cut_net.residual[e ^ 1]
        rest = layered(layers, n, keep=lambda u, v: not source_side[u] and not source_side[v])
        for node, amount in received.items():
            if node != sink:
                rest.arc(spare, node, amount)
        routed, b, _ = dinic(rest, spare, lambda u: u == sink)
        routed += received.get(sink, 0.0)
        assert abs(column - plain) <= 1e-12 * plain or not straight, (column, plain)
        assert abs(to_cut - plain) <= 1e-12 * plain and abs(routed - plain) <= 1e-12 * plain
        ratio = (a["dfs"] + a["bfs"] + b["dfs"] + b["bfs"]) / (p["dfs"] + p["bfs"])
        print(f"| {sink} | {plain:.6g} | {p['dfs']:,}, {p['bfs']:,}, {p['amounts']:,} | "
              f"{c['dfs']:,}, {c['bfs']:,}, {c['amounts']:,}, {'yes' if straight else 'no'} | "
              f"{a['dfs']:,}, {a['bfs']:,}, {a['amounts']:,} | "
              f"{b['dfs']:,}, {b['bfs']:,}, {b['amounts']:,} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
