//! Scratch memory for the max-flow searches of [`super::network`], reused across problems.
//!
//! The flow is kept row-major beside the capacities (`flow[k][i * n + j]` on
//! `(k + 1, i) → (k, j)`), so a scan down reads memory in order, except on the two kinds of
//! arc a search uses most, which are kept in order of their tails instead, as the graph
//! keeps their capacities ([`super::network::Graph`]): the arcs into the sink's position
//! (`into_sink[k][i]`; into layer 0 the only arcs that count) and the straight arcs
//! (`straight[k][i]` on `(k + 1, i) → (k, i)`). Every node marks the positions above it
//! whose arc into it has carried flow, straight arcs aside: its other arcs back up, and the
//! entries to reset afterwards, so one workspace serves any number of problems.
//!
//! Scans go by sets of positions held as bits, a word for 64 positions, and read an arc only
//! where every set allows it: while levels are searched, the nodes of a layer not reached
//! yet; in a phase after the first, the nodes of each level not found dead yet; and for
//! every row, the arcs found full (residual at or below the search's zero) since their flow
//! last fell. On peaked attention most arcs a scan meets are full (90–95% of those the
//! breadth-first search read before), and skipping them a word at a time, not one by one,
//! is what pays. The first phase, down the straight paths, keeps a chain of "next node
//! still of use" links per layer (path-halving, as in union–find) over the nodes not yet
//! found to be dead ends.

/// A node no search has reached, or a dead end of the current phase.
pub const UNSEEN: u32 = u32::MAX;

/// Scratch memory for problems with up to `layers` layers of `n` positions.
#[derive(Default)]
pub struct Workspace {
    pub(super) n: usize,
    /// The sink's position and the number of layers of the current problem.
    sink: usize,
    layers: usize,
    /// Per layer `k ≥ 1`, `[n × n]`; the entries of the arcs kept below stay zero.
    flow: Vec<Vec<f64>>,
    /// Per layer, `[n]`: the flow on `(k + 1, i) → (k, sink)`.
    pub(super) into_sink: Vec<Vec<f64>>,
    /// Per layer `k ≥ 1`, `[n]`: the flow on `(k + 1, i) → (k, i)`, `i` not the sink's.
    pub(super) straight: Vec<Vec<f64>>,
    /// Words of 64 bits in a set of positions (`n` bits).
    pub(super) words: usize,
    /// Per node `(k, i)`, `words` words from `(k * n + i) * words`: every `j` whose arc
    /// `(k + 1, j) → (k, i)` has carried flow in this problem, straight arcs aside.
    pub(super) senders: Vec<u64>,
    /// The nodes with senders.
    pub(super) receivers: Vec<u32>,
    /// Per layer `k ≥ 1`, `words` words per row `i`: the arcs `(k + 1, i) → (k, j)` a scan
    /// found full under a zero of at most `full_below`, whose flow has not fallen since. A
    /// clear bit says nothing.
    full: Vec<Vec<u64>>,
    full_below: f64,
    /// The rows with a bit set in `full`, listed once each.
    full_rows: Vec<u32>,
    full_row: Vec<bool>,
    pub(super) level: Vec<u32>,
    /// Per layer `k`, `words` words from `k * words`: the nodes no breadth-first search has
    /// reached yet.
    pub(super) unreached: Vec<u64>,
    /// The first phase's chains: per layer `k`, `n + 1` links from `k * (n + 1)`; following
    /// them from `i` reaches the first node `≥ i` of layer `k` not found dead (`n` when there
    /// is none).
    pub(super) links: Vec<u32>,
    pub(super) cursor: Vec<u32>,
    /// Per node, in a phase after the first: whether its scans down have tried the sink's
    /// position (the widest way on, as in the first phase), which comes before the rest.
    pub(super) tried_sink: Vec<bool>,
    /// After a phase's breadth-first search: per layer `k` and level `λ` below the sink's,
    /// `words` words from `(k * levels + λ) * words`, the nodes of layer `k` at level `λ`
    /// not found dead. A scan down from a node at level `λ - 1` reads only these (after the
    /// first phase, a layer's nodes lie at several levels, and most of a dense row leads to
    /// the wrong one).
    pub(super) at_level: Vec<u64>,
    /// The number of levels each layer has sets for (0 in the first phase, which has none).
    pub(super) levels: usize,
    pub(super) queue: Vec<u32>,
    pub(super) frames: Vec<Frame>,
    /// [`Self::withdraw`]'s scratch: per node, the share of its flow from the source, and
    /// the dues of one layer and the next.
    share: Vec<f64>,
    due: Vec<f64>,
    due_above: Vec<f64>,
}

