#!/usr/bin/env python3
"""How much of a minimum cut is new from one problem to the next (issue 31, eleventh session).

A search that starts from an earlier problem's maximum flow (bert-explain's climb starts each
layer's search from the layer below's) must still fill every arc of the new minimum cut that the
earlier flow left with room, and an augmenting path fills at most one of them unless it crosses
the cut more than once (back across it and forward again; not counted here). So those arcs are,
less such paths, a floor on the amounts such a search sends into the sink. For a stack made by peaked_flow.py (the
first LAYERS layers, heads averaged, 0.5 A + 0.5 I), each sink given and l = 3 .. LAYERS, the
problem from (l, SOURCE) is set beside the one from (l - 1, SOURCE) into the same sink, solved by
cut_sides.py's Dinic. Printed per problem: the flow, the arcs the cut crosses (capacity above
1e-15), how many of them the earlier flow left with room (more than 1e-15) and how many are on
the new layer; then the same Dinic's amounts reaching the sink and arcs examined, started from
the earlier flow (kept on the layers both problems share and fed down the new straight arc) and
from no flow. Where the new straight arc cannot carry the earlier flow, the row has only the
search from no flow, and the next layer starts from its flow.

    .venv-reference/bin/python scripts/bench/cut_changes.py STACK.npy LAYERS SOURCE SINK[,...]
"""

import sys

from cut_sides import ZERO, dinic, layered, problem


def cut_arcs(net, level, layer_count, n):
    """The arcs (their indices) from the last search's reached nodes to the others."""
    found = []
    for k in range(1, layer_count + 1):
        for i in range(n):
            u = k * n + i
            if level[u] < 0:
                continue
            for j in range(n):
                e = 2 * ((k - 1) * n * n + i * n + j)
                if level[(k - 1) * n + j] < 0 and net.residual[e] + net.residual[e ^ 1] > ZERO:
                    found.append(e)
    return found


def compare(old_residual, net, level, layer_count, n):
    """The cut's arcs, those left with room by the earlier flow on the shared layers, and those
    on layers the earlier problem did not have."""
    arcs = cut_arcs(net, level, layer_count, n)
    shared = [e for e in arcs if e < len(old_residual)]
    room = sum(1 for e in shared if old_residual[e] > ZERO)
    return len(arcs), room, len(arcs) - len(shared)


def main():
    layers, n, layer_count, position, sinks = problem(sys.argv)
    print("| sink | layer | flow | cut arcs | of them with room under the earlier flow | "
          "on the new layer | warm: amounts, dfs + bfs | cold: amounts, dfs + bfs |")
    print("|---|---|---|---|---|---|---|---|")
    for sink in sinks:
        before = None
        for top in range(2, layer_count + 1):
            source = top * n + position
            net = layered(layers[:top], n)
            flow, cold, level = dinic(net, source, lambda u: u == sink)
            warm = layered(layers[:top], n)
            fits = False
            if before is not None:
                below, old = before
                warm.residual[: len(old)] = old
                straight = 2 * ((top - 1) * n * n + position * n + position)
                fits = below <= warm.residual[straight]
                warm.residual[straight] -= below
                warm.residual[straight ^ 1] += below
            if not fits:
                # No earlier flow, or one the new straight arc cannot carry (the engine then
                # reroutes it): the next layer starts from this one's flow from nothing.
                print(f"| {sink} | {top} | {flow:.6g} | - | - | - | - | "
                      f"{cold['amounts']:,}, {cold['dfs'] + cold['bfs']:,} |", flush=True)
                before = (flow, net.residual)
                continue
            found, hot, _ = dinic(warm, source, lambda u: u == sink)
            found += below
            assert abs(found - flow) <= 1e-12 * flow, (found, flow)
            cut, room, new = compare(old, net, level, top, n)
            print(f"| {sink} | {top} | {flow:.6g} | {cut:,} | {room:,} | {new:,} | "
                  f"{hot['amounts']:,}, {hot['dfs'] + hot['bfs']:,} | "
                  f"{cold['amounts']:,}, {cold['dfs'] + cold['bfs']:,} |", flush=True)
            before = (found, warm.residual)


if __name__ == "__main__":
    main()
