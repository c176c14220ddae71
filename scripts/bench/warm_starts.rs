//! Where else could a flow search start? A measurement for issue 31, independent of the
//! engine: a plain Dinic (breadth-first levels over every residual arc, a recursive
//! depth-first search with a cursor per node) on one stack's fused, residual-augmented
//! layers, counting its work. No part of the engine is used; the counts compare starts
//! with each other, not with the engine.
//!
//!     rustc -O --edition 2021 -o /tmp/warm_starts scripts/bench/warm_starts.rs
//!     [BUDGET=F] /tmp/warm_starts STACK.npy POSITION LAYER MODE
//!
//! STACK.npy: float32 `[layers, heads, n, n]` (scripts/bench/peaked_flow.py's stacks); the
//! heads are averaged, then `0.5 · A + 0.5 · I`, rows renormalised (SPEC §1, α = 0.5).
//! Every flow is from `(LAYER, source)` to `(0, sink)`. MODE:
//!
//! - `sinks`: source POSITION, every sink; each flow from none ("cold"), from the maximum
//!   flow of the layer below into the same sink (fed down the straight arc, the excess
//!   withdrawn), and from the maximum flow into the sink before (that sink made a second
//!   source through its arcs back up, then what still enters it withdrawn);
//! - `sources`: sinks 0, 17, 60 and 100, every source; cold, from below, and from the
//!   maximum flow from the position before at the same layer into the same sink (its arcs
//!   out of the source kept where the new source's arcs allow, the excess withdrawn);
//! - `reroute`: source POSITION, every sink; from below as in `sinks`, and from below with
//!   what the straight arc cannot carry first moved onto paths from the new source back to
//!   `(LAYER - 1, POSITION)` (a search with that node as its target; what it cannot move
//!   is withdrawn);
//! - `push`: source POSITION, every sink; from below as in `sinks`, then this Dinic against
//!   a highest-label push–relabel's first stage from the same start ([`Preflow`]; a global
//!   relabelling after every F times the arcs' count of arc reads, F = 1 unless BUDGET
//!   says), with their times;
//! - `pseudo`: the same with a highest-label pseudoflow ([`Pseudoflow`]; no global labels:
//!   strong trees that cannot reach a weak node frozen by a search back from the weak nodes
//!   at the start and after every 2 times the arcs' count of arc reads), its value the
//!   capacity of the minimum cut its strong nodes make;
//! - `hub`: source POSITION, every sink; from below as in `sinks`, and from another
//!   position's maximum flow one layer down fed down the new source's arc into it (position
//!   HUB, 0 unless said, and the four the source's row sends most to after its own, the
//!   fewest steps per sink kept), and from both its own flow below and the first of those
//!   four's, added, any arc they overfill relieved ([`added`]);
//! - `above`: source POSITION, every sink; from below as in `sinks`, and from above: the
//!   maximum flow from `(LAYER + 1, POSITION)` into the same sink, less what it sends through
//!   the other positions of layer LAYER (withdrawn down along the arcs that carry it), so the
//!   part that passes through `(LAYER, POSITION)`: the start of each layer's search if the
//!   layers were climbed down from the top instead of up (LAYER below the stack's layers);
//! - `batch`: source POSITION, every sink; from below as in `sinks`, and from one flow into
//!   every sink at once (layer 0 as one sink, a maximum flow from none, its work counted
//!   apart), what it sends into the other sinks withdrawn up to the source;
//! - `resink`: source POSITION, every sink in turn from one preflow kept from sink to sink
//!   (Hao and Orlin's sinks in turn: what entered the sink before left as excess where it
//!   came from, every excess no path took left where it is), beside from below as in
//!   `sinks`; RESINK says how the excess moves on: `levels` (this Dinic, its levels from
//!   the source and every node with excess; the default), `back` (this Dinic, its levels
//!   the distances back to the sink) or `push` (the push–relabel of `push`, BUDGET 1);
//!   prints the searches' seconds too;
//! - `bounds`: source POSITION, every sink; how often two upper bounds equal the maximum
//!   flow (to 1e-13, relative): the engine's (what can reach each layer-1 node, bounds.rs)
//!   and the least over layers k of `Σ_m min(reach_k(m), drain_k(m))`, where `drain_k(m)`
//!   bounds what can leave `(k, m)` for the sink, computed up from the sink the same way;
//! - `cuts`: source POSITION, layers 3 to LAYER climbed from below, every sink (every
//!   STRIDE-th if said); for the flows that differ from the flow one layer down, so that no
//!   lift settles them, the arcs (above the zero) their minimum cuts cross: any exact
//!   method that builds those flows puts flow on each of those arcs ([`cuts`]);
//! - `waves`: the same flows (every STRIDE-th sink if said), each from the same start by
//!   this Dinic and by one whose blocking flows are Karzanov's waves ([`Net::waves`]):
//!   pushes and returns in place of depth-first steps, the arcs each one's blocking flows
//!   read (reads), and the time of each.
//!
//! Prints the depth-first steps (arcs advanced along; a push–relabel's pushes) and
//! breadth-first scans (arcs read; all a push–relabel's reads) of each start in total, and
//! the largest difference from the cold flows.

use std::time::Instant;

const EPS: f64 = 1e-14;
const UNSEEN: u32 = u32::MAX;

/// The flow problem from `(top, ·)` into `(0, sink)` over `caps[k]` (`n × n`, the arcs
/// `(k + 1, i) → (k, j)`), with the work done so far.
#[derive(Clone)]
struct Net<'a> {
    n: usize,
    top: usize,
    caps: &'a [Vec<f64>],
    flow: Vec<Vec<f64>>,
    sink: usize,
    /// Where the searches end: the sink, or while rerouting a node (`from_below`).
    target: usize,
    /// Whether every position of layer 0 is a sink (`batch`), not only `sink`.
    every_sink: bool,
    /// The target's level in the last breadth-first search.
    depth: u32,
    /// Whether `level` holds the distances back to the target ([`Net::levels_back`]), not
    /// the levels from the sources ([`Net::levels`]).
    back: bool,
    level: Vec<u32>,
    /// The nodes the last breadth-first search reached, in order of level.
    order: Vec<usize>,
    cursor: Vec<usize>,
    steps: u64,
    scans: u64,
    /// Arcs read by the blocking flows' cursors (`waves` prints them).
    reads: u64,
}

impl<'a> Net<'a> {
    fn new(caps: &'a [Vec<f64>], top: usize, sink: usize) -> Self {
        let n = positions(caps);
        let nodes = (top + 1) * n;
        Net {
            n,
            top,
            caps,
            flow: vec![vec![0.0; n * n]; top],
            sink,
            target: sink,
            every_sink: false,
            depth: UNSEEN,
            back: false,
            level: vec![UNSEEN; nodes],
            order: Vec::new(),
            cursor: vec![0; nodes],
            steps: 0,
            scans: 0,
            reads: 0,
        }
    }

    /// Arc `a` of node `u = (k, i)`: `a < n` down to `(k - 1, a)` (from layer 1 only into
    /// the sink), `n + m` back up to `(k + 1, m)`. Its head and residual capacity.
    fn arc(&self, u: usize, a: usize) -> (usize, f64) {
        let n = self.n;
        let (k, i) = (u / n, u % n);
        if a < n {
            if k == 0 || (k == 1 && a != self.sink && !self.every_sink) {
                return (0, 0.0);
            }
            let residual = self.caps[k - 1][i * n + a] - self.flow[k - 1][i * n + a];
            ((k - 1) * n + a, residual)
        } else if k < self.top {
            let m = a - n;
            ((k + 1) * n + m, self.flow[k][m * n + i])
        } else {
            (0, 0.0)
        }
    }

    fn push(&mut self, u: usize, a: usize, amount: f64) {
        let n = self.n;
        let (k, i) = (u / n, u % n);
        match a < n {
            true => self.flow[k - 1][i * n + a] += amount,
            false => self.flow[k][(a - n) * n + i] -= amount,
        }
    }