/// The bits of word `w` of a set of positions that lie in `from..end`.
#[inline(always)]
pub(super) fn span(w: usize, from: usize, end: usize) -> u64 {
    let mut bits = u64::MAX;
    if w == from / 64 {
        bits &= u64::MAX << (from % 64);
    }
    if end < (w + 1) * 64 {
        bits &= (1 << (end % 64)) - 1;
    }
    bits
}

/// Whether position `i` is in the set whose words begin `bits`.
#[inline(always)]
pub(super) fn contains(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 == 1
}

/// Puts position `i` in the set whose words begin `bits`.
#[inline(always)]
fn insert(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

/// Takes position `i` out of the set whose words begin `bits`.
#[inline(always)]
fn remove(bits: &mut [u64], i: usize) {
    bits[i / 64] &= !(1 << (i % 64));
}

/// The positions of the bits set in `bits`, word `w` of a set, in order.
#[inline(always)]
pub(super) fn ones(w: usize, mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (bits != 0).then(|| {
            let j = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            j
        })
    })
}

impl Workspace {
    pub(super) fn prepare(&mut self, layers: usize, n: usize, sink: usize) {
        if self.n != n {
            *self = Self {
                n,
                words: n.div_ceil(64),
                ..Self::default()
            };
        }
        (self.sink, self.layers) = (sink, layers);
        while self.flow.len() < layers {
            // Zeros written, not allocated zeroed: a zeroed allocation maps the shared zero
            // page, and the search's first write to each page then costs a copy-on-write
            // fault that stops every thread of the process to flush its TLB. Into layer 0
            // only the arcs into the sink count.
            let size = if self.flow.is_empty() { 0 } else { n * n };
            let mut flow = Vec::with_capacity(size);
            flow.resize(size, 0.0);
            self.flow.push(flow);
            self.into_sink.push(vec![0.0; n]);
            self.straight.push(vec![0.0; n]);
            let bits = if self.full.is_empty() {
                0
            } else {
                n * self.words
            };
            self.full.push(vec![0; bits]);
        }
        let nodes = (layers + 1) * n;
        if self.links.len() < (layers + 1) * (n + 1) {
            self.links.resize((layers + 1) * (n + 1), 0);
            self.unreached.resize((layers + 1) * self.words, 0);
        }
        if self.level.len() < nodes {
            self.level.resize(nodes, UNSEEN);
            self.cursor.resize(nodes, 0);
            self.tried_sink.resize(nodes, false);
            self.full_row.resize(nodes, false);
            self.senders.resize(nodes * self.words, 0);
        }
    }

    pub(super) fn reset(&mut self) {
        let (n, words) = (self.n, self.words);
        let mut receivers = std::mem::take(&mut self.receivers);
        for &v in &receivers {
            let (k, i) = (v as usize / n, v as usize % n);
            for w in 0..words {
                let senders = std::mem::take(&mut self.senders[v as usize * words + w]);
                for j in ones(w, senders) {
                    *self.slot(k, j, i) = 0.0;
                }
            }
        }
        receivers.clear();
        self.receivers = receivers;
        for straight in self.straight.iter_mut().take(self.layers).skip(1) {
            straight.fill(0.0);
        }
        self.forget_full();
    }

