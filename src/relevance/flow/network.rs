//! The residual network of one max-flow problem on the layered attention DAG, solved with
//! Dinic's algorithm (Dinitz 1970) directly on the dense capacity matrices.
//!
//! Node `(k, i)` has index `k * n + i`. The capacities are read where a [`Graph`] keeps
//! them, once for every problem; the flow, the levels and the sets of nodes still of use
//! live in a [`Workspace`].

use rayon::prelude::*;

use super::bounds::Settled;
use super::stats::{self, Search, Settlement};
use super::workspace::{contains, first_in_chain, ones, span, Frame, Workspace, UNSEEN};
use crate::attention::{Layer, Matrix};

/// Capacities and residual capacities at or below this share of a problem's upper bound on
/// its flow count as zero, so the flow a search leaves behind is at most this share of the
/// bound for each arc its last cut crosses, however small the flow. A fixed zero of 1e-14
/// left 2e-9 of the smallest entries unfound on peaked rows (thousands of narrow arcs in a
/// cut); at this one they lie within 3e-15 of exact rational arithmetic (tests/flow_exact.rs,
/// scripts/bench/exact_flow.py). A full arc's rounding residue (a unit in the last place of
/// its flow) may then exceed the zero when the bound is small, and a search sends it on:
/// paths of rounding size, harmless (what it costs: README Speed).
const ZERO: f64 = 1e-17;

/// A search stops once its flow lies within this share of its upper bound, which proves the
/// flow that close to the maximum. Closing the rest of the gap, down to the zero, took one
/// more phase whose breadth-first search found no path left: 5–9% of the searches' time for
/// every position at n = 512 (scripts/bench/RESULTS.md).
const NEAR_BOUND: f64 = 1e-15;

/// The capacities of a layered attention graph: `layers[k]` (`n × n`) holds the capacity
/// of each edge `(k + 1, i) → (k, j)`. Besides the rows, which scans read in order, it keeps
/// two copies of the arcs a search reads one at a time from many rows, each in order of
/// their tails: every layer's diagonal (the straight arcs, which carry most of the flow)
/// and its transpose (the arcs into one position, the sink's). Read from the rows, each of
/// those would be a cache line of its own. The top layer has no transpose: a search's
/// source is its only node there.
pub struct Graph<'a> {
    layers: Vec<Layer<'a>>,
    diagonals: Vec<Vec<f64>>,
    transposed: Vec<Matrix>,
    /// Per sink, the feeder: the position of layer 1 whose arc into the sink is the widest
    /// after the sink's own (`n` if there is none).
    feeders: Vec<usize>,
    /// Per layer and row, one past the row's last arc with any capacity, where scans down
    /// stop: in a causal model's layers row `i` ends at `i + 1`, and a scan reading on would
    /// read the empty rest of the row wherever the set of nodes not yet reached still holds
    /// the later positions.
    ends: Vec<Vec<u32>>,
}

