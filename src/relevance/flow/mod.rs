//! Attention flow (Abnar & Zuidema 2020, §3): attention weights as capacities of a layered
//! DAG, and the maximum flow from a position at layer l to each input token.
//!
//! Every (layer, source, sink) triple is its own max-flow problem, solved exactly in f64 by
//! Dinic's algorithm on the dense layered graph ([`network`]); no capacity is scaled to an
//! integer, so results agree with networkx's Edmonds–Karp up to rounding. A cheap upper
//! bound per source and sink ([`bounds`]) lets each search stop as soon as its flow reaches
//! it, and deep layers' flows are mostly settled without a search: a flow lifted from the
//! layer below that reaches the bound ([`lift`]), or, from every position, the flows of the
//! layer below combined ([`Spread`]). The problems of one sink (or one layer) are independent
//! of the others', so rayon spreads them over threads and each one's arithmetic is the same
//! whatever the schedule: parallel results are bit-identical to serial ones.

mod bounds;
mod lift;
mod network;
mod workspace;

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::attention::Matrix;
use bounds::{upper_bounds, Settled, Spread, SETTLED};
use lift::Lifter;
use network::{solve, two_layer_paths, Graph};
use workspace::Workspace;

thread_local! {
    /// One workspace per thread, reused by every problem that thread solves.
    static WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::default());
    /// And one lifter per thread, for the flows from one position.
    static LIFTER: RefCell<Lifter> = RefCell::new(Lifter::default());
}

/// Attention flow from one position through every layer.
///
/// `augmented`: `L` matrices, each `n × n` (`augmented[k]` is `Â_{k+1}`, row-stochastic,
/// residual added); `target < n`. Returns `[L][n]`: row `l - 1` is the maximum flow from
/// `(l, target)` to each input token `(0, j)`, normalised to sum to 1 (SPEC §1).
pub fn flow(augmented: &[Matrix], target: usize) -> Vec<Vec<f64>> {
    let n = size(augmented);
    let layers = augmented.len();
    let bounds: Vec<Vec<f64>> = (1..=layers)
        .into_par_iter()
        .map(|l| upper_bounds(&augmented[..l], target))
        .collect();
    let graph = Graph::new(augmented);
    // One task per sink, climbing the layers: each layer's flow may be lifted from the last.
    let columns: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|sink| climb(&graph, target, sink, &bounds))
        .collect();
    (0..layers)
        .map(|l| normalise(&columns.iter().map(|column| column[l]).collect::<Vec<_>>()))
        .collect()
}

/// The maximum flow from `(l, target)` to `(0, sink)` for every layer `l = 1..=L`, given each
/// layer's upper bounds: lifted from the layer below where that reaches the bound, else
/// searched.
fn climb(graph: &Graph, target: usize, sink: usize, bounds: &[Vec<f64>]) -> Vec<f64> {
    let augmented = graph.layers();
    let n = augmented[0].n;
    let mut values = Vec::with_capacity(augmented.len());
    // The last flow's arcs out of its source.
    let mut top: Vec<f64> = Vec::with_capacity(n);
    for layer in 1..=augmented.len() {
        let bound = bounds[layer - 1][sink];
        let value = match layer {
            1 => augmented[0].get(target, sink),
            2 => {
                top.clear();
                top.extend(two_layer_paths(graph, target, sink));
                top.iter().sum()
            }
            _ => {
                // Bounds this close (relative) settle a flow, as in `Spread::settles`.
                let settles = |value: f64| value >= bound - SETTLED * bound;
                let lifted = settles(top.iter().sum())
                    .then(|| {
                        let (above, below) = (&augmented[layer - 1], &augmented[layer - 2]);
                        LIFTER.with(|lifter| lifter.borrow_mut().lift(above, below, target, &top))
                    })
                    .filter(|(value, _)| settles(*value));
                match lifted {
                    Some((_, sent)) => {
                        top = sent;
                        bound
                    }
                    None => WORKSPACE.with(|work| {
                        solve(
                            graph,
                            layer,
                            target,
                            sink,
                            bound,
                            Some(&mut top),
                            &mut work.borrow_mut(),
                        )
                    }),
                }
            }
        };
        values.push(value);
    }
    values
}

/// Attention flow from every position through every layer, as the reference's
/// `compute_flows`.
///
/// `augmented`: `L` matrices, each `n × n`, as for [`flow`]. Returns `[L][n][n]`:
/// `[l - 1][i][j]` is the maximum flow from `(l, i)` to `(0, j)`, normalised over `j` to
/// sum to 1; `[..][i][..]` equals `flow(augmented, i)`.
pub fn flow_from_every_position(augmented: &[Matrix]) -> Vec<Vec<Vec<f64>>> {
    flow_from_every_position_with(augmented, &|_, _| {})
}

