#!/usr/bin/env python3
"""How many arcs the minimum cuts of one position's flows cross (issue 31): the structure
that makes peaked attention slow to search.

For a stack made by peaked_flow.py (float32 [L, H, n, n]), the heads' mean with the residual
0.5 is the graph (as bert-explain builds it); for every k-th sink, scipy's Dinic finds a
maximum flow from (L, position) on capacities rounded to multiples of 2^-29, the source side
of a minimum cut is what the residual graph reaches, and the script counts the arcs of the
real capacities (above 1e-14, the engine's zero) that cross it, its capacity on the real
capacities, the nodes per layer on the source side, and how far the engine's upper bound
(bounds.rs: Σ_m min(h_1(m), Â_1[m][sink]), h carried down layer by layer) lies above it;
and a two-sided bound tried beside it (not in the engine): g carried up from the sink the
same way (g_1(i) = Â_1[i][sink], g_k(i) = Σ_j min(Â_k[i][j], g_{k-1}(j)) bounds the flow from
(k, i) into the sink), and no flow exceeds Σ_m min(h_k(m), g_k(m)) at any layer k.

    .venv-reference/bin/python scripts/bench/min_cut_arcs.py STACK.npy LAYERS POSITION [--every K]
        [--paths FILE]

--paths: lines "sink flow paths seconds" (as a temporary counter in the engine's Dinic
printed them, scripts/bench/RESULTS.md) to set the engine's augmenting paths beside each cut.
"""

import argparse

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

SCALE = 2.0**29  # scipy's capacities are int32
ZERO = 1e-14


def graph(augmented):
    layers, n, _ = augmented.shape
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    rows = np.concatenate([((k + 1) * n + i).ravel() for k in range(layers)])
    cols = np.concatenate([(k * n + j).ravel() for k in range(layers)])
    caps = np.concatenate([np.round(augmented[k] * SCALE).astype(np.int32).ravel() for k in range(layers)])
    size = (layers + 1) * n
    return csr_matrix((caps, (rows, cols)), shape=(size, size))


def upper_bounds(augmented, position):
    """bounds.rs's bound on the flow from (L, position) into every sink."""
    layers = augmented.shape[0]
    reach = augmented[layers - 1][position].copy()
    for k in range(layers - 2, -1, -1):
        reach = np.minimum(reach[:, None], augmented[k]).sum(axis=0)
    return np.minimum(reach, augmented[layers - 1][position].sum())


def two_sided_bound(augmented, reach, sink):
    """min over layers k of Σ_m min(h_k(m), g_k(m)), with `reach[k]` = h_k."""
    layers = augmented.shape[0]
    g = augmented[0][:, sink].copy()
    best = np.minimum(reach[1], g).sum()
    for k in range(2, layers):
        g = np.minimum(augmented[k - 1], g[None, :]).sum(axis=1)
        best = min(best, np.minimum(reach[k], g).sum())
    return best


def reaches(augmented, position):
    """h_k for k = L − 1 … 0: what can reach each node of layer k from (L, position)."""
    layers = augmented.shape[0]
    reach = {layers - 1: augmented[layers - 1][position].copy()}
    for k in range(layers - 2, -1, -1):
        reach[k] = np.minimum(reach[k + 1][:, None], augmented[k]).sum(axis=0)
    return reach


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stack")
    parser.add_argument("layers", type=int)
    parser.add_argument("position", type=int)
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--paths")
    args = parser.parse_args()

    fused = np.load(args.stack).astype(np.float64)[: args.layers].mean(axis=1)
    layers, n, _ = fused.shape
    augmented = 0.5 * fused + 0.5 * np.eye(n)
    augmented /= augmented.sum(axis=-1, keepdims=True)
    paths = {}
    if args.paths:
        for line in open(args.paths, encoding="utf-8"):
            sink, _, count, _ = line.split()
            paths[int(sink)] = int(count)

    g = graph(augmented)
    source = layers * n + args.position
    bounds = upper_bounds(augmented, args.position)
    reach = reaches(augmented, args.position)
    counts, found, above, both = [], [], [], []
    print("| sink | cut arcs | cut capacity | bound above it | two-sided bound above it | source side per layer, 0 … L | engine's paths |")
    print("|---|---|---|---|---|---|---|")
    for sink in range(0, n, args.every):
        result = maximum_flow(g, source, sink, method="dinic")
        side = np.zeros(g.shape[0], bool)
        side[breadth_first_order((g - result.flow) > 0, source, return_predecessors=False)] = True
        arcs, capacity = 0, 0.0
        for k in range(layers):
            block = augmented[k][np.ix_(side[(k + 1) * n : (k + 2) * n], ~side[k * n : (k + 1) * n])]
            arcs += int((block > ZERO).sum())
            capacity += block.sum()
        per_layer = [int(side[k * n : (k + 1) * n].sum()) for k in range(layers + 1)]
        counts.append(arcs)
        found.append(paths.get(sink))
        above.append(bounds[sink] / capacity - 1)
        both.append(min(bounds[sink], two_sided_bound(augmented, reach, sink)) / capacity - 1)
        print(f"| {sink} | {arcs} | {capacity:.6g} | {above[-1]:.1%} | {both[-1]:.1%} | {per_layer} "
              f"| {paths.get(sink, '-')} |")
    print(f"\nmean cut arcs {np.mean(counts):.0f}, bound above the flow: median {np.median(above):.1%}, "
          f"{min(above):.1%} to {max(above):.1%}, within 1e-6 at {sum(a <= 1e-6 for a in above)} "
          f"of {len(above)} sinks; two-sided: median {np.median(both):.1%}, {min(both):.1%} to "
          f"{max(both):.1%}, within 1e-6 at {sum(b <= 1e-6 for b in both)}", end="")
    if all(p is not None for p in found):
        ratio = np.median(np.array(found) / np.maximum(counts, 1))
        print(f", mean paths {np.mean(found):.0f}, median paths per cut arc {ratio:.1f}", end="")
    print()


if __name__ == "__main__":
    main()