impl<'a> Graph<'a> {
    /// `layers`: each `n × n`, non-negative.
    pub fn new(layers: &[Layer<'a>]) -> Self {
        let diagonals = layers
            .iter()
            .map(|m| (0..m.n).map(|i| m.get(i, i)).collect())
            .collect();
        let below_top = &layers[..layers.len().saturating_sub(1)];
        let transposed: Vec<Matrix> = below_top.iter().map(transpose).collect();
        let feeders = transposed.first().map_or_else(Vec::new, |into| {
            (0..into.n)
                .map(|sink| widest_but(into.row(sink), sink))
                .collect()
        });
        let ends = layers
            .par_iter()
            .map(|m| {
                let end = |row: &[f64]| row.iter().rposition(|&c| c > 0.0).map_or(0, |j| j + 1);
                (0..m.n).map(|i| end(m.row(i)) as u32).collect()
            })
            .collect();
        Self {
            layers: layers.to_vec(),
            diagonals,
            transposed,
            feeders,
            ends,
        }
    }

    /// The layers' capacities, as given.
    pub fn layers(&self) -> &[Layer<'a>] {
        &self.layers
    }

    /// The capacities of the arcs `(k + 1, i) → (k, to)` for every `i`.
    fn arcs_into(&self, k: usize, to: usize) -> &[f64] {
        self.transposed[k].row(to)
    }
}

/// `m`ᵀ, copied in square blocks so that both sides are read and written a few lines at a
/// time, each band of output rows on a thread of its own.
fn transpose(m: &Layer) -> Matrix {
    const BLOCK: usize = 32;
    let n = m.n;
    let mut data = vec![0.0; n * n];
    data.par_chunks_mut(BLOCK * n)
        .enumerate()
        .for_each(|(band, into)| {
            let j0 = band * BLOCK;
            for i0 in (0..n).step_by(BLOCK) {
                let end = (i0 + BLOCK).min(n);
                for (dj, row) in into.chunks_exact_mut(n).enumerate() {
                    for (i, into) in (i0..end).zip(&mut row[i0..end]) {
                        *into = m.data[i * n + j0 + dj];
                    }
                }
            }
        });
    Matrix { n, data }
}

/// Where a search begins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Start {
    /// From no flow: the workspace holds none.
    Empty,
    /// From the flow the workspace holds: a maximum flow, of this value, from
    /// `(L - 1, source)` into the same sink, which `(L, source)` feeds down its straight arc.
    /// The layer-`L` graph contains the layer-`L - 1` one, so that flow is a flow here too,
    /// and the search adds to it. What the straight arc cannot carry goes round it through
    /// the other positions of layer `L - 1` where their arcs allow ([`reroute`]), and the
    /// rest is withdrawn.
    Below(f64),
}

/// The maximum flow from `(L, source)` to `(0, sink)` in the first `L ≥ 3` layers of
/// `graph`. `known_bound` is an upper bound on the answer the caller has proved
/// (`f64::INFINITY` if none): the search stops as soon as the flow comes within
/// [`NEAR_BOUND`] of it or of the search's own bound, without a last phase to prove that no
/// more can pass. With `top`, the flow found on each arc out of the source is written there
/// (`n` values), for [`super::lift`]. The flow stays in `work` until [`Workspace::reset`], so
/// that the next layer's search can start from it.
#[allow(clippy::too_many_arguments)]
pub fn solve(
    graph: &Graph,
    layers: usize,
    source: usize,
    sink: usize,
    known_bound: f64,
    start: Start,
    top: Option<&mut Vec<f64>>,
    work: &mut Workspace,
) -> Settled {
    let started = stats::enabled().then(std::time::Instant::now);
    let rows = &graph.layers[..layers];
    let n = rows[0].n;
    assert!(layers >= 3, "one or two layers have a closed form");
    work.prepare(layers, n, sink);
    let held = match start {
        Start::Empty => 0.0,
        Start::Below(value) => {
            let through = value.min(rows[layers - 1].get(source, source));
            let mut rerouted = 0.0;
            if value > through {
                rerouted = reroute(rows, source, value - through, work);
                let rest = value - through - rerouted;
                if rest > 0.0 {
                    work.withdraw(rest, layers - 1, source);
                }
            }
            work.carry(layers - 1, source, source, through);
            through + rerouted
        }
    };
    let sink_column = graph.arcs_into(0, sink);
    // No flow exceeds what leaves the source or what enters the sink; a known bound is
    // already within what enters the sink (bounds.rs).
    let out_of_source: f64 = rows[layers - 1].row(source).iter().sum();
    let bound = match known_bound.is_finite() {
        true => known_bound.min(out_of_source),
        false => out_of_source.min(sink_column.iter().sum()),
    };
    // (A bound that overflowed, on capacities near f64's largest, leaves no zero but 0 and
    // no stop short of a search's end.)
    let (zero, near) = match bound.is_finite() {
        true => (ZERO * bound, NEAR_BOUND * bound),
        false => (0.0, 0.0),
    };
    work.full_under(zero);
    let mut dinic = Dinic {
        graph,
        zero,
        rows,
        sink_column,
        work,
        n,
        top: layers,
        source: (layers * n + source) as u32,
        sink: sink as u32,
        feeder: graph.feeders[sink],
        untouched_from: match start {
            Start::Empty => 1,
            Start::Below(_) => layers + 1,
        },
        steps: 0,
    };
    // The first phase needs no search: before any flow, the shortest paths are the
    // straight ones down the layers, so node (k, i) is at level `L - k`. From a flow held,
    // the straight paths are still the shortest ways down from the new layer, and the
    // source's own position below it has none left to the sink.
    dinic.straight_levels();
    if start != Start::Empty {
        dinic.work.bury(layers - 1, source);
    }
    let mut total = held;
    if bound - total > near {
        total += dinic.first_phase(bound - total);
    }
    let mut phases = 1;
    while bound - total > near {
        phases += 1;
        let Some(depth) = dinic.levels() else { break };
        total += dinic.blocking_flow(depth, bound - total);
    }
    if let Some(top) = top {
        top.clear();
        top.extend((0..n).map(|m| dinic.work.flow_on(layers - 1, source, m)));
    }
    stats::record(layers, || {
        Settlement::Searched(Search {
            phases,
            steps: dinic.steps,
            time: started.map(|t| t.elapsed()).unwrap_or_default(),
            bound_above: match bound.is_finite() && total > 0.0 {
                true => bound / total - 1.0,
                false => 0.0,
            },
        })
    });
    // Stopped on reaching the bound, or with no path left: then the flow is the maximum.
    match bound - total <= near {
        true => Settled::searched(total, bound),
        false => Settled::exact(total),
    }
}

