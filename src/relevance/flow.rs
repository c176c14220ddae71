//! Attention flow (Abnar & Zuidema 2020, §3): attention weights as capacities of a layered
//! DAG, and the maximum flow from the target at layer l to each input token.
//!
//! The engine is Dinic's algorithm on the layered graph itself, in exact f64 arithmetic: no
//! capacities are scaled to integers, so it agrees with networkx's Edmonds–Karp up to
//! floating-point rounding.

use crate::attention::Matrix;

/// Residual capacities below this count as zero; attention weights are in [0, 1], so this
/// is far below anything meaningful and far above f64 rounding.
const EPS: f64 = 1e-14;

/// `augmented[l]` is `Â_{l+1}`; returns `[L][n]`: for each layer l, the maximum flow from
/// `(l, target)` to every input token `(0, j)`, normalised to sum to 1.
pub fn flow(augmented: &[Matrix], target: usize) -> Vec<Vec<f64>> {
    (1..=augmented.len())
        .map(|layer| {
            let capacities = &augmented[..layer];
            let n = capacities[0].n;
            let values: Vec<f64> = (0..n)
                .map(|sink| max_flow(capacities, target, sink))
                .collect();
            normalise(values)
        })
        .collect()
}

fn normalise(values: Vec<f64>) -> Vec<f64> {
    let total: f64 = values.iter().sum();
    if total > 0.0 {
        values.into_iter().map(|v| v / total).collect()
    } else {
        values
    }
}

/// The maximum flow from node `(L, source)` to node `(0, sink)` where `capacities[k]` holds
/// the capacity of each edge `(k + 1, i) → (k, j)` and `L = capacities.len()`.
pub fn max_flow(capacities: &[Matrix], source: usize, sink: usize) -> f64 {
    let mut network = Network::new(capacities, sink);
    let mut total = 0.0;
    let top = capacities.len();
    while network.find_levels(top, source) {
        network.next_arc.iter_mut().for_each(|a| *a = 0);
        loop {
            let pushed = network.push(top, source, f64::INFINITY);
            if pushed <= 0.0 {
                break;
            }
            total += pushed;
        }
    }
    total
}

/// The residual network: node `(k, i)` has index `k * n + i`.
struct Network<'a> {
    capacities: &'a [Matrix],
    /// `flows[k][i * n + j]`: the flow on edge `(k + 1, i) → (k, j)`.
    flows: Vec<Vec<f64>>,
    level: Vec<usize>,
    next_arc: Vec<usize>,
    n: usize,
    sink: usize,
}

const UNSEEN: usize = usize::MAX;

impl<'a> Network<'a> {
    fn new(capacities: &'a [Matrix], sink: usize) -> Self {
        let n = capacities[0].n;
        let nodes = (capacities.len() + 1) * n;
        Self {
            capacities,
            flows: vec![vec![0.0; n * n]; capacities.len()],
            level: vec![UNSEEN; nodes],
            next_arc: vec![0; nodes],
            n,
            sink,
        }
    }

    /// Arc `arc` of node `(k, i)`: arcs `0..n` go down to `(k - 1, j)` along unused
    /// capacity, arcs `n..2n` go back up to `(k + 1, j)` along flow already sent.
    /// Returns the arc's head and residual capacity.
    fn arc(&self, k: usize, i: usize, arc: usize) -> Option<(usize, usize, f64)> {
        let n = self.n;
        if arc < n {
            let j = arc;
            (k > 0).then(|| {
                let index = i * n + j;
                let residual = self.capacities[k - 1].data[index] - self.flows[k - 1][index];
                (k - 1, j, residual)
            })
        } else {
            let j = arc - n;
            (k < self.capacities.len()).then(|| (k + 1, j, self.flows[k][j * n + i]))
        }
    }

    fn send(&mut self, k: usize, i: usize, arc: usize, amount: f64) {
        let n = self.n;
        if arc < n {
            self.flows[k - 1][i * n + arc] += amount;
        } else {
            self.flows[k][(arc - n) * n + i] -= amount;
        }
    }

    /// Breadth-first levels from the source; true when the sink is still reachable.
    fn find_levels(&mut self, top: usize, source: usize) -> bool {
        let n = self.n;
        self.level.iter_mut().for_each(|l| *l = UNSEEN);
        self.level[top * n + source] = 0;
        let mut queue = std::collections::VecDeque::from([(top, source)]);
        while let Some((k, i)) = queue.pop_front() {
            // Input tokens other than the sink lead nowhere.
            if k == 0 {
                continue;
            }
            let here = self.level[k * n + i];
            for arc in 0..2 * n {
                if let Some((hk, hj, residual)) = self.arc(k, i, arc) {
                    let node = hk * n + hj;
                    if residual > EPS && self.level[node] == UNSEEN {
                        self.level[node] = here + 1;
                        queue.push_back((hk, hj));
                    }
                }
            }
        }
        self.level[self.sink] != UNSEEN
    }

    /// Sends up to `limit` along one shortest augmenting path from `(k, i)`; returns how
    /// much went through.
    fn push(&mut self, k: usize, i: usize, limit: f64) -> f64 {
        let n = self.n;
        if k == 0 {
            return if i == self.sink { limit } else { 0.0 };
        }
        let node = k * n + i;
        while self.next_arc[node] < 2 * n {
            let arc = self.next_arc[node];
            if let Some((hk, hj, residual)) = self.arc(k, i, arc) {
                if residual > EPS && self.level[hk * n + hj] == self.level[node] + 1 {
                    let pushed = self.push(hk, hj, limit.min(residual));
                    if pushed > 0.0 {
                        self.send(k, i, arc, pushed);
                        return pushed;
                    }
                }
            }
            self.next_arc[node] += 1;
        }
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn agrees_with_edmonds_karp_on_random_layered_graphs() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut uniform = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for trial in 0..40 {
            let n = 2 + trial % 5;
            let layers = 1 + trial % 4;
            let caps: Vec<Matrix> = (0..layers)
                .map(|_| {
                    let mut m = matrix(n, &(0..n * n).map(|_| uniform()).collect::<Vec<_>>());
                    for row in m.data.chunks_mut(n) {
                        let sum: f64 = row.iter().sum();
                        row.iter_mut().for_each(|v| *v /= sum);
                    }
                    m.with_residual(0.5)
                })
                .collect();
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
