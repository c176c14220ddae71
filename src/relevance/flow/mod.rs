//! Attention flow (Abnar & Zuidema 2020, §3): attention weights as capacities of a layered
//! DAG, and the maximum flow from a position at layer l to each input token.
//!
//! Every (layer, source, sink) triple is its own max-flow problem, solved exactly in f64 by
//! Dinic's algorithm on the dense layered graph ([`network`]); no capacity is scaled to an
//! integer, so results agree with networkx's Edmonds–Karp up to rounding. A cheap upper
//! bound per source and sink ([`bounds`]) lets each search stop as soon as its flow reaches
//! it, and deep layers' flows are mostly settled without a search: a flow lifted from the
//! same position's flow one layer down that reaches the bound ([`lift`]), or, from every
//! position, the flows of the layer below into the same sink combined ([`Spread`]). A
//! search in a position's climb starts from the maximum flow one layer down, which its graph
//! contains, instead of from none, and stops at that flow's cut widened by one layer; from
//! every position, each climbs alone while its flows need searches, and the layers above
//! are done together, where [`Spread`] applies. Each sink's problems climb the layers in
//! one task, independent of the other sinks', so rayon spreads the sinks over threads and
//! each one's arithmetic is the same whatever the schedule: parallel results are
//! bit-identical to serial ones.

mod bounds;
mod lift;
mod network;
mod stats;
mod workspace;

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rayon::prelude::*;

use super::ProgressFn;
use crate::attention::{AsLayer, Layer};
use crate::error::{Error, Result};
use bounds::{upper_bounds, upper_bounds_of, Settled, Spread};
use lift::Lifter;
use network::{solve, two_layer_paths, Graph, Start};
use stats::Settlement;
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
pub fn flow(augmented: &[impl AsLayer], target: usize) -> Vec<Vec<f64>> {
    one_position(augmented, target, &Ticks::unwatched())
}

/// [`flow`], calling `progress(done, n)` each time one sink's flows through every layer are
/// done (from any thread, one call at a time, `done` counting up). When `progress` answers
/// `Break`, the sinks not begun are left, and the flow fails with [`Error::Interrupted`] once
/// those under way end.
pub fn flow_with(
    augmented: &[impl AsLayer],
    target: usize,
    progress: &ProgressFn,
) -> Result<Vec<Vec<f64>>> {
    let ticks = Ticks::new(progress);
    let maps = one_position(augmented, target, &ticks);
    ticks.unless_stopped(maps)
}

/// [`flow`], telling `ticks`; if they stop it, what it returns means nothing.
fn one_position(augmented: &[impl AsLayer], target: usize, ticks: &Ticks) -> Vec<Vec<f64>> {
    let (views, n) = checked(augmented);
    let augmented = &views[..];
    let layers = augmented.len();
    let bounds: Vec<Vec<f64>> = (1..=layers)
        .into_par_iter()
        .map(|l| upper_bounds(&augmented[..l], target))
        .collect();
    let graph = Graph::new(augmented);
    // One task per sink, climbing the layers: each layer's flow may be lifted from the last.
    let columns: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|sink| {
            if ticks.stopped() {
                return vec![0.0; layers];
            }
            let column = climb(&graph, target, sink, &bounds);
            ticks.tick(n);
            column
        })
        .collect();
    stats::print();
    (0..layers)
        .map(|l| normalise(&columns.iter().map(|column| column[l]).collect::<Vec<_>>()))
        .collect()
}

/// The maximum flow from `(l, target)` to `(0, sink)` for every layer `l = 1..=L`, given each
/// layer's upper bounds.
fn climb(graph: &Graph, target: usize, sink: usize, bounds: &[Vec<f64>]) -> Vec<f64> {
    let mut top = Vec::with_capacity(graph.layers()[0].n);
    let bound = |layer: usize| bounds[layer - 1][sink];
    let flows = WORKSPACE.with(|work| {
        let work = &mut work.borrow_mut();
        climb_from(graph, target, sink, &bound, Climb::Whole, &mut top, work)
    });
    flows.iter().map(|flow| flow.value).collect()
}

/// How far [`climb_from`] goes.
#[derive(Clone, Copy, PartialEq)]
enum Climb {
    /// Through every layer.
    Whole,
    /// While each layer's flow needs a search, and so leaves a flow for the next search to
    /// start from: up to the first layer from 3 on settled without one.
    WhileSearched,
}

