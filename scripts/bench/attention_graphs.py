"""Seeded random attention stacks and the two Python references for attention flow.

Shared by make_flow_fixture.py, bench.py, exact_flow.py and other_maxflow.py. Attention is
softmax(2·z) per row with z standard normal (numpy's PCG64 from the seed), like
benches/support/random_attention.rs (a different generator, the same distribution).
"""

import time

import numpy as np


def attention_stack(layers, heads, n, seed):
    """float32 [layers, heads, n, n], each row a softmax: what a model would save."""
    rng = np.random.default_rng(seed)
    z = 2.0 * rng.standard_normal((layers, heads, n, n))
    z -= z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def augment(att):
    """[L, H, n, n] -> Â, float64 [L, n, n]: head mean, (Ā + I) / rowsum (SPEC §1, α = 0.5)."""
    mean = att.astype(np.float64).mean(axis=1)
    aug = mean + np.eye(mean.shape[-1])[None]
    return aug / aug.sum(axis=-1, keepdims=True)


def fused(stack):
    """A saved stack's Â as the engine builds it, float64 [L, n, n]: the heads' mean, then
    0.5 Ā + 0.5 I with rows renormalised (the same Â as augment(), in the engine's order of
    operations)."""
    a = np.load(stack).astype(np.float64).mean(axis=1)
    n = a.shape[1]
    a = 0.5 * a + 0.5 * np.eye(n)
    return a / a.sum(axis=2, keepdims=True)


def networkx_graph(aug):
    """The layered DiGraph of the reference: nodes (l, i), edges (l, i) -> (l - 1, j)."""
    import networkx as nx

    L, n, _ = aug.shape
    G = nx.DiGraph()
    for l in range(L + 1):
        for i in range(n):
            G.add_node((l, i))
    for l in range(1, L + 1):
        for i in range(n):
            for j in range(n):
                G.add_edge((l, i), (l - 1, j), capacity=float(aug[l - 1][i][j]))
    return G


def networkx_max_flows(aug, sources):
    """Unnormalised F[l][s][j] by networkx edmonds_karp, for l = 1..L and s in sources."""
    import networkx as nx
    from networkx.algorithms.flow import edmonds_karp

    L, n, _ = aug.shape
    G = networkx_graph(aug)
    out = np.zeros((L, len(sources), n))
    for l in range(1, L + 1):
        for a, s in enumerate(sources):
            for j in range(n):
                out[l - 1][a][j] = nx.maximum_flow_value(
                    G, (l, s), (0, j), capacity="capacity", flow_func=edmonds_karp)
    return out


def scipy_max_flows(aug, target, scale):
    """F[l][j] for one target by scipy's maximum_flow on capacities rounded to integers
    (capacity · scale, as GlobEnc does); approximate by construction."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow

    L, n, _ = aug.shape
    size = (L + 1) * n
    rows, cols, vals = [], [], []
    for l in range(1, L + 1):
        i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        rows.append((l * n + i).ravel())
        cols.append(((l - 1) * n + j).ravel())
        vals.append(np.rint(aug[l - 1] * scale).astype(np.int32).ravel())
    graph = csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                       shape=(size, size))
    out = np.zeros((L, n))
    for l in range(1, L + 1):
        for j in range(n):
            out[l - 1][j] = maximum_flow(graph, l * n + target, j).flow_value / scale
    return out


def normalise(flows):
    return flows / flows.sum(axis=-1, keepdims=True)


def timed(fn, *args):
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start