    /// Breadth-first levels from `sources`; whether the target is reachable.
    fn levels(&mut self, sources: &[usize]) -> bool {
        self.back = false;
        self.level.fill(UNSEEN);
        let mut queue = std::mem::take(&mut self.order);
        queue.clear();
        queue.extend_from_slice(sources);
        for &s in sources {
            self.level[s] = 0;
        }
        let mut depth = UNSEEN;
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head];
            head += 1;
            if self.level[u] >= depth {
                break;
            }
            for a in 0..2 * self.n {
                self.scans += 1;
                let (v, residual) = self.arc(u, a);
                if residual > EPS && self.level[v] == UNSEEN {
                    self.level[v] = self.level[u] + 1;
                    if self.ends(v) {
                        depth = self.level[v];
                    }
                    queue.push(v);
                }
            }
        }
        self.depth = depth;
        self.order = queue;
        depth != UNSEEN
    }

    /// Whether the searches end at `u`.
    fn ends(&self, u: usize) -> bool {
        u == self.target || (self.every_sink && u < self.n)
    }

    /// Whether the arc from `u` into `v` leads on in the level graph: from the sources, to a
    /// node one level further, short of the target's level or the target; back from the
    /// target, to a node one step nearer it.
    fn admits(&self, u: usize, v: usize) -> bool {
        match self.back {
            true => self.level[v] != UNSEEN && self.level[v] + 1 == self.level[u],
            false => {
                self.level[v] == self.level[u] + 1 && (self.ends(v) || self.level[v] < self.depth)
            }
        }
    }

    fn search(&mut self, u: usize, limit: f64) -> f64 {
        if self.ends(u) {
            return limit;
        }
        let mut sent = 0.0;
        while self.cursor[u] < 2 * self.n {
            let a = self.cursor[u];
            self.reads += 1;
            let (v, residual) = self.arc(u, a);
            if residual > EPS && self.admits(u, v) {
                self.steps += 1;
                let got = self.search(v, (limit - sent).min(residual));
                if got > 0.0 {
                    self.push(u, a, got);
                    sent += got;
                }
                if limit - sent <= EPS {
                    return sent;
                }
            }
            self.cursor[u] += 1;
        }
        sent
    }

    /// Augments to a maximum flow from `sources` into the sink; returns what enters it.
    fn solve(&mut self, sources: &[usize]) -> f64 {
        self.augment(sources, f64::INFINITY);
        self.entering(self.sink)
    }

    /// Augments from `sources` into the target until `limit` or a maximum; returns the
    /// amount.
    fn augment(&mut self, sources: &[usize], limit: f64) -> f64 {
        let mut sent = 0.0;
        while limit - sent > EPS && self.levels(sources) {
            self.cursor.fill(0);
            for &s in sources {
                sent += self.search(s, limit - sent);
            }
        }
        sent
    }

    /// What enters `(0, i)`.
    fn entering(&self, i: usize) -> f64 {
        (0..self.n).map(|m| self.flow[0][m * self.n + i]).sum()
    }

    /// Takes `amount` off what enters `(k, i)`, back along the arcs that carry it up to the
    /// source; returns what was taken.
    fn withdraw_up(&mut self, k: usize, i: usize, amount: f64) -> f64 {
        if k == self.top {
            return amount;
        }
        self.withdraw(k, i, amount, true)
    }

    /// Takes `amount` off what leaves `(k, i)`, down along the arcs that carry it to the
    /// sink; returns what was taken.
    fn withdraw_down(&mut self, k: usize, i: usize, amount: f64) -> f64 {
        if k == 0 {
            return amount;
        }
        self.withdraw(k, i, amount, false)
    }

    fn withdraw(&mut self, k: usize, i: usize, mut amount: f64, up: bool) -> f64 {
        let n = self.n;
        let mut taken = 0.0;
        for m in 0..n {
            if amount <= 0.0 {
                break;
            }
            let (layer, slot) = match up {
                true => (k, m * n + i),
                false => (k - 1, i * n + m),
            };
            let carried = self.flow[layer][slot];
            if carried > 0.0 {
                self.steps += 1;
                let want = carried.min(amount);
                let got = match up {
                    true => self.withdraw_up(k + 1, m, want),
                    false => self.withdraw_down(k - 1, m, want),
                };
                self.flow[layer][slot] -= got;
                amount -= got;
                taken += got;
            }
        }
        taken
    }
}

/// A highest-label push–relabel's first stage (a maximum preflow: what reaches the sink is
/// the maximum flow), from whatever flow the net holds: every arc out of the source filled,
/// labels the exact residual distances to the sink (a breadth-first search back from it) at
/// the start and after every `budget` arc reads, and the gap rule. Its pushes are counted as
/// steps, and every arc it reads (discharges, relabels, the searches back) as scans.
struct Preflow {
    excess: Vec<f64>,
    label: Vec<u32>,
    /// Nodes with excess, by label (entries go stale when a label changes; checked on use).
    active: Vec<Vec<usize>>,
    /// Nodes per label below `nodes`.
    count: Vec<u32>,
    pushes: u64,
    relabels: u64,
    globals: u64,
}

impl Preflow {
    /// No excess, every label `nodes` (no path), nothing counted.
    fn new(nodes: usize) -> Self {
        Preflow {
            excess: vec![0.0; nodes],
            label: vec![nodes as u32; nodes],
            active: vec![Vec::new(); nodes],
            count: vec![0; nodes + 1],
            pushes: 0,
            relabels: 0,
            globals: 0,
        }
    }
}

impl<'a> Net<'a> {
    fn preflow(&mut self, source: usize, budget: f64) -> (f64, Preflow) {
        let n = self.n;
        let nodes = (self.top + 1) * n;
        let s = self.top * n + source;
        let mut p = Preflow::new(nodes);
        self.fill_source(&mut p, s);
        self.steps += p.pushes;
        self.relabel_all(&mut p, s);
        self.discharge_all(&mut p, s, budget);
        (self.entering(self.sink), p)
    }

    /// Fills every arc out of the source `s`, its amounts excess below.
    fn fill_source(&mut self, p: &mut Preflow, s: usize) {
        for a in 0..self.n {
            self.scans += 1;
            let (v, residual) = self.arc(s, a);
            if residual > EPS {
                self.push(s, a, residual);
                p.excess[v] += residual;
                p.pushes += 1;
            }
        }
    }

    /// Discharges every active node, highest label first, until none that can reach the
    /// sink holds any excess; labels valid for the sink on entry.
    fn discharge_all(&mut self, p: &mut Preflow, s: usize, budget: f64) {
        let n = self.n;
        let nodes = p.label.len();
        let pushes = p.pushes;
        let every = (budget * (2 * self.top * n * n) as f64) as u64;
        let mut since = self.scans;
        let mut highest = nodes - 1;
        loop {
            while highest > 0 && p.active[highest].is_empty() {
                highest -= 1;
            }
            let Some(u) = p.active[highest].pop() else {
                break;
            };
            if p.label[u] as usize != highest || p.excess[u] <= EPS {
                continue;
            }
            self.discharge(u, p);
            // Its pushes went one label below its last.
            highest = highest.max(p.label[u].min(nodes as u32 - 1) as usize);
            if self.scans - since > every {
                self.relabel_all(p, s);
                since = self.scans;
                highest = nodes - 1;
            } else if p.label[u] < nodes as u32 && p.excess[u] > EPS {
                p.active[p.label[u] as usize].push(u);
                highest = highest.max(p.label[u] as usize);
            }
        }
        self.steps += p.pushes - pushes;
    }