/// [`flow_from_every_position`], calling `progress(done, total)` each time the flows from
/// one position at one layer are done (from any thread, positions in any order).
///
/// Layers go in order: once the flows from every position of one layer are known, many of
/// the next layer's are settled by bounds alone ([`Spread`]) without a search.
pub fn flow_from_every_position_with(
    augmented: &[Matrix],
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Vec<Vec<f64>>> {
    let n = size(augmented);
    let layers = augmented.len();
    let done = AtomicUsize::new(0);
    let mut maps = Vec::with_capacity(layers);
    let graph = Graph::new(augmented);
    let mut below: Option<Spread> = None;
    for layer in 0..layers {
        let capacities = &augmented[..=layer];
        // One task per source: its bounds, then its n sinks.
        let solved: Vec<Vec<Settled>> = (0..n)
            .into_par_iter()
            .map(|source| {
                let bounds = upper_bounds(capacities, source);
                let weights = augmented[layer].row(source);
                let values = (0..n)
                    .map(|sink| {
                        let bound = bounds[sink];
                        match below.as_ref().and_then(|b| b.settles(sink, weights, bound)) {
                            Some(settled) => settled,
                            None => {
                                Settled::exact(max_flow_in(&graph, layer + 1, source, sink, bound))
                            }
                        }
                    })
                    .collect();
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, layers * n);
                values
            })
            .collect();
        maps.push(
            solved
                .iter()
                .map(|row| normalise(&row.iter().map(|s| s.value).collect::<Vec<_>>()))
                .collect(),
        );
        below = Some(Spread::of(&solved));
    }
    maps
}

/// The maximum flow from node `(L, source)` to node `(0, sink)`.
///
/// `capacities`: `L ≥ 1` matrices, each `n × n`, non-negative; `capacities[k][i][j]` is the
/// capacity of edge `(k + 1, i) → (k, j)`. `source, sink < n`. Exact in f64.
pub fn max_flow(capacities: &[Matrix], source: usize, sink: usize) -> f64 {
    size(capacities);
    let graph = Graph::new(capacities);
    max_flow_in(&graph, capacities.len(), source, sink, f64::INFINITY)
}

/// The maximum flow from `(layers, source)` to `(0, sink)`, given an upper bound on it
/// (`f64::INFINITY` if none is known).
fn max_flow_in(graph: &Graph, layers: usize, source: usize, sink: usize, bound: f64) -> f64 {
    WORKSPACE.with(|work| {
        solve(
            graph,
            layers,
            source,
            sink,
            bound,
            None,
            &mut work.borrow_mut(),
        )
    })
}

/// `n`, after checking that every layer is `n × n`.
fn size(layers: &[Matrix]) -> usize {
    let n = layers.first().map_or(0, |m| m.n);
    for (k, m) in layers.iter().enumerate() {
        assert!(
            m.n == n && m.data.len() == n * n,
            "layer {k} of the attention graph is not {n} × {n}"
        );
    }
    n
}

