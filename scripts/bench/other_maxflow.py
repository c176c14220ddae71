#!/usr/bin/env python3
"""One searched flow, the engine beside three established max-flow codes (issue 31): is a peaked
flow slow because the engine searches slowly, or because the problem is harder?

Each problem is the maximum flow from (LAYER, SOURCE) to (0, sink) on a stack's fused,
residual-augmented layers (heads averaged, 0.5 A + 0.5 I, rows renormalised: SPEC §1), solved
from no flow with no lift or climb:

- the engine: `examples/one_max_flow.rs` (its time includes building its copies of the arcs and,
  since 2026-11-27, the upper bound the search is given; the fifth session's runs had none);
- Boykov-Kolmogorov: PyMaxflow's GraphFloat (f64; `maxflow()` timed, building excluded);
- push-relabel: OR-tools' SimpleMaxFlow (int64, capacities times 2^40; `solve` timed, which
  builds its own arc arrays first; in brackets, `solve` into a node no arc enters, which builds
  them and stops at once);
- pseudoflow: Hochbaum's pseudoflow algorithm (highest label), the C solver of the `pseudoflow`
  package from PyPI (f64), called through ctypes on one value of its parameter, so a single
  minimum cut; the time is the solve's own CPU clock (its reading and setting up excluded),
  and its value is the capacity of the cut it returns, summed here.

Every arc of positive capacity is given to the other three: the engine's zero is 1e-17 of the
problem's upper bound (since 2026-11-27), and with the arcs at or below 1e-14 left out, as here
until 2026-11-29, their flows lay up to 1.7e-12 below the engine's on rows to the power 8.

Needs numpy, PyMaxflow, ortools and pseudoflow in their own environment:

    python3 -m venv .venv-maxflow
    .venv-maxflow/bin/pip install numpy PyMaxflow==1.3.2 ortools==9.15.6755 pseudoflow==2022.12.0
    cargo build --release --example one_max_flow
    .venv-maxflow/bin/python scripts/bench/other_maxflow.py STACK.npy LAYER SOURCE SINK[,...] [RUNS]

Prints a markdown table: each code's milliseconds (the median of RUNS runs, 3 unless given), one
thread each, and how far the other three's flows lie from the engine's (OR-tools' by up to 2^-41
per arc of the cut, from its rounding).
"""

import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import maxflow
import numpy as np
import pseudoflow
from ortools.graph.python import max_flow as ortools_max_flow

from attention_graphs import fused

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "target/release/examples/one_max_flow"
HPF = ctypes.CDLL(str(Path(pseudoflow.__file__).parent / "libhpf.so"))
SCALE = 2.0**40


def arcs(layers, layer, source, sink):
    """Tails, heads and capacities of the problem's arcs; node (k, i) is k * n + i."""
    n = layers.shape[1]
    tails, heads, caps = [], [], []
    for k in range(layer - 1, 0, -1):
        rows = np.array([source]) if k == layer - 1 else np.arange(n)
        m = layers[k][rows]
        i, j = np.nonzero(m > 0)
        tails.append((k + 1) * n + rows[i])
        heads.append(k * n + j)
        caps.append(m[i, j])
    into = np.nonzero(layers[0][:, sink] > 0)[0]
    tails.append(n + into)
    heads.append(np.full(len(into), sink))
    caps.append(layers[0][into, sink])
    return np.concatenate(tails), np.concatenate(heads), np.concatenate(caps)


def boykov_kolmogorov(nodes, tails, heads, caps, source, sink):
    graph = maxflow.GraphFloat()
    graph.add_nodes(nodes)
    graph.add_edges(tails, heads, caps, np.zeros_like(caps))
    graph.add_tedge(source, 1e9, 0.0)
    graph.add_tedge(sink, 0.0, 1e9)
    start = time.perf_counter()
    value = graph.maxflow()
    return value, time.perf_counter() - start


def push_relabel(tails, heads, caps, source, sink):
    def solve(target):
        solver = ortools_max_flow.SimpleMaxFlow()
        solver.add_arcs_with_capacity(tails, heads, np.rint(caps * SCALE).astype(np.int64))
        start = time.perf_counter()
        status = solver.solve(source, target)
        assert status == solver.OPTIMAL, status
        return solver.optimal_flow() / SCALE, time.perf_counter() - start

    value, seconds = solve(sink)
    # Of layer 0 only the sink has arcs: another position's node is in the arrays (its
    # index is below theirs) but no arc enters it.
    _, building = solve(1 if sink == 0 else 0)
    return value, seconds, building