    /// Pushes `u`'s excess down admissible arcs, relabelling it when none is left, until it
    /// has none or its label reaches `nodes` (no path to the sink is left).
    fn discharge(&mut self, u: usize, p: &mut Preflow) {
        let n = self.n;
        let nodes = p.label.len() as u32;
        loop {
            while self.cursor[u] < 2 * n {
                let a = self.cursor[u];
                self.scans += 1;
                let (v, residual) = self.arc(u, a);
                if residual > EPS && p.label[v] + 1 == p.label[u] {
                    let amount = p.excess[u].min(residual);
                    self.push(u, a, amount);
                    p.pushes += 1;
                    p.excess[u] -= amount;
                    let was = p.excess[v];
                    p.excess[v] += amount;
                    if was <= EPS && v != self.sink && p.excess[v] > EPS {
                        p.active[p.label[v] as usize].push(v);
                    }
                    if p.excess[u] <= EPS {
                        return;
                    }
                }
                self.cursor[u] += 1;
            }
            p.relabels += 1;
            let old = p.label[u];
            let mut least = nodes;
            for a in 0..2 * n {
                self.scans += 1;
                let (v, residual) = self.arc(u, a);
                if residual > EPS {
                    least = least.min(p.label[v] + 1);
                }
            }
            self.cursor[u] = 0;
            p.count[old as usize] -= 1;
            if p.count[old as usize] == 0 {
                // Nothing is left at `old`: no node above it can reach the sink.
                self.scans += p.label.len() as u64;
                for w in 0..p.label.len() {
                    if p.label[w] > old && p.label[w] < nodes {
                        p.count[p.label[w] as usize] -= 1;
                        p.label[w] = nodes;
                    }
                }
                p.label[u] = nodes;
                return;
            }
            p.label[u] = least.min(nodes);
            if least >= nodes {
                return;
            }
            p.count[least as usize] += 1;
        }
    }

    /// The arcs into `v` = `(k, i)` and their residual capacities: from `(k + 1, m)` down
    /// (into layer 0 only the sink's), and from `(k - 1, m)` back up; each read counted.
    fn arcs_into(&mut self, v: usize) -> Vec<(usize, f64)> {
        let n = self.n;
        let (k, i) = (v / n, v % n);
        let mut arcs = Vec::with_capacity(2 * n);
        if k < self.top && (k > 0 || i == self.sink) {
            let down = (0..n).map(|m| (m, self.caps[k][m * n + i] - self.flow[k][m * n + i]));
            arcs.extend(down.map(|(m, residual)| ((k + 1) * n + m, residual)));
        }
        if k > 0 {
            arcs.extend((0..n).map(|m| ((k - 1) * n + m, self.flow[k - 1][i * n + m])));
        }
        self.scans += arcs.len() as u64;
        arcs
    }

    /// Every label the residual distance to the sink (`nodes` where there is no path), and
    /// the active nodes bucketed again.
    fn relabel_all(&mut self, p: &mut Preflow, s: usize) {
        let nodes = p.label.len();
        p.globals += 1;
        p.label.fill(nodes as u32);
        p.count.fill(0);
        p.label[self.sink] = 0;
        p.count[0] = 1;
        let mut queue = vec![self.sink];
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head];
            head += 1;
            for (u, residual) in self.arcs_into(v) {
                if residual > EPS && u != s && p.label[u] == nodes as u32 {
                    p.label[u] = p.label[v] + 1;
                    p.count[p.label[u] as usize] += 1;
                    queue.push(u);
                }
            }
        }
        p.active.iter_mut().for_each(Vec::clear);
        for u in 0..nodes {
            if u != self.sink && u != s && p.excess[u] > EPS && p.label[u] < nodes as u32 {
                p.active[p.label[u] as usize].push(u);
            }
        }
        self.cursor.fill(0);
    }
}

/// The maximum flow from `(top, source)` into `sink`, started from the maximum flow one
/// layer down ([`warm`]).
fn from_below<'a>(
    caps: &'a [Vec<f64>],
    top: usize,
    source: usize,
    sink: usize,
    reroute: bool,
) -> Net<'a> {
    let n = positions(caps);
    let mut net = warm(caps, top, source, sink, reroute);
    net.solve(&[top * n + source]);
    net
}

/// The start from below of a flow from `(top, source)` into `sink`: the maximum flow one
/// layer down fed down the straight arc, what the arc cannot carry withdrawn, or with
/// `reroute` first moved where it can onto paths from the new source that take over what
/// `(top - 1, source)` sends (a search from the new source to that node).
fn warm<'a>(
    caps: &'a [Vec<f64>],
    top: usize,
    source: usize,
    sink: usize,
    reroute: bool,
) -> Net<'a> {
    warm_via(caps, top, source, source, sink, reroute)
}

/// The same from the maximum flow one layer down from `(top - 1, via)`, fed down the arc
/// from the new source into that node.
fn warm_via<'a>(
    caps: &'a [Vec<f64>],
    top: usize,
    source: usize,
    via: usize,
    sink: usize,
    reroute: bool,
) -> Net<'a> {
    let n = positions(caps);
    let mut below = Net::new(caps, top - 1, sink);
    below.solve(&[(top - 1) * n + via]);
    fed_up(&below, source, via, reroute)
}

/// A start one layer above `below`'s maximum flow from `(top - 1, via)`: that flow fed down
/// the arc from `(top, source)` into `(top - 1, via)`, what the arc cannot carry withdrawn
/// (or with `reroute` first moved as in [`warm_via`]).
fn fed_up<'a>(below: &Net<'a>, source: usize, via: usize, reroute: bool) -> Net<'a> {
    let (n, caps, sink, top) = (below.n, below.caps, below.sink, below.top + 1);
    let value = below.entering(sink);
    let mut net = Net::new(caps, top, sink);
    net.flow[..top - 1].clone_from_slice(&below.flow);
    let through = value.min(caps[top - 1][source * n + via]);
    net.flow[top - 1][source * n + via] = through;
    let mut excess = value - through;
    if excess > 0.0 && reroute {
        net.target = (top - 1) * n + via;
        excess -= net.augment(&[top * n + source], excess);
        net.target = sink;
    }
    if excess > 0.0 {
        net.withdraw_down(top - 1, via, excess);
    }
    net
}

/// Two starts of the same flow added (their flows and their work), and wherever the sum
/// overfills an arc, layer by layer from the top, the overflow taken off it, back up to the
/// source and down to the sink along the arcs that carry it.
fn added<'a>(mut net: Net<'a>, other: &Net) -> Net<'a> {
    let (n, caps) = (net.n, net.caps);
    for (ours, theirs) in net.flow.iter_mut().zip(&other.flow) {
        ours.iter_mut().zip(theirs).for_each(|(a, b)| *a += b);
    }
    net.steps += other.steps;
    net.scans += other.scans;
    for k in (0..net.top).rev() {
        for (arc, &cap) in caps[k].iter().enumerate().take(n * n) {
            let over = net.flow[k][arc] - cap;
            if over > 0.0 {
                net.flow[k][arc] -= over;
                net.withdraw_up(k + 1, arc / n, over);
                net.withdraw_down(k, arc % n, over);
            }
        }
    }
    net
}