    /// Readies the marks of full arcs for a search whose zero is `zero`: those made under a
    /// larger one are dropped.
    pub(super) fn full_under(&mut self, zero: f64) {
        if zero < self.full_below {
            self.forget_full();
        }
        self.full_below = zero;
    }

    fn forget_full(&mut self) {
        let (n, words) = (self.n, self.words);
        for &row in &self.full_rows {
            let (k, i) = (row as usize / n, row as usize % n);
            self.full[k][i * words..(i + 1) * words].fill(0);
            self.full_row[row as usize] = false;
        }
        self.full_rows.clear();
    }

    /// The arcs of row `(k + 1, from)`, `k ≥ 1`, found full, as a set of their heads.
    #[inline(always)]
    pub(super) fn full_in(&self, k: usize, from: usize) -> &[u64] {
        &self.full[k][from * self.words..(from + 1) * self.words]
    }

    /// Arc `(k + 1, from) → (k, to)`, `k ≥ 1`, was found with its residual at or below the
    /// zero.
    #[inline(always)]
    pub(super) fn mark_full(&mut self, k: usize, from: usize, to: usize) {
        let row = k * self.n + from;
        if !self.full_row[row] {
            self.full_row[row] = true;
            self.full_rows.push(row as u32);
        }
        insert(&mut self.full[k][from * self.words..], to);
    }

    /// The flow on arc `(k + 1, from) → (k, to)` (into layer 0, `to` is the sink).
    #[inline(always)]
    pub(super) fn flow_on(&self, k: usize, from: usize, to: usize) -> f64 {
        match () {
            _ if to == self.sink => self.into_sink[k][from],
            _ if to == from => self.straight[k][from],
            _ => self.flow[k][from * self.n + to],
        }
    }

    #[inline(always)]
    fn slot(&mut self, k: usize, from: usize, to: usize) -> &mut f64 {
        match () {
            _ if to == self.sink => &mut self.into_sink[k][from],
            _ if to == from => &mut self.straight[k][from],
            _ => &mut self.flow[k][from * self.n + to],
        }
    }

    /// Changes the flow on arc `(k + 1, from) → (k, to)` by `change`; returns the new flow.
    #[inline(always)]
    pub(super) fn carry(&mut self, k: usize, from: usize, to: usize, change: f64) -> f64 {
        let recorded = to != from || to == self.sink;
        let flow = self.slot(k, from, to);
        let before = *flow;
        *flow += change;
        let after = *flow;
        if before == 0.0 && recorded {
            self.record(k, from, to);
        }
        if change < 0.0 && k > 0 {
            // Not full any more, if it was.
            remove(&mut self.full[k][from * self.words..], to);
        }
        after
    }

    /// Puts `amount` on arc `(k + 1, from) → (k, to)`, neither straight nor into the sink's
    /// position, which has carried nothing in this problem: its flow is written, not read.
    #[inline(always)]
    pub(super) fn open(&mut self, k: usize, from: usize, to: usize, amount: f64) {
        debug_assert!(
            from != to && to != self.sink,
            "a straight arc or one into the sink"
        );
        debug_assert!(
            self.flow[k][from * self.n + to] == 0.0,
            "an arc that carried flow"
        );
        self.flow[k][from * self.n + to] = amount;
        self.record(k, from, to);
    }

    /// Counts `from` among the senders of `(k, to)`.
    #[inline(always)]
    fn record(&mut self, k: usize, from: usize, to: usize) {
        let node = k * self.n + to;
        let senders = &mut self.senders[node * self.words..(node + 1) * self.words];
        if contains(senders, from) {
            return;
        }
        if senders.iter().all(|&word| word == 0) {
            self.receivers.push(node as u32);
        }
        insert(senders, from);
    }

