#!/usr/bin/env python3
"""Would a peaked flow be cheaper to search with its capacities scaled? A hypothesis of issue
31's twelfth session, measured on a plain Dinic's step counts (`cut_sides.py`'s search).

A peaked search sends many small amounts that later phases reroute. Capacity scaling sends
the large amounts first: the same Dinic runs with only residuals above δ usable, for
δ = 1/FACTOR, 1/FACTOR², … down to the search's zero, each δ's search starting from the flow
the last one left. Each amount then carries at least δ, and the narrow arcs are used only
once the wide ones are full. For each sink, from (LAYERS, SOURCE) to (0, sink) as bert-explain
builds the graph, the plain search and the scaled one for each FACTOR: arcs the depth-first and
breadth-first searches examine, and the amounts reaching the sink.

    .venv-reference/bin/python scripts/bench/scaling.py STACK.npy LAYERS SOURCE SINK[,...] FACTOR[,...]
"""

import sys

from cut_sides import ZERO, counts, dinic, layered, problem


def scaled(layers, n, source, sink, factor):
    """The flow with δ falling by `factor` from 1/factor to the zero, and the summed counts."""
    net = layered(layers, n)
    count = counts()
    total, delta = 0.0, 1.0 / factor
    while True:
        total += dinic(net, source, lambda u: u == sink, max(delta, ZERO), count)[0]
        if delta <= ZERO:
            return total, count
        delta /= factor


def main():
    layers, n, layer_count, position, sinks = problem(sys.argv)
    factors = [float(f) for f in sys.argv[5].split(",")]
    source = layer_count * n + position
    print("| sink | flow | plain: dfs + bfs (phases), amounts | "
          + " | ".join(f"δ ÷ {f:g}: dfs + bfs (phases), amounts, over plain" for f in factors)
          + " |")
    print("|---|---|---|" + "---|" * len(factors))
    for sink in sinks:
        plain, p, _ = dinic(layered(layers, n), source, lambda u: u == sink)
        cells = []
        for factor in factors:
            flow, c = scaled(layers, n, source, sink, factor)
            assert abs(flow - plain) <= 1e-12 * plain, (flow, plain)
            steps = c["dfs"] + c["bfs"]
            cells.append(f"{c['dfs']:,} + {c['bfs']:,} ({c['phases']}), {c['amounts']:,}, "
                         f"{steps / (p['dfs'] + p['bfs']):.2f}")
        print(f"| {sink} | {plain:.6g} | {p['dfs']:,} + {p['bfs']:,} ({p['phases']}), {p['amounts']:,} | "
              + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