/// Each sink's flow from below (the source's own flow one layer down) beside starts from
/// the flow one layer down from another position `x`, fed down the source's arc into
/// `(top - 1, x)` ([`warm_via`]): `x` = HUB (0 unless said) and each of the `CANDIDATES`
/// positions the source's row sends most to after its own, the best of them per sink
/// (fewest steps) kept; and from the source's own start and the first candidate's
/// [`added`]. The work at `top` only (the withdrawals and the search), as for `from_below`:
/// each start's flow below is solved first, uncounted.
fn hub(caps: &[Vec<f64>], top: usize, source: usize) {
    const CANDIDATES: usize = 4;
    let n = positions(caps);
    let hub: usize = std::env::var("HUB").map_or(0, |h| h.parse().expect("a position"));
    let row = &caps[top - 1][source * n..(source + 1) * n];
    let mut order: Vec<usize> = (0..n).filter(|&x| x != source).collect();
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
    order.truncate(CANDIDATES);
    println!(
        "source's row: own {:.3}, hub {hub} {:.3}, candidates {:?}",
        row[source],
        row[hub],
        order
            .iter()
            .map(|&x| (x, (row[x] * 1e3).round() / 1e3))
            .collect::<Vec<_>>()
    );
    // The hub first, then the candidates it is not.
    let others: Vec<usize> = std::iter::once(hub)
        .chain(order.iter().copied().filter(|&x| x != hub))
        .collect();
    let (mut own, mut via_hub, mut best) = (Work::default(), Work::default(), Work::default());
    let mut both = Work::default();
    let (mut wins, mut worst) = (0, 0.0f64);
    let source_node = top * n + source;
    for sink in 0..n {
        let own_start = warm(caps, top, source, sink, false);
        let mut a = own_start.clone();
        let want = a.solve(&[source_node]);
        own.add(a.steps, a.scans);
        let mut fewest = (a.steps, a.scans);
        let mut first_candidate = None;
        for &x in &others {
            let start = warm_via(caps, top, source, x, sink, false);
            if x == order[0] {
                first_candidate = Some(start.clone());
            }
            let mut b = start;
            let got = b.solve(&[source_node]);
            if x == hub {
                via_hub.add(b.steps, b.scans);
            }
            worst = worst.max((got - want).abs() / want.max(1e-300));
            if b.steps < fewest.0 {
                fewest = (b.steps, b.scans);
            }
        }
        let first_candidate = first_candidate.expect("the candidates are among the starts");
        let mut b = added(own_start, &first_candidate);
        let got = b.solve(&[source_node]);
        both.add(b.steps, b.scans);
        worst = worst.max((got - want).abs() / want.max(1e-300));
        wins += usize::from(fewest.0 < a.steps);
        best.add(fewest.0, fewest.1);
    }
    println!("from below (its own position): {own}");
    println!("from position {hub} below: {via_hub}");
    println!("the best start per sink: {best} (another position's at {wins} of {n} sinks)");
    println!(
        "from both its own and position {}'s flow below: {both}",
        order[0]
    );
    println!("largest difference, relative: {worst:e}");
}

/// The positions of the layers `caps` (each `n × n`, row-major).
fn positions(caps: &[Vec<f64>]) -> usize {
    (caps[0].len() as f64).sqrt() as usize
}

/// Steps and scans, summed.
#[derive(Default)]
struct Work(u64, u64);

impl Work {
    fn add(&mut self, steps: u64, scans: u64) {
        self.0 += steps;
        self.1 += scans;
    }
}

impl std::fmt::Display for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{} steps, {} scans", self.0, self.1)
    }
}

/// The work of three starts for the same flows, and the largest difference from the cold
/// flows.
#[derive(Default)]
struct Tally {
    cold: Work,
    below: Work,
    other: Work,
    worst: f64,
    /// Seconds spent searching from below (`cold_and_below`).
    below_s: f64,
}

impl Tally {
    /// Solves the flow from `(top, source)` into `sink` from none and from below; returns it.
    fn cold_and_below(&mut self, caps: &[Vec<f64>], top: usize, source: usize, sink: usize) -> f64 {
        let n = positions(caps);
        let mut net = Net::new(caps, top, sink);
        let want = net.solve(&[top * n + source]);
        self.cold.add(net.steps, net.scans);
        let mut net = warm(caps, top, source, sink, false);
        let (steps, scans) = (net.steps, net.scans);
        let clock = Instant::now();
        net.solve(&[top * n + source]);
        self.below_s += clock.elapsed().as_secs_f64();
        (net.steps, net.scans) = (net.steps - steps, net.scans - scans);
        self.below.add(net.steps, net.scans);
        self.worst = self.worst.max((net.entering(sink) - want).abs());
        want
    }

    /// The other start reached `got` for `want` with this work.
    fn other(&mut self, steps: u64, scans: u64, got: f64, want: f64) {
        self.other.add(steps, scans);
        self.worst = self.worst.max((got - want).abs());
    }

    fn print(&self, other: &str) {
        let Tally {
            cold,
            below,
            other: work,
            worst,
            below_s: _,
        } = self;
        println!("cold: {cold}\nfrom below: {below}\nfrom {other}: {work}");
        println!("largest difference from cold: {worst:e}");
    }
}

fn sinks(caps: &[Vec<f64>], top: usize, source: usize) {
    let n = positions(caps);
    let mut tally = Tally::default();
    let mut chain = Net::new(caps, top, 0);
    for sink in 0..n {
        let want = tally.cold_and_below(caps, top, source, sink);
        let (steps, scans) = (chain.steps, chain.scans);
        let before = chain.sink;
        (chain.sink, chain.target) = (sink, sink);
        let got = match sink {
            0 => chain.solve(&[top * n + source]),
            _ => {
                chain.solve(&[top * n + source, before]);
                let left = chain.entering(before);
                chain.withdraw_up(0, before, left);
                chain.solve(&[top * n + source])
            }
        };
        tally.other(chain.steps - steps, chain.scans - scans, got, want);
    }
    tally.print("the sink before");
}

impl Net<'_> {
    /// Every node's residual distance to the target in `level` (`UNSEEN` where none), by a
    /// breadth-first search back from it over every arc.
    fn levels_back(&mut self) {
        self.back = true;
        self.level.fill(UNSEEN);
        self.level[self.target] = 0;
        let mut queue = vec![self.target];
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head];
            head += 1;
            for (u, residual) in self.arcs_into(v) {
                if residual > EPS && self.level[u] == UNSEEN {
                    self.level[u] = self.level[v] + 1;
                    queue.push(u);
                }
            }
        }
    }
}

/// How `resink` moves the excess into each sink.
#[derive(Clone, Copy, PartialEq)]
enum Resink {
    /// This Dinic, its levels from the source and every node with excess.
    Levels,
    /// This Dinic, its levels the distances back to the sink ([`Net::levels_back`]).
    Back,
    /// The highest-label push–relabel of `push` ([`Net::discharge_all`]).
    Push,
}

/// Every sink in turn from one preflow kept from sink to sink (Hao and Orlin's sinks in
/// turn): what entered the sink before taken off its arcs and left as excess at the layer-1
/// nodes it came from, and every excess that no path took left where it is. A sink has no
/// arcs out, so a sink done is a second source that adds nothing to any later sink's
/// maximum flow; an arc that several sinks' cuts cross can stay full from one to the next.
fn resink(caps: &[Vec<f64>], top: usize, source: usize, how: Resink) {
    let n = positions(caps);
    let s = top * n + source;
    let nodes = (top + 1) * n;
    let mut tally = Tally::default();
    let mut chain = Net::new(caps, top, 0);
    let mut p = Preflow::new(nodes);
    let (mut took, mut phases, mut sourced) = (0.0, 0u64, 0usize);
    for sink in 0..n {
        let want = tally.cold_and_below(caps, top, source, sink);
        let (steps, scans) = (chain.steps, chain.scans);
        let clock = Instant::now();
        if sink > 0 {
            let before = chain.sink;
            p.excess[before] = 0.0;
            for m in 0..n {
                chain.scans += 1;
                let carried = std::mem::take(&mut chain.flow[0][m * n + before]);
                if carried > 0.0 {
                    chain.steps += 1;
                    p.excess[n + m] += carried;
                }
            }
        }
        (chain.sink, chain.target) = (sink, sink);
        if how == Resink::Push {
            let pushes = p.pushes;
            chain.fill_source(&mut p, s);
            chain.steps += p.pushes - pushes;
            chain.relabel_all(&mut p, s);
            chain.discharge_all(&mut p, s, 1.0);
        } else {
            loop {
                let mut sources = vec![s];
                sources.extend((0..nodes).filter(|&u| p.excess[u] > EPS));
                if how == Resink::Back {
                    chain.levels_back();
                    sources.retain(|&u| chain.level[u] != UNSEEN);
                } else if !chain.levels(&sources) {
                    sources.clear();
                }
                if sources.is_empty() {
                    break;
                }
                phases += 1;
                sourced += sources.len() - 1;
                chain.cursor.fill(0);
                let mut moved = 0.0;
                for &u in &sources {
                    let limit = if u == s { f64::INFINITY } else { p.excess[u] };
                    let sent = chain.search(u, limit);
                    moved += sent;
                    if u != s {
                        p.excess[u] -= sent;
                    }
                }
                if moved <= EPS {
                    break;
                }
            }
        }
        let got = chain.entering(sink);
        took += clock.elapsed().as_secs_f64();
        tally.other(chain.steps - steps, chain.scans - scans, got, want);
    }
    let held: f64 = (0..nodes)
        .filter(|&u| u != chain.sink)
        .map(|u| p.excess[u])
        .sum();
    tally.print("the sinks' preflow kept");
    match how {
        Resink::Push => println!("excess left at the end {held:.6}"),
        _ => println!(
            "{phases} phases, {:.1} nodes with excess a phase; excess left at the end {held:.6}",
            sourced as f64 / phases as f64
        ),
    }
    println!(
        "search seconds: from below {:.3}, the preflow kept {took:.3}",
        tally.below_s
    );
}