/// With the workspace holding a flow from `(L - 1, source)`, `L = rows.len()`: moves up to
/// `deficit` of what that node sends into each `(L - 2, m)` onto paths
/// `(L, source) → (L - 1, i) → (L - 2, m)` through the other positions (each its own
/// position first, then the others in order), so that `(L - 1, source)` sends that much
/// less; returns the amount moved.
fn reroute(rows: &[Layer], source: usize, deficit: f64, work: &mut Workspace) -> f64 {
    let layers = rows.len();
    let n = rows[0].n;
    // What (L - 1, source) sends into each (L - 2, m), still to be taken over; the places
    // it goes, with a chain over those still wanting more.
    let mut wanted: Vec<f64> = (0..n)
        .map(|m| work.flow_on(layers - 2, source, m))
        .collect();
    let places: Vec<usize> = (0..n).filter(|&m| wanted[m] > 0.0).collect();
    let mut links: Vec<u32> = (0..=places.len() as u32).collect();
    let weights = rows[layers - 1].row(source);
    let mut moved = 0.0;
    for (i, &weight) in weights.iter().enumerate() {
        if deficit - moved <= 0.0 {
            break;
        }
        if i == source || weight <= 0.0 {
            continue;
        }
        let below = rows[layers - 2].row(i);
        let mut left = weight.min(deficit - moved);
        // Sends what it can along (L - 1, i) → (L - 2, m); whether m wants no more.
        let mut send = |m: usize, left: &mut f64, work: &mut Workspace| {
            let amount = left
                .min(wanted[m])
                .min(below[m] - work.flow_on(layers - 2, i, m));
            if amount > 0.0 {
                work.carry(layers - 1, source, i, amount);
                work.carry(layers - 2, i, m, amount);
                work.carry(layers - 2, source, m, -amount);
                wanted[m] -= amount;
                *left -= amount;
                moved += amount;
            }
            wanted[m] <= 0.0
        };
        send(i, &mut left, work);
        let mut p = first_in_chain(&mut links, 0);
        while left > 0.0 && p < places.len() {
            if places[p] != i && send(places[p], &mut left, work) {
                links[p] = (p + 1) as u32;
            }
            p = first_in_chain(&mut links, p + 1);
        }
    }
    moved
}

/// The position of the largest of `values` other than `values[skip]` (`values.len()` if
/// there is none).
fn widest_but(values: &[f64], skip: usize) -> usize {
    let others = values.iter().enumerate().filter(|&(m, _)| m != skip);
    others
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(values.len(), |(m, _)| m)
}