    /// Takes up to `amount` of the flow arriving at `(0, sink)` off the arcs that carry it
    /// from `source`, a node of layer `top` (the layer of the search's source, or one below);
    /// returns the amount taken (all of it, up to rounding, when that much arrives).
    ///
    /// The flow held may also come from other nodes of that layer (what [`super::network`]'s
    /// reroute sent round `source`), so first a pass down the layers finds the share of each
    /// node's flow that started at `source`: all of it at `source`, none at the others of its
    /// layer, below that the flows arriving weighted by their tails' shares. Then one pass up:
    /// each node's due is taken off its arcs in, each at most the share of its flow that
    /// started at `source` (the straight arc first), and becomes their tails' dues. A node's
    /// due never exceeds the flow from `source` that arrives there, so `source` gives up all
    /// of `amount` when that much of its flow reaches the sink. Each pass reads each arc that
    /// carries flow once. Following the paths from `source` one at a time instead, as this
    /// did before, costs as many reads as there are paths: on peaked attention that was 99.5%
    /// of the time (scripts/bench/RESULTS.md).
    pub(super) fn withdraw(&mut self, amount: f64, top: usize, source: usize) -> f64 {
        let n = self.n;
        let mut share = std::mem::take(&mut self.share);
        share.clear();
        share.resize((top + 1) * n, 0.0);
        share[top * n + source] = 1.0;
        for k in (0..top).rev() {
            for to in 0..n {
                if k == 0 && to != self.sink {
                    continue; // into layer 0 only the arcs into the sink count
                }
                let (mut arriving, mut from_source) = (0.0, 0.0);
                self.each_sender(k, to, |work, from| {
                    let flow = work.flow_on(k, from, to);
                    arriving += flow;
                    from_source += flow * share[(k + 1) * n + from];
                });
                if arriving > 0.0 {
                    share[k * n + to] = (from_source / arriving).min(1.0);
                }
            }
        }
        let mut due = std::mem::take(&mut self.due);
        due.clear();
        due.resize(n, 0.0);
        let mut above = std::mem::take(&mut self.due_above);
        above.clear();
        above.resize(n, 0.0);
        due[self.sink] = amount;
        for k in 0..top {
            for (to, &owed) in due.iter().enumerate() {
                let mut left = owed;
                if left <= 0.0 {
                    continue;
                }
                self.each_sender(k, to, |work, from| {
                    let ours = work.flow_on(k, from, to) * share[(k + 1) * n + from];
                    let got = ours.min(left);
                    if got > 0.0 {
                        work.carry(k, from, to, -got);
                        above[from] += got;
                        left -= got;
                    }
                });
            }
            std::mem::swap(&mut due, &mut above);
            above.fill(0.0);
        }
        let taken = due[source];
        (self.share, self.due, self.due_above) = (share, due, above);
        taken
    }

    /// Calls `visit(self, from)` once for each position `from` whose arc into `(k, to)` has
    /// carried flow in this problem: its straight arc first, then its senders in order.
    fn each_sender(&mut self, k: usize, to: usize, mut visit: impl FnMut(&mut Self, usize)) {
        let node = k * self.n + to;
        // Straight arcs are not among the senders, except into the sink's position.
        if to != self.sink && k > 0 {
            visit(self, to);
        }
        for w in 0..self.words {
            for from in ones(w, self.senders[node * self.words + w]) {
                visit(self, from);
            }
        }
    }

    /// The first node `≥ i` of layer `k` still in the chain (`n` when none is left).
    pub(super) fn chained_from(&mut self, k: usize, i: usize) -> usize {
        let base = k * (self.n + 1);
        first_in_chain(&mut self.links[base..base + self.n + 1], i)
    }

    /// Every node of layers `1..top` is not reached yet.
    pub(super) fn unreach(&mut self, top: usize) {
        let (n, words) = (self.n, self.words);
        for k in 1..top {
            for (w, word) in self.unreached[k * words..(k + 1) * words]
                .iter_mut()
                .enumerate()
            {
                *word = span(w, 0, n);
            }
        }
    }