fn sources(caps: &[Vec<f64>], top: usize) {
    let n = positions(caps);
    let mut tally = Tally::default();
    for sink in [0, 17, 60, 100].into_iter().filter(|&j| j < n) {
        let mut chain = Net::new(caps, top, sink);
        for source in 0..n {
            let want = tally.cold_and_below(caps, top, source, sink);
            let (steps, scans) = (chain.steps, chain.scans);
            if source > 0 {
                let before = source - 1;
                for m in 0..n {
                    let sent = std::mem::take(&mut chain.flow[top - 1][before * n + m]);
                    let kept = sent.min(caps[top - 1][source * n + m]);
                    chain.flow[top - 1][source * n + m] = kept;
                    if sent > kept {
                        chain.withdraw_down(top - 1, m, sent - kept);
                    }
                }
            }
            let got = chain.solve(&[top * n + source]);
            tally.other(chain.steps - steps, chain.scans - scans, got, want);
        }
    }
    tally.print("the source before");
}

/// The flow from `(top, source)` into `sink` started from above: the maximum flow from
/// `(top + 1, source)`, its arcs below layer `top + 1` kept, and what leaves the other
/// positions of layer `top` withdrawn down to the sink.
fn from_above<'a>(caps: &'a [Vec<f64>], top: usize, source: usize, sink: usize) -> Net<'a> {
    let n = positions(caps);
    let mut above = Net::new(caps, top + 1, sink);
    above.solve(&[(top + 1) * n + source]);
    let mut net = Net::new(caps, top, sink);
    net.flow.clone_from_slice(&above.flow[..top]);
    for m in (0..n).filter(|&m| m != source) {
        let leaving: f64 = net.flow[top - 1][m * n..(m + 1) * n].iter().sum();
        if leaving > 0.0 {
            net.withdraw_down(top, m, leaving);
        }
    }
    net
}

fn above(caps: &[Vec<f64>], top: usize, source: usize) {
    assert!(
        top < caps.len(),
        "LAYER below the stack's layers, for the flow above it"
    );
    beside_below(caps, top, source, "above", |sink| {
        from_above(caps, top, source, sink)
    });
}

fn batch(caps: &[Vec<f64>], top: usize, source: usize) {
    let n = positions(caps);
    let mut together = Net::new(caps, top, 0);
    together.every_sink = true;
    together.solve(&[top * n + source]);
    let into: Vec<f64> = (0..n).map(|i| together.entering(i)).collect();
    beside_below(caps, top, source, "the flow into every sink", |sink| {
        let mut net = Net::new(caps, top, sink);
        net.flow.clone_from(&together.flow);
        for (i, &amount) in into.iter().enumerate() {
            if i != sink && amount > 0.0 {
                net.withdraw_up(0, i, amount);
            }
        }
        net
    });
    println!(
        "the flow into every sink itself: {} steps, {} scans, {:.3} in all",
        together.steps,
        together.scans,
        into.iter().sum::<f64>()
    );
}

/// Each sink's flow from none and from below beside one from `start(sink)`, named `name`;
/// prints their work and what the start holds of the maximum flow, mean over the sinks.
fn beside_below<'a>(
    caps: &'a [Vec<f64>],
    top: usize,
    source: usize,
    name: &str,
    start: impl Fn(usize) -> Net<'a>,
) {
    let n = positions(caps);
    let mut tally = Tally::default();
    let mut held = 0.0;
    for sink in 0..n {
        let want = tally.cold_and_below(caps, top, source, sink);
        let mut net = start(sink);
        held += net.entering(sink) / want.max(f64::MIN_POSITIVE);
        let got = net.solve(&[top * n + source]);
        tally.other(net.steps, net.scans, got, want);
    }
    tally.print(name);
    println!(
        "the start from {name} holds {:.3} of the maximum flow, mean over the sinks",
        held / n as f64
    );
}

fn reroute(caps: &[Vec<f64>], top: usize, source: usize) {
    let n = positions(caps);
    let (mut withdrawn, mut rerouted) = (Work::default(), Work::default());
    let mut worst = 0.0f64;
    for sink in 0..n {
        let a = from_below(caps, top, source, sink, false);
        let b = from_below(caps, top, source, sink, true);
        withdrawn.add(a.steps, a.scans);
        rerouted.add(b.steps, b.scans);
        worst = worst.max((a.entering(sink) - b.entering(sink)).abs());
    }
    println!("from below, the excess withdrawn: {withdrawn}\nrerouted first: {rerouted}");
    println!("largest difference: {worst:e}");
}

/// Hochbaum's pseudoflow (highest label, as in Chandran and Hochbaum's study), from
/// whatever flow the net holds: every arc out of the source and into the sink filled, each
/// node a tree of its own, a strong root's excess sent down a merger arc into a node one
/// label lower and on to that tree's root, a tree split where an arc on the way fills. Its
/// first stage ends with the strong nodes the source's side of a minimum cut, whose
/// capacity is the maximum flow. Counts: pushes (along tree arcs and merger arcs, as steps)
/// and arc reads (as scans); tree steps (nodes visited finding a merger or re-rooting).
struct Pseudoflow {
    excess: Vec<f64>,
    label: Vec<u32>,
    parent: Vec<usize>,
    /// A node's arc to its parent, as [`Net::arc`] numbers them from the node.
    up_arc: Vec<usize>,
    children: Vec<Vec<usize>>,
    /// Strong roots by label (stale entries checked on use).
    strong: Vec<Vec<usize>>,
    pushes: u64,
    relabels: u64,
    tree_steps: u64,
}

const NO_PARENT: usize = usize::MAX;

impl<'a> Net<'a> {
    fn pseudoflow(&mut self, source: usize) -> (f64, Pseudoflow) {
        let n = self.n;
        let nodes = (self.top + 1) * n;
        let s = self.top * n + source;
        let mut p = Pseudoflow {
            excess: vec![0.0; nodes],
            label: vec![1; nodes],
            parent: vec![NO_PARENT; nodes],
            up_arc: vec![0; nodes],
            children: vec![Vec::new(); nodes],
            strong: vec![Vec::new(); nodes + 1],
            pushes: 0,
            relabels: 0,
            tree_steps: 0,
        };
        p.label[s] = nodes as u32;
        p.label[self.sink] = 0;
        for a in 0..n {
            let (v, residual) = self.arc(s, a);
            if residual > 0.0 {
                self.push(s, a, residual);
                p.excess[v] += residual;
            }
        }
        for i in 0..n {
            let u = n + i;
            let (_, residual) = self.arc(u, self.sink);
            if residual > 0.0 {
                self.push(u, self.sink, residual);
                p.excess[u] -= residual;
            }
        }
        for u in 0..nodes {
            if u != s && u != self.sink && p.excess[u] > EPS {
                p.strong[1].push(u);
            }
        }
        self.cursor.fill(0);
        let every = 2 * (self.top * n * n) as u64;
        let mut since = self.scans;
        self.freeze(&mut p, s);
        let mut highest = nodes - 1;
        loop {
            if self.scans - since > every {
                self.freeze(&mut p, s);
                since = self.scans;
                highest = nodes - 1;
            }
            while highest > 0 && p.strong[highest].is_empty() {
                highest -= 1;
            }
            let Some(root) = p.strong[highest].pop() else {
                break;
            };
            let current = p.parent[root] == NO_PARENT
                && p.excess[root] > EPS
                && p.label[root] as usize == highest;
            if current {
                if let Some(top) = self.process(root, s, &mut p) {
                    highest = highest.max(top);
                }
            }
        }
        // The strong nodes (their root holds excess) and the source: a minimum cut's side.
        let mut side = vec![false; nodes];
        side[s] = true;
        for (u, strong) in side.iter_mut().enumerate() {
            let mut root = u;
            while p.parent[root] != NO_PARENT {
                root = p.parent[root];
            }
            *strong |= u != self.sink && p.excess[root] > EPS;
        }
        // Every arc that crosses, empty ones too, is read.
        let (read, cut) = self.crossing(|u| side[u], f64::NEG_INFINITY);
        self.scans += read;
        self.steps += p.pushes;
        (cut, p)
    }