/// With two layers, the flow on each arc `(2, source) → (1, m)` of a maximum flow into the
/// sink: the two-edge paths share no edge, one through each middle node.
pub fn two_layer_paths<'a>(
    graph: &'a Graph,
    source: usize,
    sink: usize,
) -> impl Iterator<Item = f64> + 'a {
    let above = graph.layers[1].row(source);
    let below = graph.arcs_into(0, sink);
    above.iter().zip(below).map(|(a, b)| a.min(*b))
}

struct Dinic<'a, 'w> {
    graph: &'a Graph<'a>,
    /// The problem's layers.
    rows: &'a [Layer<'a>],
    /// The capacities of the arcs `(1, i) → sink`, `[n]`.
    sink_column: &'a [f64],
    work: &'w mut Workspace,
    n: usize,
    /// The source's layer.
    top: usize,
    source: u32,
    sink: u32,
    /// The sink's feeder ([`Graph`]).
    feeder: usize,
    /// The lowest layer whose nodes' arcs down carried no flow when the search began.
    untouched_from: usize,
    /// The frames the depth-first searches took, for [`stats`].
    steps: u64,
    /// Residual capacities at or below this count as zero ([`ZERO`]).
    zero: f64,
}

impl Dinic<'_, '_> {
    /// The levels before any flow is sent: node `(k, i)` at `L - k`, the sink at `L`.
    fn straight_levels(&mut self) {
        let n = self.n;
        let top = self.top;
        let level = &mut self.work.level;
        level[..(top + 1) * n].fill(UNSEEN);
        for k in 1..top {
            level[k * n..(k + 1) * n].fill((top - k) as u32);
        }
        level[self.source as usize] = 0;
        level[self.sink as usize] = top as u32;
        self.work.chain(top);
        self.work.levels = 0;
    }

    /// Breadth-first levels from the source over residual edges; the sink's level, if the
    /// sink is reachable. Nodes at or beyond the sink's level are not expanded. A scan reads
    /// only the arcs into nodes not reached yet and not found full, a word of them at a time;
    /// afterwards the nodes below the sink's level are sorted by level for the phase's search.
    fn levels(&mut self) -> Option<u32> {
        let n = self.n;
        let top = self.top;
        let w = &mut *self.work;
        let words = w.words;
        w.level[..(top + 1) * n].fill(UNSEEN);
        w.unreach(top);
        w.queue.clear();
        w.level[self.source as usize] = 0;
        w.queue.push(self.source);
        let sink = self.sink as usize;
        let mut depth = UNSEEN;
        let mut head = 0;
        while head < w.queue.len() {
            let u = w.queue[head] as usize;
            head += 1;
            let here = w.level[u];
            if here >= depth {
                break;
            }
            let (k, i) = (u / n, u % n);
            if k >= 2 {
                let caps = self.rows[k - 1].row(i);
                let end = self.graph.ends[k - 1][i] as usize;
                for word in 0..end.div_ceil(64) {
                    let open = w.unreached[(k - 1) * words + word] & !w.full_in(k - 1, i)[word];
                    for j in ones(word, open & span(word, 0, end)) {
                        if caps[j] - w.flow_on(k - 1, i, j) > self.zero {
                            w.reach(k - 1, j, here + 1);
                        } else {
                            w.mark_full(k - 1, i, j);
                        }
                    }
                }
            } else if k == 1
                && w.level[sink] == UNSEEN
                && self.sink_column[i] - w.into_sink[0][i] > self.zero
            {
                w.level[sink] = here + 1;
                depth = here + 1;
            }
            // Edges back up into the source's layer lead only to the source itself.
            if k + 1 < top {
                if w.level[u + n] == UNSEEN && w.straight[k][i] > self.zero {
                    w.reach(k + 1, i, here + 1);
                }
                for word in 0..words {
                    let open = w.senders[u * words + word] & w.unreached[(k + 1) * words + word];
                    for j in ones(word, open) {
                        if w.flow_on(k, j, i) > self.zero {
                            w.reach(k + 1, j, here + 1);
                        }
                    }
                }
            }
        }
        if depth == UNSEEN {
            return None;
        }
        w.sort_by_level(top, depth);
        Some(depth)
    }