/// The flows from `(l, source)` to `(0, sink)` for `l = 1, 2, …` as far as `climb` says,
/// given `bound(l)`, an upper bound on each: lifted from the layer below where that reaches
/// the bound, else searched, starting from the flow of the layer below where the last search
/// found it. `top` is left holding the last flow's arcs out of its source; `work` is left
/// empty.
fn climb_from(
    graph: &Graph,
    source: usize,
    sink: usize,
    bound: &dyn Fn(usize) -> f64,
    climb: Climb,
    top: &mut Vec<f64>,
    work: &mut Workspace,
) -> Vec<Settled> {
    let augmented = graph.layers();
    let mut flows: Vec<Settled> = Vec::with_capacity(augmented.len());
    // Whether the workspace holds the last layer's flow.
    let mut held = false;
    for layer in 1..=augmented.len() {
        let flow = match layer {
            1 | 2 => {
                stats::record(layer, || Settlement::ClosedForm);
                first_layers(graph, layer, source, sink, top)
            }
            _ => {
                let weights = augmented[layer - 1].row(source);
                let below = flows[layer - 2];
                let bound = bound(layer).min(cut_above(below, weights, source));
                if let Some(lifted) = lift(graph, layer, source, bound, top) {
                    flows.push(lifted);
                    held = false;
                    match climb {
                        Climb::Whole => continue,
                        Climb::WhileSearched => break,
                    }
                }
                let start = match held {
                    true => Start::Below(top.iter().sum()),
                    false => {
                        work.reset();
                        Start::Empty
                    }
                };
                held = true;
                solve(graph, layer, source, sink, bound, start, Some(top), work)
            }
        };
        flows.push(flow);
    }
    work.reset();
    flows
}

/// An upper bound on the flow from `(l, source)`, given `below`, the flow from
/// `(l - 1, source)` into the same sink, and `weights`, the capacities of the arcs out of
/// `(l, source)`: a minimum cut of the problem below, with the new source on its side, is
/// crossed by the new source's arcs into every other position as well.
fn cut_above(below: Settled, weights: &[f64], source: usize) -> f64 {
    // Summed apart from the source's own arc: the row's sum less that arc, near 1 less
    // near 1 on a row that keeps almost everything, would lose the sideways capacity's
    // digits, and a bound a few roundings low stops a search short of the maximum.
    let sideways: f64 = (weights.iter().enumerate())
        .filter(|&(m, _)| m != source)
        .map(|(_, w)| w)
        .sum();
    below.upper + sideways
}

/// The flow from `(layer, source)` to `(0, sink)` for `layer` 1 or 2, which have a closed
/// form; for 2, `top` is left holding its arcs out of the source.
fn first_layers(
    graph: &Graph,
    layer: usize,
    source: usize,
    sink: usize,
    top: &mut Vec<f64>,
) -> Settled {
    match layer {
        1 => Settled::exact(graph.layers()[0].get(source, sink)),
        _ => {
            top.clear();
            top.extend(two_layer_paths(graph, source, sink));
            Settled::exact(top.iter().sum())
        }
    }
}

/// The flow from `(layer, source)`, `layer ≥ 3`, given `bound`, an upper bound on it, and
/// `top`, the arcs out of the source of a flow from `(layer - 1, source)`, when that flow
/// lifted reaches the bound; `top` is then left holding the new flow's arcs out of its
/// source.
fn lift(
    graph: &Graph,
    layer: usize,
    source: usize,
    bound: f64,
    top: &mut Vec<f64>,
) -> Option<Settled> {
    // A lift keeps the flow's value at best: worth trying only if that settles.
    Settled::by(bound, top.iter().sum())?;
    let augmented = graph.layers();
    let (above, below) = (&augmented[layer - 1], &augmented[layer - 2]);
    let (value, sent) = LIFTER.with(|lifter| lifter.borrow_mut().lift(above, below, source, top));
    let settled = Settled::by(bound, value)?;
    *top = sent;
    stats::record(layer, || Settlement::Lifted);
    Some(settled)
}

/// Attention flow from every position through every layer, as the reference's
/// `compute_flows`.
///
/// `augmented`: `L` matrices, each `n × n`, as for [`flow`]. Returns `[L][n][n]`:
/// `[l - 1][i][j]` is the maximum flow from `(l, i)` to `(0, j)`, normalised over `j` to
/// sum to 1; `[..][i][..]` equals `flow(augmented, i)`.
pub fn flow_from_every_position(augmented: &[impl AsLayer]) -> Vec<Vec<Vec<f64>>> {
    every_position(augmented, &Ticks::unwatched())
}