    /// The root of `u`'s tree.
    fn root_of(u: usize, p: &mut Pseudoflow) -> usize {
        let mut root = u;
        while p.parent[root] != NO_PARENT {
            p.tree_steps += 1;
            root = p.parent[root];
        }
        root
    }

    /// Strong trees from none of whose nodes a residual path leads to a weak node or into a
    /// tree still live will never merge: every label in them is raised to the end at once
    /// (a breadth-first search back from the weak nodes, its reads counted as scans). A tree
    /// counts as reached as soon as any of its nodes is: a tree whose excess moves on may
    /// carry off, or turn weak, the very node another tree's path reaches, so freezing
    /// only the trees whose own nodes reach nothing froze some whose flow could still pass
    /// (a cut 3.9e-4 above the maximum flow on rows squared, six layers, layer 5).
    fn freeze(&mut self, p: &mut Pseudoflow, s: usize) {
        let nodes = p.label.len();
        let roots: Vec<usize> = (0..nodes).map(|u| Self::root_of(u, p)).collect();
        let strong: Vec<bool> = (0..nodes)
            .map(|u| u != s && u != self.sink && p.excess[roots[u]] > EPS)
            .collect();
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); nodes];
        for u in (0..nodes).filter(|&u| strong[u]) {
            members[roots[u]].push(u);
        }
        let mut alive = vec![false; nodes];
        let mut queue: Vec<usize> = (0..nodes)
            .filter(|&u| u != s && u != self.sink && !strong[u])
            .collect();
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head];
            head += 1;
            for (u, residual) in self.arcs_into(v) {
                if residual > EPS && strong[u] && !alive[roots[u]] {
                    alive[roots[u]] = true;
                    queue.extend(&members[roots[u]]);
                }
            }
        }
        for u in (0..nodes).filter(|&u| strong[u] && !alive[roots[u]]) {
            p.label[u] = nodes as u32;
        }
    }

    /// Looks through the nodes of `root`'s tree that share its label for a merger arc, and
    /// takes the first found; else relabels them all. Returns the highest label of a strong
    /// root it made.
    fn process(&mut self, root: usize, s: usize, p: &mut Pseudoflow) -> Option<usize> {
        let label = p.label[root];
        let mut stack = vec![root];
        let mut visited = Vec::new();
        while let Some(x) = stack.pop() {
            p.tree_steps += 1;
            visited.push(x);
            while self.cursor[x] < 2 * self.n {
                let a = self.cursor[x];
                self.scans += 1;
                let (w, residual) = self.arc(x, a);
                if residual > EPS && w != s && w != self.sink && p.label[w] + 1 == label {
                    return self.merge(root, x, a, w, p);
                }
                self.cursor[x] += 1;
            }
            let same: Vec<usize> = (p.children[x].iter())
                .copied()
                .filter(|&c| p.label[c] == label)
                .collect();
            stack.extend(same);
        }
        for &x in &visited {
            p.label[x] += 1;
            self.cursor[x] = 0;
            p.relabels += 1;
        }
        let raised = label as usize + 1;
        match raised < p.label[s] as usize {
            true => {
                p.strong[raised].push(root);
                Some(raised)
            }
            false => None,
        }
    }

    /// Hangs `u`'s tree, rooted again at `u`, under `w` by `u`'s arc `a`, and sends the old
    /// root's excess down to the new root, splitting where an arc fills.
    fn merge(
        &mut self,
        root: usize,
        u: usize,
        a: usize,
        w: usize,
        p: &mut Pseudoflow,
    ) -> Option<usize> {
        let n = self.n;
        let (mut node, mut new_parent, mut new_arc) = (u, w, a);
        loop {
            p.tree_steps += 1;
            let (old_parent, old_arc) = (p.parent[node], p.up_arc[node]);
            if old_parent != NO_PARENT {
                p.children[old_parent].retain(|&c| c != node);
            }
            p.parent[node] = new_parent;
            p.up_arc[node] = new_arc;
            p.children[new_parent].push(node);
            if old_parent == NO_PARENT {
                break;
            }
            // The same arc, numbered from the old parent's end.
            new_arc = match old_arc < n {
                true => n + node % n,
                false => node % n,
            };
            new_parent = node;
            node = old_parent;
        }
        let mut top = None;
        let mut node = root;
        while p.excess[node] > EPS && p.parent[node] != NO_PARENT {
            let (parent, arc) = (p.parent[node], p.up_arc[node]);
            let (_, residual) = self.arc(node, arc);
            let was = p.excess[parent];
            let amount = p.excess[node].min(residual.max(0.0));
            self.push(node, arc, amount);
            p.pushes += 1;
            p.excess[node] -= amount;
            p.excess[parent] += amount;
            if p.excess[node] > EPS {
                // The arc is full: `node` and its subtree a strong tree of their own.
                p.children[parent].retain(|&c| c != node);
                p.parent[node] = NO_PARENT;
                let label = p.label[node] as usize;
                p.strong[label].push(node);
                top = top.max(Some(label));
            }
            node = parent;
            let root_now_strong = p.parent[node] == NO_PARENT && was <= EPS && p.excess[node] > EPS;
            if root_now_strong && (p.label[node] as usize) < p.strong.len() - 1 {
                let label = p.label[node] as usize;
                p.strong[label].push(node);
                top = top.max(Some(label));
            }
        }
        top
    }
}