    /// A breadth-first search reaches node `(k, i)` at `level`: labelled, queued and out of
    /// its layer's set of nodes not reached yet.
    pub(super) fn reach(&mut self, k: usize, i: usize, level: u32) {
        self.level[k * self.n + i] = level;
        self.queue.push((k * self.n + i) as u32);
        remove(&mut self.unreached[k * self.words..], i);
    }

    /// Takes node `(k, i)` out of its layer's chain.
    pub(super) fn unchain(&mut self, k: usize, i: usize) {
        self.links[k * (self.n + 1) + i] = (i + 1) as u32;
    }

    /// Puts every node of layers `1..top` in the chain.
    pub(super) fn chain(&mut self, top: usize) {
        let n = self.n;
        for k in 1..top {
            let links = &mut self.links[k * (n + 1)..(k + 1) * (n + 1)];
            for (i, link) in links.iter_mut().enumerate() {
                *link = i as u32;
            }
        }
    }

    /// Sorts the nodes of layers `1..top` into [`Self::at_level`] by their levels below
    /// `depth`.
    pub(super) fn sort_by_level(&mut self, top: usize, depth: u32) {
        let (n, words) = (self.n, self.words);
        let levels = depth as usize;
        self.levels = levels;
        self.at_level.clear();
        self.at_level.resize((top + 1) * levels * words, 0);
        for k in 1..top {
            for i in 0..n {
                let level = self.level[k * n + i];
                if level < depth {
                    let set = k * levels + level as usize;
                    insert(&mut self.at_level[set * words..], i);
                }
            }
        }
    }

    /// Node `(k, i)` is a dead end for the rest of the phase.
    pub(super) fn bury(&mut self, k: usize, i: usize) {
        let level = std::mem::replace(&mut self.level[k * self.n + i], UNSEEN) as usize;
        self.unchain(k, i);
        // Only layers 1..L have sets of levels.
        if level < self.levels && (1..self.layers).contains(&k) {
            let set = k * self.levels + level;
            remove(&mut self.at_level[set * self.words..], i);
        }
    }
}

/// The first position `≥ i` still in a chain of path-halving links (a position links to
/// itself while in the chain, and to a later one once out; the last link ends it), halving
/// the path walked as it goes.
pub(super) fn first_in_chain(links: &mut [u32], mut i: usize) -> usize {
    while links[i] as usize != i {
        let skip = links[links[i] as usize];
        links[i] = skip;
        i = skip as usize;
    }
    i
}

/// One node on the depth-first path: what it may pass on (`limit`) and has passed on.
pub(super) struct Frame {
    pub(super) node: usize,
    pub(super) layer: usize,
    pub(super) limit: f64,
    pub(super) sent: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Layer 2 holds the old source (position 0) and a position the reroute sent flow through
    /// (1); both feed (1, 2), which feeds the sink (0, 3). Withdrawing from the old source
    /// must leave the rerouted flow where it is, whatever order the arcs were opened in.
    #[test]
    fn withdrawing_takes_only_the_flow_that_started_at_the_source() {
        let mut work = Workspace::default();
        let (n, sink) = (4, 3);
        work.prepare(2, n, sink);
        work.carry(1, 1, 2, 0.3); // rerouted, opened first
        work.carry(1, 0, 2, 0.2); // from the old source
        work.carry(0, 2, sink, 0.5);
        let taken = work.withdraw(0.2, 2, 0);
        assert_eq!(taken, 0.2);
        assert_eq!(work.flow_on(1, 0, 2), 0.0);
        assert_eq!(work.flow_on(1, 1, 2), 0.3);
        assert!((work.flow_on(0, 2, sink) - 0.3).abs() < 1e-15);
        // No more than arrives from the source can be taken.
        assert_eq!(work.withdraw(0.1, 2, 0), 0.0);
        assert_eq!(work.flow_on(1, 1, 2), 0.3);
    }
}