    /// A blocking flow of the level graph (sink at level `depth`), at most `limit`;
    /// returns its value.
    ///
    /// Dinic's depth-first search without recursion: each frame pushes what it received
    /// into as many arcs as it takes, so a path's prefix is shared by every augmentation
    /// that branches below it, and each arc is updated once per return, not once per path.
    fn blocking_flow(&mut self, depth: u32, limit: f64) -> f64 {
        let nodes = (self.top + 1) * self.n;
        self.work.cursor[..nodes].fill(0);
        self.work.tried_sink[..nodes].fill(false);
        let sink = self.sink as usize;
        let mut frames = std::mem::take(&mut self.work.frames);
        frames.clear();
        frames.push(Frame {
            node: self.source as usize,
            layer: self.top,
            limit,
            sent: 0.0,
        });
        let total;
        loop {
            let frame = frames
                .last_mut()
                .expect("the source frame stays until the end");
            let (u, k) = (frame.node, frame.layer);
            let arriving = if u == sink {
                Some(frame.limit)
            } else if frame.limit - frame.sent <= self.zero {
                Some(frame.sent)
            } else {
                match self.admissible(u, k, depth) {
                    Some((v, layer, residual)) => {
                        self.steps += 1;
                        let limit = (frame.limit - frame.sent).min(residual);
                        frames.push(Frame {
                            node: v,
                            layer,
                            limit,
                            sent: 0.0,
                        });
                        None
                    }
                    None => {
                        // A dead end for the rest of this phase.
                        self.work.bury(k, u - k * self.n);
                        Some(frame.sent)
                    }
                }
            };
            let Some(amount) = arriving else { continue };
            frames.pop();
            let Some(parent) = frames.last_mut() else {
                total = amount;
                break;
            };
            if amount > 0.0 {
                let arc = self.work.cursor[parent.node] as usize;
                parent.sent += amount;
                if self.send(parent.node, parent.layer, arc, amount) <= self.zero {
                    self.work.cursor[parent.node] += 1;
                }
            }
        }
        self.work.frames = frames;
        total
    }

    /// The first phase: a blocking flow of at most `limit` along the straight paths, found
    /// depth first from the source; returns its value.
    ///
    /// Each node tries its arc into the sink's position first, then its own position's, then
    /// the rest in order; from layer 2, the arc into the sink's position and then the one
    /// into the feeder. On attention with a residual connection the straight arcs carry at
    /// least α each, so the sink's own position is the widest way down to the sink and a
    /// node's own straight path the widest way on: most of the flow goes the way a maximum
    /// flow sends it, and few of the narrow arcs fill up with flow that later phases would
    /// have to reroute (README Speed has the measurements). The recursion is as deep as the
    /// layers.
    fn first_phase(&mut self, limit: f64) -> f64 {
        let (top, n) = (self.top, self.n);
        self.work.cursor[..(top + 1) * n].fill(0);
        self.push_down(top, self.source as usize - top * n, limit)
    }

    /// Sends up to `limit` from `(k, i)` down straight paths; returns the amount sent. A node
    /// left with no way down is a dead end for the rest of the phase.
    fn push_down(&mut self, k: usize, i: usize, limit: f64) -> f64 {
        let n = self.n;
        let u = k * n + i;
        let sink = self.sink as usize;
        let first = match k {
            2 => [sink, self.feeder],
            _ if sink == i => [i, n],
            _ => [sink, i],
        };
        let mut sent = 0.0;
        for j in first.into_iter().filter(|&j| j < n) {
            if self.work.chained_from(k - 1, j) == j {
                sent += self.push_through(k, i, j, limit - sent, false);
                if limit - sent <= self.zero {
                    return sent;
                }
            }
        }
        // Past the cursor, the arcs other than those two have carried nothing yet, unless a
        // flow held from the start passes this layer (and those not straight nor into the
        // sink's position have their flow in the rows).
        let start = self.work.cursor[u] as usize;
        let end = self.graph.ends[k - 1][i] as usize;
        let mut j = self.work.chained_from(k - 1, start);
        while j < end {
            let fresh = j > start && j != i && !first.contains(&j) && k >= self.untouched_from;
            sent += self.push_through(k, i, j, limit - sent, fresh);
            if limit - sent <= self.zero {
                // The arc may have room left: the next visit starts on it.
                self.work.cursor[u] = j as u32;
                return sent;
            }
            j = self.work.chained_from(k - 1, j + 1);
        }
        self.work.cursor[u] = n as u32;
        if k < self.top {
            self.work.bury(k, i);
        }
        sent
    }