/// `method` against the Dinic, both from the same start from below, every sink: their work,
/// times and largest difference. `method` returns the flow and its own counts, named.
fn against_dinic<const K: usize>(
    caps: &[Vec<f64>],
    top: usize,
    source: usize,
    name: &str,
    method: impl Fn(&mut Net) -> (f64, [(&'static str, u64); K]),
) {
    let n = positions(caps);
    let (mut dinic, mut other) = (Work::default(), Work::default());
    let (mut dinic_s, mut other_s) = (0.0, 0.0);
    let mut counts = [0; K];
    let mut names = [""; K];
    let mut worst = 0.0f64;
    for sink in 0..n {
        let start = warm(caps, top, source, sink, false);
        let mut a = Net::new(caps, top, sink);
        a.flow.clone_from(&start.flow);
        let mut b = Net::new(caps, top, sink);
        b.flow.clone_from(&start.flow);
        let clock = Instant::now();
        let want = a.solve(&[top * n + source]);
        dinic_s += clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let (got, its) = method(&mut b);
        other_s += clock.elapsed().as_secs_f64();
        dinic.add(a.steps, a.scans);
        other.add(b.steps, b.scans);
        for (k, (name, count)) in its.into_iter().enumerate() {
            (names[k], counts[k]) = (name, counts[k] + count);
        }
        worst = worst.max((got - want).abs() / want.max(1e-300));
    }
    let its: Vec<String> = (names.iter().zip(counts))
        .map(|(name, count)| format!("{count} {name}"))
        .collect();
    println!("from below, Dinic: {dinic}, {dinic_s:.3} s");
    println!(
        "from below, {name}: {other} ({}), {other_s:.3} s",
        its.join(", ")
    );
    println!("largest difference, relative: {worst:e}");
}

/// `Σ_m min(a_m, c[m][·])` for every column, given `a`: what can pass one layer.
fn spread(a: &[f64], c: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n];
    for (m, &a) in a.iter().enumerate().filter(|(_, a)| **a > 0.0) {
        for (o, &c) in out.iter_mut().zip(&c[m * n..(m + 1) * n]) {
            *o += a.min(c);
        }
    }
    out
}

/// `reach[k][m]` (k from 1 to `top - 1`): at most what can reach `(k, m)` from `(top,
/// source)`, as the engine bounds it.
fn reach(caps: &[Vec<f64>], top: usize, source: usize) -> Vec<Vec<f64>> {
    let n = positions(caps);
    let mut reach = vec![Vec::new(); top];
    reach[top - 1] = caps[top - 1][source * n..(source + 1) * n].to_vec();
    for k in (1..top - 1).rev() {
        reach[k] = spread(&reach[k + 1], &caps[k], n);
    }
    reach
}

fn bounds(caps: &[Vec<f64>], top: usize, source: usize) {
    let n = positions(caps);
    let reach = reach(caps, top, source);
    let close = |bound: f64, flow: f64| bound - flow <= 1e-13 * bound;
    let (mut engine, mut best, mut above_engine, mut above_best) = (0, 0, 0.0, 0.0);
    // Per layer k, the flows whose least bound is at k (the top: `drain` of the source).
    let mut argmin = vec![0; top + 1];
    for sink in 0..n {
        // drain[k][m]: at most what can leave (k, m) for the sink.
        let mut drain = vec![Vec::new(); top + 1];
        drain[1] = (0..n).map(|m| caps[0][m * n + sink]).collect();
        for k in 2..=top {
            drain[k] = (0..n)
                .map(|m| {
                    (0..n)
                        .map(|p| caps[k - 1][m * n + p].min(drain[k - 1][p]))
                        .sum()
                })
                .collect();
        }
        let flow = Net::new(caps, top, sink).solve(&[top * n + source]);
        let at = |k: usize| -> f64 { (0..n).map(|m| reach[k][m].min(drain[k][m])).sum() };
        let first = at(1).min(1.0);
        let mut least = (drain[top][source].min(1.0), top);
        for k in 1..top {
            let bound = at(k);
            if bound < least.0 {
                least = (bound, k);
            }
        }
        let (least, k) = least;
        argmin[k] += 1;
        engine += close(first, flow) as usize;
        best += close(least, flow) as usize;
        above_engine += first / flow - 1.0;
        above_best += least / flow - 1.0;
    }
    let mean = |x: f64| 100.0 * x / n as f64;
    println!(
        "equal to the flow: engine's bound {engine} of {n} (mean {:.1}% above), least over layers {best} (mean {:.1}% above)",
        mean(above_engine),
        mean(above_best)
    );
    let at: Vec<String> = (1..=top)
        .filter(|&k| argmin[k] > 0)
        .map(|k| format!("layer {k}: {}", argmin[k]))
        .collect();
    println!("the least bound at {}", at.join(", "));
}

impl Net<'_> {
    /// After [`Net::solve`]: the arcs of capacity above the zero from the source's side of the
    /// minimum cut that the last breadth-first search found (what it reached) to the other
    /// side, and their capacity.
    fn cut(&self) -> (u64, f64) {
        self.crossing(|u| self.level[u] != UNSEEN, EPS)
    }

    /// The arcs of capacity above `zero` from the nodes `inside` puts on a cut's source
    /// side to the others: how many, and their capacity.
    fn crossing(&self, inside: impl Fn(usize) -> bool, zero: f64) -> (u64, f64) {
        let n = self.n;
        let (mut arcs, mut capacity) = (0, 0.0);
        for u in (n..self.level.len()).filter(|&u| inside(u)) {
            let (k, i) = (u / n, u % n);
            for a in (0..n).filter(|&a| k > 1 || a == self.sink) {
                let c = self.caps[k - 1][i * n + a];
                if c > zero && !inside((k - 1) * n + a) {
                    arcs += 1;
                    capacity += c;
                }
            }
        }
        (arcs, capacity)
    }
}

/// Every flow from position `source` of layers 3 to `top` (each started from the one below,
/// as the engine climbs), into every sink: the arcs each one's minimum cut crosses, beside
/// the Dinic's work, for the flows that differ from the flow one layer down (a lift, which
/// keeps a flow's value, settles none of them); and how many of those equal the engine's
/// upper bound (what can reach layer 1, and the flow below with the source's arcs into the
/// other positions; a search still has to find them). Every STRIDE-th sink only if said.
fn cuts(caps: &[Vec<f64>], top: usize, source: usize) {
    let n = positions(caps);
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-13 * a.max(b);
    // Per layer t from 3: what can reach layer 1, and the source's arcs into other positions.
    let reaches: Vec<Vec<Vec<f64>>> = (3..=top).map(|t| reach(caps, t, source)).collect();
    let sideways: Vec<f64> = (3..=top)
        .map(|t| {
            let row = &caps[t - 1][source * n..(source + 1) * n];
            (0..n).filter(|&m| m != source).map(|m| row[m]).sum()
        })
        .collect();
    let (mut flows, mut as_below, mut at_bound) = (0, 0, 0);
    let (mut arcs, mut most, mut work) = (0u64, 0u64, Work::default());
    let mut worst = 0.0f64;
    climb(caps, top, source, |sink, t, mut net, below| {
        let flow = net.solve(&[t * n + source]);
        let (crossing, capacity) = net.cut();
        worst = worst.max((capacity - flow).abs() / flow.max(f64::MIN_POSITIVE));
        flows += 1;
        if same(below, flow) {
            as_below += 1;
        } else {
            let reach = &reaches[t - 3][1];
            let bound = (0..n)
                .map(|m| reach[m].min(caps[0][m * n + sink]))
                .sum::<f64>()
                .min(1.0)
                .min(below + sideways[t - 3]);
            at_bound += usize::from(same(bound, flow));
            arcs += crossing;
            most = most.max(crossing);
            work.add(net.steps, net.scans);
        }
        net
    });
    let other = flows - as_below;
    println!(
        "{flows} flows: {as_below} equal the flow below, {other} do not ({at_bound} of them the engine's bound)"
    );
    println!(
        "those {other}: minimum cuts crossing {arcs} arcs in all ({} a flow, most {most}); the Dinic from below: {work}",
        arcs / other.max(1) as u64
    );
    println!("largest difference of a cut's capacity from its flow, relative: {worst:e}");
}

/// Every flow from `(t, source)`, t from 3 to `top`, into every STRIDE-th sink, climbed as
/// the engine climbs: `visit(sink, t, start, below)` gets the start fed up from the maximum
/// flow one layer down (of value `below`) and returns it solved, for the next layer.
fn climb<'a>(
    caps: &'a [Vec<f64>],
    top: usize,
    source: usize,
    mut visit: impl FnMut(usize, usize, Net<'a>, f64) -> Net<'a>,
) {
    let n = positions(caps);
    for sink in (0..n).step_by(stride()) {
        let mut below = Net::new(caps, 2, sink);
        below.solve(&[2 * n + source]);
        for t in 3..=top {
            let start = fed_up(&below, source, source, false);
            below = visit(sink, t, start, below.entering(sink));
        }
    }
}

/// Every STRIDE-th sink (1 unless said).
fn stride() -> usize {
    std::env::var("STRIDE").map_or(1, |s| s.parse().expect("a count"))
}

/// What Karzanov's waves keep per node, reused from phase to phase.
#[derive(Default)]
struct Scratch {
    excess: Vec<f64>,
    blocked: Vec<bool>,
    /// The pushes that may still be taken back, per head: the tail, its arc, the amount.
    received: Vec<Vec<(usize, usize, f64)>>,
}

impl Scratch {
    fn reset(&mut self, nodes: usize) {
        self.excess.clear();
        self.excess.resize(nodes, 0.0);
        self.blocked.clear();
        self.blocked.resize(nodes, false);
        self.received.resize_with(nodes, Vec::new);
        self.received.iter_mut().for_each(Vec::clear);
    }
}

impl Net<'_> {
    /// A maximum flow from `source` into the target, each phase's blocking flow found by
    /// Karzanov's waves rather than depth-first paths; returns what enters the sink.
    fn solve_by_waves(&mut self, source: usize, scratch: &mut Scratch) -> f64 {
        while self.levels(&[source]) {
            self.waves(source, scratch);
        }
        self.entering(self.sink)
    }

    /// A blocking flow of the level graph by waves (Karzanov; Tarjan's form): the source
    /// fills every arc it can; then, in turn, a wave down the levels in which every node
    /// with an excess pushes it on along its admissible arcs into nodes not blocked (a
    /// node that cannot is blocked for the rest of the phase), and a wave back up in which
    /// each blocked node returns its excess along the arcs it came by, last in first out.
    /// A push or a return is a step; an arc its cursor reads, a read.
    ///
    /// After a wave down, no node left unblocked holds an excess (each had its turn after
    /// every node that pushes into it), so the phase ends when a wave up returns nothing.
    fn waves(&mut self, source: usize, scratch: &mut Scratch) {
        scratch.reset(self.level.len());
        let Scratch {
            excess,
            blocked,
            received,
        } = scratch;
        let order = std::mem::take(&mut self.order);
        self.cursor.fill(0);
        excess[source] = f64::INFINITY;
        loop {
            for &u in &order {
                if blocked[u] || excess[u] <= 0.0 || self.ends(u) {
                    continue;
                }
                while self.cursor[u] < 2 * self.n && excess[u] > 0.0 {
                    let a = self.cursor[u];
                    self.reads += 1;
                    let (v, residual) = self.arc(u, a);
                    if residual > EPS && !blocked[v] && self.admits(u, v) {
                        let amount = excess[u].min(residual);
                        self.steps += 1;
                        self.push(u, a, amount);
                        excess[u] -= amount;
                        excess[v] += amount;
                        received[v].push((u, a, amount));
                        if amount < residual {
                            break;
                        }
                    }
                    self.cursor[u] += 1;
                }
                if excess[u] > 0.0 && self.cursor[u] == 2 * self.n {
                    blocked[u] = u != source || excess[u].is_finite();
                }
            }
            excess[source] = 0.0;
            let mut returned = false;
            for &u in order.iter().rev() {
                if !blocked[u] || excess[u] <= 0.0 || u == source {
                    continue;
                }
                returned = true;
                while excess[u] > 0.0 {
                    // Past every arc it came by, what is left is rounding.
                    let Some((tail, a, amount)) = received[u].pop() else {
                        excess[u] = 0.0;
                        break;
                    };
                    let back = amount.min(excess[u]);
                    self.steps += 1;
                    self.push(tail, a, -back);
                    excess[u] -= back;
                    if tail != source {
                        excess[tail] += back;
                    }
                    if back < amount {
                        received[u].push((tail, a, amount - back));
                    }
                }
            }
            if !returned {
                break;
            }
        }
        self.order = order;
    }
}