/// [`flow_from_every_position`], calling `progress(done, total)` each time the flows from
/// every position of one layer into one sink are done (from any thread, one call at a time,
/// `done` counting up).
///
/// One task per sink climbs the layers ([`climb_from_every_position_in`]), and a layer's
/// flow from each position is settled without a search where it can be: by the flows of the
/// layer below into the same sink combined ([`Spread`]), or by lifting the same position's
/// flow from the layer below ([`lift`]).
///
/// When `progress` answers `Break`, each sink's task ends at its next position or layer, and
/// the flow fails with [`Error::Interrupted`].
pub fn flow_from_every_position_with(
    augmented: &[impl AsLayer],
    progress: &ProgressFn,
) -> Result<Vec<Vec<Vec<f64>>>> {
    let ticks = Ticks::new(progress);
    let maps = every_position(augmented, &ticks);
    ticks.unless_stopped(maps)
}

/// [`flow_from_every_position`], telling `ticks`; if they stop it, what it returns means
/// nothing.
fn every_position(augmented: &[impl AsLayer], ticks: &Ticks) -> Vec<Vec<Vec<f64>>> {
    let (views, n) = checked(augmented);
    let augmented = &views[..];
    let layers = augmented.len();
    let graph = Graph::new(augmented);
    // `[l - 1][source][sink]`, a few sources at a time.
    let sources: Vec<usize> = (0..n).collect();
    let bounds: Vec<Vec<Vec<f64>>> = (1..=layers)
        .map(|l| {
            sources
                .par_chunks(8)
                .flat_map_iter(|chunk| upper_bounds_of(&augmented[..l], chunk))
                .collect()
        })
        .collect();
    // `[sink][l - 1][source]`.
    let columns: Vec<Vec<Vec<f64>>> = (0..n)
        .into_par_iter()
        .map(|sink| climb_from_every_position(&graph, sink, &bounds, ticks))
        .collect();
    stats::print();
    if ticks.stopped() {
        return Vec::new();
    }
    (0..layers)
        .map(|l| {
            (0..n)
                .map(|source| {
                    normalise(
                        &columns
                            .iter()
                            .map(|column| column[l][source])
                            .collect::<Vec<_>>(),
                    )
                })
                .collect()
        })
        .collect()
}

/// A flow's count of work done for its caller's progress, and whether the caller asked it
/// to stop. Its progress is called one tick at a time, so that `done` counts up: a bar or a
/// stream of counts never goes back.
struct Ticks<'a> {
    progress: &'a ProgressFn<'a>,
    done: Mutex<usize>,
    stop: AtomicBool,
}

impl<'a> Ticks<'a> {
    fn new(progress: &'a ProgressFn<'a>) -> Self {
        Self {
            progress,
            done: Mutex::new(0),
            stop: AtomicBool::new(false),
        }
    }

    /// Ticks for a flow nobody watches, which never stop it.
    fn unwatched() -> Self {
        Self::new(&super::no_progress)
    }