    /// Sends up to `limit` from `(k, i)` through its arc into `(k - 1, j)` and on down;
    /// `fresh` when that arc has carried nothing yet.
    fn push_through(&mut self, k: usize, i: usize, j: usize, limit: f64, fresh: bool) -> f64 {
        self.steps += 1;
        if k == 2 {
            return self.send_to_sink(i, j, limit, fresh);
        }
        let residual = self.residual(k - 1, i, j, fresh);
        if residual <= self.zero {
            return 0.0;
        }
        let sent = self.push_down(k - 1, j, limit.min(residual));
        if sent > 0.0 {
            self.add(k - 1, i, j, sent, fresh);
        }
        sent
    }

    /// Sends up to `limit` along `(2, i) → (1, m) → sink`, two arcs at a time (a layer-1
    /// node's only way on is its arc into the sink); returns the amount sent. `(1, m)` is a
    /// dead end once its arc into the sink is full. `fresh` as for [`Self::push_through`].
    fn send_to_sink(&mut self, i: usize, m: usize, limit: f64, fresh: bool) -> f64 {
        let lower = self.sink_column[m] - self.work.into_sink[0][m];
        if lower <= self.zero {
            self.work.bury(1, m);
            return 0.0;
        }
        let upper = self.residual(1, i, m, fresh);
        if upper <= self.zero {
            return 0.0;
        }
        let amount = limit.min(upper).min(lower);
        self.add(1, i, m, amount, fresh);
        let sink = self.sink as usize;
        if self.sink_column[m] - self.work.carry(0, m, sink, amount) <= self.zero {
            self.work.bury(1, m);
        }
        amount
    }

    /// The capacity of arc `(k + 1, i) → (k, j)`, from where it is kept in order: the arcs
    /// into the sink's position below the source's layer and into layer 1's feeder (each
    /// node of layer 2 tries those two first) from the transposes, the straight ones from the
    /// diagonals.
    #[inline(always)]
    fn capacity(&self, k: usize, i: usize, j: usize) -> f64 {
        match () {
            _ if j == self.sink as usize && k + 1 < self.top => self.graph.arcs_into(k, j)[i],
            _ if j == i => self.graph.diagonals[k][i],
            _ if k == 1 && j == self.feeder => self.graph.arcs_into(1, j)[i],
            _ => self.rows[k].get(i, j),
        }
    }

    /// The residual capacity of arc `(k + 1, i) → (k, j)`; `fresh` when it has carried
    /// nothing yet, so that its flow need not be read.
    #[inline(always)]
    fn residual(&self, k: usize, i: usize, j: usize, fresh: bool) -> f64 {
        let capacity = self.capacity(k, i, j);
        match fresh {
            true => capacity,
            false => capacity - self.work.flow_on(k, i, j),
        }
    }

    /// Adds `amount` to the flow on arc `(k + 1, i) → (k, j)`, `fresh` as for
    /// [`Self::residual`].
    #[inline(always)]
    fn add(&mut self, k: usize, i: usize, j: usize, amount: f64, fresh: bool) {
        match fresh {
            true => self.work.open(k, i, j, amount),
            false => _ = self.work.carry(k, i, j, amount),
        }
    }