/// Every flow from position `source` of layers 3 to `top`, climbed from below as in
/// [`cuts`], into every (STRIDE-th) sink: from the same start, the Dinic's depth-first
/// blocking flows beside Karzanov's waves ([`Net::waves`]), their work and time.
fn waves(caps: &[Vec<f64>], top: usize, source: usize) {
    let n = positions(caps);
    let (mut paths, mut waves) = (Work::default(), Work::default());
    let (mut path_reads, mut wave_reads) = (0, 0);
    let (mut path_time, mut wave_time) = (0.0, 0.0);
    let mut worst = 0.0f64;
    let mut scratch = Scratch::default();
    climb(caps, top, source, |_, t, start, _| {
        let mut net = start.clone();
        let clock = Instant::now();
        let want = net.solve(&[t * n + source]);
        path_time += clock.elapsed().as_secs_f64();
        paths.add(net.steps - start.steps, net.scans - start.scans);
        path_reads += net.reads - start.reads;
        let mut other = start.clone();
        let clock = Instant::now();
        let got = other.solve_by_waves(t * n + source, &mut scratch);
        wave_time += clock.elapsed().as_secs_f64();
        waves.add(other.steps - start.steps, other.scans - start.scans);
        wave_reads += other.reads - start.reads;
        worst = worst.max((got - want).abs() / want.max(f64::MIN_POSITIVE));
        net
    });
    println!("depth-first paths: {paths}, {path_reads} reads, {path_time:.3} s");
    println!("waves: {waves} (pushes and returns), {wave_reads} reads, {wave_time:.3} s");
    println!("largest difference, relative: {worst:e}");
}

/// The stack's layers, heads averaged, residual added, rows renormalised.
fn read(path: &str) -> Vec<Vec<f64>> {
    let bytes = std::fs::read(path).expect("a readable .npy file");
    assert!(
        bytes.starts_with(b"\x93NUMPY") && bytes[6] == 1,
        "a version 1 .npy file"
    );
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).expect("a text header");
    assert!(
        header.contains("'<f4'") && header.contains("False"),
        "float32, C order"
    );
    let inside = header.split(['(', ')']).nth(1).expect("a shape");
    let shape: Vec<usize> = inside
        .split(',')
        .filter_map(|d| d.trim().parse().ok())
        .collect();
    let [layers, heads, n, _] = shape[..] else {
        panic!("a [layers, heads, n, n] stack")
    };
    let values: Vec<f64> = bytes[10 + header_len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
        .collect();
    (0..layers)
        .map(|l| {
            let mut fused = vec![0.0; n * n];
            for h in 0..heads {
                let head = &values[(l * heads + h) * n * n..][..n * n];
                for (f, v) in fused.iter_mut().zip(head) {
                    *f += v / heads as f64;
                }
            }
            for (i, row) in fused.chunks_exact_mut(n).enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = 0.5 * *v + if i == j { 0.5 } else { 0.0 };
                }
                let sum: f64 = row.iter().sum();
                row.iter_mut().for_each(|v| *v /= sum);
            }
            fused
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, position, layer, mode] = &args[..] else {
        eprintln!(
            "usage: warm_starts STACK.npy POSITION LAYER sinks|sources|bounds|reroute|push|pseudo|hub|above|batch|resink|cuts|waves"
        );
        std::process::exit(2);
    };
    let caps = read(path);
    let (position, top): (usize, usize) = (position.parse().unwrap(), layer.parse().unwrap());
    assert!(
        (3..=caps.len()).contains(&top),
        "LAYER from 3 to the stack's layers"
    );
    let started = Instant::now();
    match mode.as_str() {
        "sinks" => sinks(&caps, top, position),
        "sources" => sources(&caps, top),
        "bounds" => bounds(&caps, top, position),
        "reroute" => reroute(&caps, top, position),
        "hub" => hub(&caps, top, position),
        "above" => above(&caps, top, position),
        "batch" => batch(&caps, top, position),
        "resink" => {
            let how = match std::env::var("RESINK").as_deref() {
                Ok("back") => Resink::Back,
                Ok("push") => Resink::Push,
                _ => Resink::Levels,
            };
            resink(&caps, top, position, how)
        }
        "cuts" => cuts(&caps, top, position),
        "waves" => waves(&caps, top, position),
        "pseudo" => against_dinic(&caps, top, position, "pseudoflow", |net| {
            let (flow, p) = net.pseudoflow(position);
            let counts = [("relabels", p.relabels), ("tree steps", p.tree_steps)];
            (flow, counts)
        }),
        "push" => {
            let budget = std::env::var("BUDGET").map_or(1.0, |b| b.parse().expect("a number"));
            against_dinic(&caps, top, position, "push–relabel", |net| {
                let (flow, p) = net.preflow(position, budget);
                let counts = [
                    ("pushes", p.pushes),
                    ("relabels", p.relabels),
                    ("global relabellings", p.globals),
                ];
                (flow, counts)
            })
        }
        _ => panic!(
            "MODE: sinks, sources, bounds, reroute, push, pseudo, hub, above, batch, resink, cuts or waves"
        ),
    }
    eprintln!("{:.1} s", started.elapsed().as_secs_f64());
}