/// `[n]` maximum flows → shares summing to 1 (all zero stays zero).
fn normalise(values: &[f64]) -> Vec<f64> {
    let total: f64 = values.iter().sum();
    if total > 0.0 {
        values.iter().map(|v| v / total).collect()
    } else {
        values.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workspace::Workspace;

    fn matrix(n: usize, data: &[f64]) -> Matrix {
        Matrix {
            n,
            data: data.to_vec(),
        }
    }

    #[test]
    fn one_layer_flow_is_the_edge_capacity() {
        let a = matrix(2, &[0.7, 0.3, 0.6, 0.4]);
        assert_eq!(max_flow(std::slice::from_ref(&a), 0, 1), 0.3);
        assert_eq!(flow(&[a], 1), vec![vec![0.6, 0.4]]);
    }

    #[test]
    fn two_layers_take_the_bottleneck_of_each_path() {
        // Paths from (2,0) to (0,0): via (1,0) min(0.9, 0.2), via (1,1) min(0.1, 0.5).
        let a1 = matrix(2, &[0.2, 0.8, 0.5, 0.5]);
        let a2 = matrix(2, &[0.9, 0.1, 0.3, 0.7]);
        let caps = [a1, a2];
        assert!((max_flow(&caps, 0, 0) - 0.3).abs() < 1e-15);
        // To (0,1): via (1,0) min(0.9, 0.8), via (1,1) min(0.1, 0.5).
        assert!((max_flow(&caps, 0, 1) - 0.9).abs() < 1e-15);
        let normalised = &flow(&caps, 0)[1];
        assert!((normalised[0] - 0.25).abs() < 1e-15 && (normalised[1] - 0.75).abs() < 1e-15);
    }

    #[test]
    fn needs_a_back_edge_to_reach_the_maximum() {
        // s = (3,0); a, b = (2,0), (2,1); c, d = (1,0), (1,1); t = (0,0). The first
        // phase sends s→a→c→t and blocks c; only s→b→c, back c→a, a→d→t reaches 2.
        let c_d_to_t = matrix(2, &[1.0, 0.0, 1.0, 0.0]);
        let a_b_to_c_d = matrix(2, &[1.0, 1.0, 1.0, 0.0]);
        let s_to_a_b = matrix(2, &[1.0, 1.0, 0.0, 0.0]);
        let caps = [c_d_to_t, a_b_to_c_d, s_to_a_b];
        assert!((max_flow(&caps, 0, 0) - 2.0).abs() < 1e-15);
    }

    /// An independent textbook Edmonds–Karp on an adjacency matrix.
    fn edmonds_karp(capacity: &[Vec<f64>], source: usize, sink: usize) -> f64 {
        let size = capacity.len();
        let mut residual = capacity.to_vec();
        let mut total = 0.0;
        loop {
            let mut parent = vec![usize::MAX; size];
            parent[source] = source;
            let mut queue = std::collections::VecDeque::from([source]);
            while let Some(u) = queue.pop_front() {
                for v in 0..size {
                    if parent[v] == usize::MAX && residual[u][v] > 1e-14 {
                        parent[v] = u;
                        queue.push_back(v);
                    }
                }
            }
            if parent[sink] == usize::MAX {
                return total;
            }
            let mut bottleneck = f64::INFINITY;
            let mut v = sink;
            while v != source {
                bottleneck = bottleneck.min(residual[parent[v]][v]);
                v = parent[v];
            }
            let mut v = sink;
            while v != source {
                residual[parent[v]][v] -= bottleneck;
                residual[v][parent[v]] += bottleneck;
                v = parent[v];
            }
            total += bottleneck;
        }
    }

    /// A seeded xorshift generator of uniform values in [0, 1).
    fn uniform_values(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// `layers` random row-stochastic `n × n` matrices, residual added; `sharpness` > 1
    /// concentrates each row on a few positions, as real attention does.
    fn random_graph(
        uniform: &mut impl FnMut() -> f64,
        layers: usize,
        n: usize,
        sharpness: i32,
    ) -> Vec<Matrix> {
        (0..layers)
            .map(|_| {
                let values: Vec<f64> = (0..n * n).map(|_| uniform().powi(sharpness)).collect();
                let mut m = matrix(n, &values);
                for row in m.data.chunks_mut(n) {
                    let sum: f64 = row.iter().sum();
                    row.iter_mut().for_each(|v| *v /= sum);
                }
                m.with_residual(0.5)
            })
            .collect()
    }

    #[test]
    fn lifted_flows_equal_the_searched_ones() {
        let mut uniform = uniform_values(0x9e37_79b9_7f4a_7c15);
        let (mut lifted, mut layers_seen) = (0, 0);
        for trial in 0..12 {
            let (n, layers) = (5 + trial % 6, 8);
            let caps = random_graph(&mut uniform, layers, n, 3);
            let target = trial % n;
            let graph = Graph::new(&caps);
            for sink in 0..n {
                // Each layer searched alone, and where the lift from the layer below settles
                // it, the bound it settles on is the searched value.
                let mut work = Workspace::default();
                let mut below = Vec::new();
                for l in 3..=layers {
                    let mut top = Vec::new();
                    let exact = solve(
                        &graph,
                        l,
                        target,
                        sink,
                        f64::INFINITY,
                        Some(&mut top),
                        &mut work,
                    );
                    let bound = upper_bounds(&caps[..l], target)[sink];
                    if l > 3 {
                        let lifter = &mut Lifter::default();
                        let (value, sent) = lifter.lift(&caps[l - 1], &caps[l - 2], target, &below);
                        // A lift is a flow: never above the maximum.
                        assert!(
                            value <= exact + 1e-15,
                            "{trial} {sink} {l}: {value} > {exact}"
                        );
                        assert!((sent.iter().sum::<f64>() - value).abs() <= 1e-15);
                        if value >= bound - SETTLED * bound {
                            lifted += 1;
                            assert!((bound - exact).abs() <= 1e-13 * exact, "{trial} {sink} {l}");
                        }
                    }
                    layers_seen += 1;
                    below = top;
                }
            }
            let climbed = flow(&caps, target);
            for (l, row) in climbed.iter().enumerate() {
                let searched: Vec<f64> = (0..n).map(|j| max_flow(&caps[..=l], target, j)).collect();
                for (got, want) in row.iter().zip(normalise(&searched)) {
                    assert!(
                        (got - want).abs() <= 1e-13,
                        "{trial} layer {}: {got} vs {want}",
                        l + 1
                    );
                }
            }
        }
        assert!(
            lifted * 4 > layers_seen,
            "only {lifted} of {layers_seen} layers lifted"
        );
    }

    #[test]
    fn agrees_with_edmonds_karp_on_random_layered_graphs() {
        let mut uniform = uniform_values(0x2545_f491_4f6c_dd1d);
        for trial in 0..40 {
            let n = 2 + trial % 5;
            let layers = 1 + trial % 4;
            let caps = random_graph(&mut uniform, layers, n, 1);
            let size = (layers + 1) * n;
            let mut dense = vec![vec![0.0; size]; size];
            for (k, m) in caps.iter().enumerate() {
                for i in 0..n {
                    for j in 0..n {
                        dense[(k + 1) * n + i][k * n + j] = m.get(i, j);
                    }
                }
            }
            let source = trial % n;
            for sink in 0..n {
                let expected = edmonds_karp(&dense, layers * n + source, sink);
                let got = max_flow(&caps, source, sink);
                assert!(
                    (got - expected).abs() < 1e-12,
                    "trial {trial}: {got} vs {expected}"
                );
            }
        }
    }
}