    /// The first admissible arc of `u = (k, i)` from its cursor on, if any, as the head's
    /// node and layer and the arc's residual capacity; the cursor is left on that arc.
    /// Arcs are numbered `j < n` down to `(k - 1, j)` (only the sink's from layer 1), then
    /// `n` back up the straight arc to `(k + 1, i)`, then `n + 1 + j` back up to
    /// `(k + 1, j)`, a sender of `u`. Down scans read only the nodes of the next level not
    /// found dead, the sink's position first, and skip the arcs found full; scans up read
    /// only the senders of the next level. Both go a word of positions at a time.
    fn admissible(&mut self, u: usize, k: usize, depth: u32) -> Option<(usize, usize, f64)> {
        let n = self.n;
        let i = u - k * n;
        let sink = self.sink as usize;
        let w = &mut *self.work;
        let words = w.words;
        let next = w.level[u] + 1;
        let mut arc = w.cursor[u] as usize;
        if arc < n {
            if k == 1 {
                // Layer 1 reaches layer 0 only through the sink.
                let residual = self.sink_column[i] - w.into_sink[0][i];
                if arc <= sink && w.level[sink] == next && residual > self.zero {
                    w.cursor[u] = sink as u32;
                    return Some((sink, 0, residual));
                }
            } else if next < depth {
                let caps = self.rows[k - 1].row(i);
                let set = ((k - 1) * w.levels + next as usize) * words;
                if !w.tried_sink[u] {
                    let full = contains(w.full_in(k - 1, i), sink);
                    if arc <= sink && contains(&w.at_level[set..], sink) && !full {
                        let residual = caps[sink] - w.flow_on(k - 1, i, sink);
                        if residual > self.zero {
                            w.cursor[u] = sink as u32;
                            return Some(((k - 1) * n + sink, k - 1, residual));
                        }
                        w.mark_full(k - 1, i, sink);
                    }
                    w.tried_sink[u] = true;
                    arc = 0;
                }
                for word in arc / 64..words {
                    let mut open = w.at_level[set + word] & !w.full_in(k - 1, i)[word];
                    open &= span(word, arc, n);
                    if word == sink / 64 {
                        open &= !(1 << (sink % 64)); // tried first
                    }
                    for j in ones(word, open) {
                        let residual = caps[j] - w.flow_on(k - 1, i, j);
                        if residual > self.zero {
                            w.cursor[u] = j as u32;
                            return Some(((k - 1) * n + j, k - 1, residual));
                        }
                        w.mark_full(k - 1, i, j);
                    }
                }
            }
            arc = n;
        }
        // Up arcs never reach the sink, and those into the source's layer are useless.
        if next < depth && k + 1 < self.top {
            let f = w.straight[k][i];
            if arc == n && w.level[u + n] == next && f > self.zero {
                w.cursor[u] = n as u32;
                return Some((u + n, k + 1, f));
            }
            let set = ((k + 1) * w.levels + next as usize) * words;
            let from = arc.saturating_sub(n + 1);
            for word in from / 64..words {
                let open = w.senders[u * words + word] & w.at_level[set + word];
                for j in ones(word, open & span(word, from, n)) {
                    let f = w.flow_on(k, j, i);
                    if f > self.zero {
                        w.cursor[u] = (n + 1 + j) as u32;
                        return Some(((k + 1) * n + j, k + 1, f));
                    }
                }
            }
        }
        w.cursor[u] = u32::MAX;
        None
    }

    /// Sends `amount` along arc `arc` of `u = (k, i)` (see [`Self::admissible`] for the
    /// numbering); returns the arc's residual capacity left.
    fn send(&mut self, u: usize, k: usize, arc: usize, amount: f64) -> f64 {
        let n = self.n;
        let i = u - k * n;
        let w = &mut *self.work;
        let (layer, from, to, change) = match arc {
            _ if arc < n => (k - 1, i, arc, amount),
            _ if arc == n => (k, i, i, -amount),
            _ => (k, arc - n - 1, i, -amount),
        };
        let flow = w.carry(layer, from, to, change);
        if arc >= n {
            return flow;
        }
        let residual = self.capacity(layer, from, to) - flow;
        if residual <= self.zero && layer > 0 {
            self.work.mark_full(layer, from, to);
        }
        residual
    }
}
