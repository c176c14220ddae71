#!/usr/bin/env python3
"""Would a peaked flow be cheaper to search from the sink's end? A hypothesis of issue 31's
twelfth session, measured on a plain Dinic's step counts (`cut_sides.py`'s search).

The maximum flow from (LAYERS, SOURCE) to (0, sink) equals the one from (0, sink) to (LAYERS,
SOURCE) with every arc turned round. If a peaked flow's many small amounts came from the way the
search fans out from the source, the search from the other end would send fewer. For each sink,
both searches from no flow: arcs the depth-first and breadth-first searches examine (phases),
the amounts reaching the sink, and the turned search's examined arcs over the plain one's.

    .venv-reference/bin/python scripts/bench/reverse.py STACK.npy LAYERS SOURCE SINK[,...]
"""

import sys

from cut_sides import dinic, layered, problem


def main():
    layers, n, layer_count, position, sinks = problem(sys.argv)
    source = layer_count * n + position
    print("| sink | flow | plain: dfs + bfs (phases), amounts | turned: dfs + bfs (phases), "
          "amounts | turned over plain |")
    print("|---|---|---|---|---|")
    for sink in sinks:
        plain, p, _ = dinic(layered(layers, n), source, lambda u: u == sink)
        back, q, _ = dinic(layered(layers, n, turned=True), sink, lambda u: u == source)
        assert abs(back - plain) <= 1e-12 * plain, (back, plain)
        ratio = (q["dfs"] + q["bfs"]) / (p["dfs"] + p["bfs"])
        print(f"| {sink} | {plain:.6g} | {p['dfs']:,} + {p['bfs']:,} ({p['phases']}), "
              f"{p['amounts']:,} | {q['dfs']:,} + {q['bfs']:,} ({q['phases']}), "
              f"{q['amounts']:,} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