    /// One more of `total` done.
    fn tick(&self, total: usize) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        *done += 1;
        if let ControlFlow::Break(()) = (self.progress)(*done, total) {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// `value`, unless the caller stopped the flow that made it.
    fn unless_stopped<T>(&self, value: T) -> Result<T> {
        match self.stopped() {
            true => Err(Error::Interrupted),
            false => Ok(value),
        }
    }
}

/// The maximum flows from every `(l, source)` into `(0, sink)`, `[L][n]`; `ticks` is told as
/// each layer's are done (if it stops the flow, fewer, and what is returned means nothing).
fn climb_from_every_position(
    graph: &Graph,
    sink: usize,
    bounds: &[Vec<Vec<f64>>],
    ticks: &Ticks,
) -> Vec<Vec<f64>> {
    WORKSPACE.with(|work| {
        climb_from_every_position_in(graph, sink, bounds, ticks, &mut work.borrow_mut())
    })
}

/// [`climb_from_every_position`] with `work` for its searches.
///
/// Each position first climbs alone while its flows need searches, each search starting
/// from the flow one layer down ([`climb_from`]). The layers it leaves are then done one at
/// a time for every position, where the flows of the layer below into the sink, combined
/// ([`Spread`]), may settle them, else a lift, else a search from no flow.
fn climb_from_every_position_in(
    graph: &Graph,
    sink: usize,
    bounds: &[Vec<Vec<f64>>],
    ticks: &Ticks,
    work: &mut Workspace,
) -> Vec<Vec<f64>> {
    let augmented = graph.layers();
    let (n, layers) = (augmented[0].n, augmented.len());
    // Per source, the last flow's arcs out of it.
    let mut tops: Vec<Vec<f64>> = vec![Vec::new(); n];
    // Per source, its flows into the sink, `[l - 1]`.
    let mut climbed: Vec<Vec<Settled>> = Vec::with_capacity(n);
    for (source, top) in tops.iter_mut().enumerate() {
        if ticks.stopped() {
            return Vec::new();
        }
        let bound = |layer: usize| bounds[layer - 1][source][sink];
        climbed.push(climb_from(
            graph,
            source,
            sink,
            &bound,
            Climb::WhileSearched,
            top,
            work,
        ));
    }
    let mut values = Vec::with_capacity(layers);
    for layer in 1..=layers {
        if ticks.stopped() {
            return Vec::new();
        }
        if climbed.iter().any(|flows| flows.len() < layer) {
            let below: Vec<Settled> = climbed.iter().map(|flows| flows[layer - 2]).collect();
            let spread = Spread::of(&below);
            let left = climbed.iter_mut().zip(&mut tops).enumerate();
            for (source, (flows, top)) in left.filter(|(_, (flows, _))| flows.len() < layer) {
                let bound = bounds[layer - 1][source][sink];
                let weights = augmented[layer - 1].row(source);
                let combined = spread.settles(weights, bound, top);
                if combined.is_some() {
                    stats::record(layer, || Settlement::Spread);
                }
                let flow = combined
                    .or_else(|| lift(graph, layer, source, bound, top))
                    .unwrap_or_else(|| {
                        let top = Some(top);
                        let found =
                            solve(graph, layer, source, sink, bound, Start::Empty, top, work);
                        work.reset();
                        found
                    });
                flows.push(flow);
            }
        }
        values.push(climbed.iter().map(|flows| flows[layer - 1].value).collect());
        ticks.tick(layers * n);
    }
    values
}

/// The maximum flow from node `(L, source)` to node `(0, sink)`.
///
/// `capacities`: `L ≥ 1` matrices, each `n × n`, non-negative; `capacities[k][i][j]` is the
/// capacity of edge `(k + 1, i) → (k, j)`. `source, sink < n`. Exact in f64.
pub fn max_flow(capacities: &[impl AsLayer], source: usize, sink: usize) -> f64 {
    let (capacities, _) = checked(capacities);
    let graph = Graph::new(&capacities);
    match capacities.len() {
        layers @ (1 | 2) => first_layers(&graph, layers, source, sink, &mut Vec::new()).value,
        layers => WORKSPACE.with(|work| {
            let work = &mut work.borrow_mut();
            // The bound also sets the search's zero (network.rs): the nearer, the finer.
            let bound = upper_bounds(&capacities, source)[sink];
            let found = solve(
                &graph,
                layers,
                source,
                sink,
                bound,
                Start::Empty,
                None,
                work,
            );
            work.reset();
            found.value
        }),
    }
}

/// The layers as the engine reads them, and `n`, after checking that every layer is
/// `n × n`.
fn checked(layers: &[impl AsLayer]) -> (Vec<Layer<'_>>, usize) {
    let layers: Vec<Layer> = layers.iter().map(AsLayer::as_layer).collect();
    let n = layers.first().map_or(0, |m| m.n);
    for (k, m) in layers.iter().enumerate() {
        assert!(
            m.n == n && m.data.len() == n * n,
            "layer {k} of the attention graph is not {n} × {n}"
        );
    }
    (layers, n)
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
    use crate::attention::Matrix;
    use workspace::Workspace;

    const INF: f64 = f64::INFINITY;

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

    #[test]
    fn a_bound_that_overflows_still_leaves_a_search() {
        // Out of the source 2·1e308, beyond f64, and the bounds into the sink as much: the
        // bound is infinite, while the one arc into (2, 0) carries the whole maximum flow.
        let big = 1e308;
        let into_t = matrix(2, &[big, 0.0, big, 0.0]);
        let fan_out = matrix(2, &[big, big, 0.0, 0.0]);
        let narrow = matrix(2, &[big, 0.0, 0.0, 0.0]);
        let out_of_s = matrix(2, &[big, big, 0.0, 0.0]);
        let caps = [into_t, fan_out, narrow, out_of_s];
        assert_eq!(max_flow(&caps, 0, 0), big);
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
            let (views, _) = checked(&caps);
            let graph = Graph::new(&views);
            for sink in 0..n {
                // Each layer searched alone, and where the lift from the layer below settles
                // it, the bound it settles on is the searched value.
                let mut work = Workspace::default();
                let mut below = Vec::new();
                for l in 3..=layers {
                    let mut top = Vec::new();
                    let top_out = Some(&mut top);
                    let exact = solve(
                        &graph,
                        l,
                        target,
                        sink,
                        INF,
                        Start::Empty,
                        top_out,
                        &mut work,
                    );
                    let exact = exact.value;
                    work.reset();
                    let bound = upper_bounds(&views[..l], target)[sink];
                    if l > 3 {
                        let lifter = &mut Lifter::default();
                        let (value, sent) =
                            lifter.lift(&views[l - 1], &views[l - 2], target, &below);
                        // A lift is a flow: never above the maximum.
                        assert!(
                            value <= exact + 1e-15,
                            "{trial} {sink} {l}: {value} > {exact}"
                        );
                        assert!((sent.iter().sum::<f64>() - value).abs() <= 1e-15);
                        if Settled::by(bound, value).is_some() {
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
    fn positions_climbing_alone_then_together_find_every_maximum_flow() {
        let mut uniform = uniform_values(0x2545_f491_4f6c_dd1d);
        let (mut stopped, mut climbs) = (0, 0);
        for trial in 0..8 {
            let (n, layers) = (4 + trial % 5, 9);
            let caps = random_graph(&mut uniform, layers, n, 1 + trial as i32 % 3);
            let (views, _) = checked(&caps);
            let graph = Graph::new(&views);
            let bounds: Vec<Vec<Vec<f64>>> = (1..=layers)
                .map(|l| (0..n).map(|t| upper_bounds(&views[..l], t)).collect())
                .collect();
            let mut work = Workspace::default();
            for sink in 0..n {
                // How far each position climbs alone: some stop where a flow is lifted.
                for (source, _) in bounds[0].iter().enumerate() {
                    let bound = |layer: usize| bounds[layer - 1][source][sink];
                    let mut top = Vec::new();
                    let alone = climb_from(
                        &graph,
                        source,
                        sink,
                        &bound,
                        Climb::WhileSearched,
                        &mut top,
                        &mut work,
                    );
                    climbs += 1;
                    stopped += usize::from(alone.len() < layers);
                }
                let values = climb_from_every_position_in(
                    &graph,
                    sink,
                    &bounds,
                    &Ticks::unwatched(),
                    &mut work,
                );
                for (l, row) in values.iter().enumerate() {
                    for (source, &value) in row.iter().enumerate() {
                        let exact = max_flow(&caps[..=l], source, sink);
                        assert!(
                            (value - exact).abs() <= 1e-12 * exact.max(1.0),
                            "layer {} source {source} sink {sink}: {value} vs {exact}",
                            l + 1
                        );
                    }
                }
            }
        }
        // Both ways of settling a layer were taken.
        assert!(
            stopped > 0 && stopped < climbs,
            "{stopped} of {climbs} climbs stopped"
        );
    }

    #[test]
    fn searches_from_the_flow_below_equal_those_from_none() {
        let mut uniform = uniform_values(0x51_7cc1_b727_220a);
        let (mut narrow, mut searches) = (0, 0);
        for trial in 0..12 {
            let (n, layers) = (4 + trial % 7, 7);
            let caps = random_graph(&mut uniform, layers, n, 1 + trial as i32 % 3);
            let source = trial % n;
            let (views, _) = checked(&caps);
            let graph = Graph::new(&views);
            let mut work = Workspace::default();
            for sink in 0..n {
                for l in 4..=layers {
                    let alone = solve(&graph, l, source, sink, INF, Start::Empty, None, &mut work);
                    work.reset();
                    let below = solve(
                        &graph,
                        l - 1,
                        source,
                        sink,
                        INF,
                        Start::Empty,
                        None,
                        &mut work,
                    );
                    let start = Start::Below(below.value);
                    let mut top = Vec::new();
                    let top_out = Some(&mut top);
                    let from = solve(&graph, l, source, sink, INF, start, top_out, &mut work);
                    work.reset();
                    assert!(
                        (from.value - alone.value).abs() <= 1e-13 * alone.value,
                        "{trial} {sink} {l}: {} vs {}",
                        from.value,
                        alone.value
                    );
                    assert!((top.iter().sum::<f64>() - from.value).abs() <= 1e-14);
                    // Where the straight arc is narrower than the flow below, some of the
                    // flow goes round it or is withdrawn first.
                    narrow += usize::from(caps[l - 1].get(source, source) < below.value);
                    searches += 1;
                }
            }
        }
        assert!(
            narrow * 10 > searches && narrow < searches,
            "{narrow} of {searches} searches started past a narrow arc"
        );
    }

    /// On peaked rows the flow below splits into many small paths, and the flow a search
    /// starts from is partly sent round the source's straight arc before the rest is
    /// withdrawn: the withdrawal must take only flow that started at the old source, or
    /// the flow left is no flow (its value and the arcs that later layers lift are wrong).
    #[test]
    fn a_climb_on_peaked_rows_equals_searches_from_none() {
        let mut uniform = uniform_values(0x6a09_e667_f3bc_c908);
        for trial in 0..4 {
            let (n, layers) = (24 + 8 * trial, 8);
            let caps = random_graph(&mut uniform, layers, n, 6 + 2 * trial as i32);
            let source = (7 * trial + 3) % n;
            let climbed = flow(&caps, source);
            for l in 1..=layers {
                let alone: Vec<f64> = (0..n)
                    .map(|sink| max_flow(&caps[..l], source, sink))
                    .collect();
                for (sink, (a, b)) in climbed[l - 1].iter().zip(normalise(&alone)).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-12,
                        "{trial} layer {l} sink {sink}: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn agrees_with_edmonds_karp_on_causal_layers() {
        // Lower-triangular rows, as a decoder's: each row's arcs end at its own position,
        // where the scans down stop.
        let mut uniform = uniform_values(0x6a09_e667_f3bc_c908);
        for trial in 0..30 {
            let n = 3 + trial % 7;
            let layers = 3 + trial % 3;
            let sharpness = [1, 4][trial % 2];
            let caps: Vec<Matrix> = random_graph(&mut uniform, layers, n, sharpness)
                .into_iter()
                .map(|mut m| {
                    for (i, row) in m.data.chunks_mut(n).enumerate() {
                        row[i + 1..].fill(0.0);
                        let sum: f64 = row.iter().sum();
                        row.iter_mut().for_each(|v| *v /= sum);
                    }
                    m
                })
                .collect();
            let source = n - 1 - trial % 2;
            let climbed = flow(&caps, source);
            for l in 1..=layers {
                let close = |got: f64, want: f64| {
                    assert!(
                        (got - want).abs() < 1e-12,
                        "trial {trial}, layer {l}: {got} vs {want}"
                    )
                };
                let dense = dense_graph(&caps[..l], n);
                let expected: Vec<f64> = (0..n)
                    .map(|sink| edmonds_karp(&dense, l * n + source, sink))
                    .collect();
                for (sink, &want) in expected.iter().enumerate() {
                    close(max_flow(&caps[..l], source, sink), want);
                }
                for (&got, want) in climbed[l - 1].iter().zip(normalise(&expected)) {
                    close(got, want);
                }
            }
        }
    }

    /// The adjacency matrix of the layered graph over `caps`, node `(k, i)` at `k * n + i`.
    fn dense_graph(caps: &[Matrix], n: usize) -> Vec<Vec<f64>> {
        let size = (caps.len() + 1) * n;
        let mut dense = vec![vec![0.0; size]; size];
        for (k, m) in caps.iter().enumerate() {
            for i in 0..n {
                for j in 0..n {
                    dense[(k + 1) * n + i][k * n + j] = m.get(i, j);
                }
            }
        }
        dense
    }

    #[test]
    fn agrees_with_edmonds_karp_on_random_layered_graphs() {
        let mut uniform = uniform_values(0x2545_f491_4f6c_dd1d);
        for trial in 0..40 {
            let n = 2 + trial % 5;
            let layers = 1 + trial % 4;
            let caps = random_graph(&mut uniform, layers, n, 1);
            let dense = dense_graph(&caps, n);
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