def hochbaum_pseudoflow(nodes, tails, heads, caps, source, sink):
    """The capacity of the minimum cut the solver returns, and its solve's seconds."""
    c_int, c_double = ctypes.c_int, ctypes.c_double
    matrix = np.ascontiguousarray(np.column_stack([tails, heads, caps, np.zeros_like(caps)]))
    count, cuts, breakpoints = c_int(0), ctypes.POINTER(c_int)(), ctypes.POINTER(c_double)()
    stats, times = (c_int * 5)(), (c_double * 3)()
    HPF.hpf_solve(
        c_int(nodes),
        c_int(len(caps)),
        c_int(source),
        c_int(sink),
        matrix.ctypes.data_as(ctypes.POINTER(c_double)),
        (c_double * 2)(0.0, 0.0),
        c_int(0),
        ctypes.byref(count),
        ctypes.byref(cuts),
        ctypes.byref(breakpoints),
        stats,
        times,
    )
    assert count.value == 1, count.value
    side = np.ctypeslib.as_array(cuts, shape=(nodes,)).astype(bool)
    value = float(caps[side[tails] & ~side[heads]].sum())
    HPF.libfree(cuts)
    HPF.libfree(breakpoints)
    return value, times[2]


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    stack, layer, source, sinks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    sinks = [int(s) for s in sinks.split(",")]
    runs = int(sys.argv[5]) if len(sys.argv) == 6 else 3
    layers = fused(stack)
    count, n, _ = layers.shape
    if not (3 <= layer <= count and 0 <= source < n and all(0 <= s < n for s in sinks)):
        sys.exit("LAYER must lie in 3..L, SOURCE and each SINK in 0..n")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "layers.f64")
        layers.astype("<f8").tofile(path)
        repeated = ",".join(str(s) for s in sinks for _ in range(runs))
        command = [str(ENGINE), path, *map(str, (count, n, layer, source)), repeated]
        one_thread = {**os.environ, "RAYON_NUM_THREADS": "1"}
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=one_thread)
    engine = {}
    for line in out.stdout.splitlines():
        sink, value, ms = line.split("\t")
        engine.setdefault(int(sink), (float(value), []))[1].append(float(ms))
    print(f"{Path(stack).stem}, from ({layer}, {source}), n = {n}\n")
    print(
        "| sink | arcs | engine flow | engine | Boykov-Kolmogorov "
        "| OR-tools push-relabel (its building alone) | pseudoflow | differences from the engine |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for sink in sinks:
        tails, heads, caps = arcs(layers, layer, source, sink)
        top = layer * n + source
        nodes = (layer + 1) * n
        bk_runs = [boykov_kolmogorov(nodes, tails, heads, caps, top, sink) for _ in range(runs)]
        pr_runs = [push_relabel(tails, heads, caps, top, sink) for _ in range(runs)]
        hpf_runs = [
            hochbaum_pseudoflow(nodes, tails, heads, caps, top, sink) for _ in range(runs)
        ]
        bk, bk_s = bk_runs[0][0], statistics.median(run[1] for run in bk_runs)
        pr, pr_s = pr_runs[0][0], statistics.median(run[1] for run in pr_runs)
        building = statistics.median(run[2] for run in pr_runs)
        hpf, hpf_s = hpf_runs[0][0], statistics.median(run[1] for run in hpf_runs)
        value, ms = engine[sink][0], statistics.median(engine[sink][1])
        print(
            f"| {sink} | {len(caps):,} | {value:.12f} | {ms:.1f} ms | {bk_s * 1e3:.1f} ms "
            f"| {pr_s * 1e3:.1f} ms ({building * 1e3:.1f} ms) | {hpf_s * 1e3:.1f} ms "
            f"| {abs(bk - value):.0e}, {abs(pr - value):.0e}, {abs(hpf - value):.0e} |"
        )


if __name__ == "__main__":
    main()
