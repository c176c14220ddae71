//! Upper bounds on attention flow that cost one pass over the layers instead of a
//! max-flow search.
//!
//! No flow into node `(k, m)` exceeds `h_k(m) = Σ_i min(h_{k+1}(i), C_{k+1}[i][m])`: the flow
//! on each arc into it is at most the arc's capacity and at most what reached the arc's tail,
//! starting from `h_{L-1}(m) = C_L[source][m]` below the source. The flow into the sink
//! `(0, j)` is then at most `Σ_m min(h_1(m), C_1[m][j])`, and at most what leaves the
//! source, `Σ_m C_L[source][m]`. On real attention this bound is
//! usually the answer, and knowing it lets the search stop as soon as the flow reaches it
//! instead of running a last phase that proves no more can pass.
//!
//! Lower bounds come from flows already found. Let `f_i` be a flow of value `F_i > 0` from
//! `(l, i)` to the sink for every `i`, and `w_i = C_{l+1}[t][i]`. For shares `λ_i ≥ 0` with
//! `λ_i·F_i ≤ w_i` and `Σ_i λ_i ≤ 1`, sending `λ_i·f_i` through each arc `(l + 1, t) → (l, i)`
//! is a flow from `(l + 1, t)`: every arc below carries at most `Σ_i λ_i·cap ≤ cap`. Its value
//! `Σ_i λ_i·F_i` is largest when the shares go to the greatest `F_i` first (a fractional
//! knapsack). Deep in a network most positions' flows to a sink reach the same bound (the
//! sink's in-capacity, or the source's out-capacity); then this lower bound meets the upper
//! one and the next layer's flow is settled with no search at all.

use crate::attention::Layer;

/// For the source `(L, source)`, `L = capacities.len()`: an upper bound on the maximum flow
/// to each sink `(0, j)`, `[n]`. With fewer than three layers the answer has a closed form and
/// no bound is needed: every entry is infinite.
pub fn upper_bounds(capacities: &[Layer], source: usize) -> Vec<f64> {
    upper_bounds_of(capacities, &[source]).remove(0)
}

/// [`upper_bounds`] for each of `sources`, with the same arithmetic, reading each row of the
/// layers below once for all of them: from every position, source by source, the layers
/// would be read from memory once per source.
pub fn upper_bounds_of(capacities: &[Layer], sources: &[usize]) -> Vec<Vec<f64>> {
    let layers = capacities.len();
    let n = capacities.first().map_or(0, |m| m.n);
    if layers < 3 {
        return vec![vec![f64::INFINITY; n]; sources.len()];
    }
    let mut reach: Vec<Vec<f64>> = sources
        .iter()
        .map(|&source| capacities[layers - 1].row(source).to_vec())
        .collect();
    let out: Vec<f64> = reach.iter().map(|r| r.iter().sum()).collect();
    for k in (0..layers - 1).rev() {
        let mut below = vec![vec![0.0; n]; sources.len()];
        for i in 0..n {
            let row = capacities[k].row(i);
            for (below, reach) in below.iter_mut().zip(&reach) {
                let arrives = reach[i];
                if arrives > 0.0 {
                    for (b, &c) in below.iter_mut().zip(row) {
                        *b += arrives.min(c);
                    }
                }
            }
        }
        reach = below;
    }
    // Nor more than leaves the source.
    reach
        .into_iter()
        .zip(out)
        .map(|(reach, out)| reach.into_iter().map(|r| r.min(out)).collect())
        .collect()
}

/// Bounds this close (relative) settle a flow without a search. Settled values are upper
/// bounds; the lower bounds that settled them are what the next layer builds on, so the
/// tolerance does not compound over layers.
pub(super) const SETTLED: f64 = 1e-13;

/// One flow of a layer: the value reported, a value a flow is known to reach (the same,
/// when a search found it) and one no flow exceeds (the same, unless a search stopped on
/// reaching a bound).
#[derive(Debug, Clone, Copy)]
pub struct Settled {
    pub value: f64,
    reached: f64,
    pub upper: f64,
}

impl Settled {
    pub fn exact(value: f64) -> Self {
        Self::searched(value, value)
    }

    /// A search's flow, `reached`, and `upper`, an upper bound on the maximum it proved.
    pub fn searched(reached: f64, upper: f64) -> Self {
        Self {
            value: reached,
            reached,
            upper,
        }
    }

    /// The flow `bound` (an upper bound on it), when a flow reaching `reached` is close
    /// enough to it to settle it.
    pub fn by(bound: f64, reached: f64) -> Option<Self> {
        (bound.is_finite() && bound - reached <= SETTLED * bound).then_some(Self {
            value: bound,
            reached: reached.min(bound),
            upper: bound,
        })
    }
}

/// The flows from every position of one layer to one sink, for the layer above: the
/// sources with a flow, greatest flow first.
pub struct Spread {
    sources: Vec<(f64, u32)>,
}

impl Spread {
    /// `flows[source]`: the flows of one layer into the sink.
    pub fn of(flows: &[Settled]) -> Self {
        let mut sources: Vec<(f64, u32)> = flows
            .iter()
            .enumerate()
            .filter(|(_, flow)| flow.reached > 0.0)
            .map(|(source, flow)| (flow.reached, source as u32))
            .collect();
        sources.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Self { sources }
    }

    /// The flow one layer up into the sink from a source whose arcs down have capacities
    /// `weights`, when the knapsack lower bound of the module's comment meets `bound` (an
    /// upper bound on it). Then `top` holds the knapsack flow on each arc out of the source.
    pub fn settles(&self, weights: &[f64], bound: f64, top: &mut Vec<f64>) -> Option<Settled> {
        if !bound.is_finite() {
            return None;
        }
        let (mut reached, mut taken) = (0.0, 0);
        for (_, amount) in self.shares(weights) {
            reached += amount;
            taken += 1;
            if Settled::by(bound, reached).is_some() {
                break;
            }
        }
        let settled = Settled::by(bound, reached)?;
        top.clear();
        top.resize(weights.len(), 0.0);
        for (source, amount) in self.shares(weights).take(taken) {
            top[source] = amount;
        }
        Some(settled)
    }

    /// The knapsack's shares, greatest flow first while the budget lasts: each source and
    /// what its scaled flow sends through the arc into it.
    fn shares<'a>(&'a self, weights: &'a [f64]) -> impl Iterator<Item = (usize, f64)> + 'a {
        let mut budget = 1.0f64;
        self.sources.iter().map_while(move |&(flow, source)| {
            (budget > 0.0).then(|| {
                let share = (weights[source as usize] / flow).min(budget);
                budget -= share;
                (source as usize, share * flow)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::{AsLayer, Matrix};
    use crate::relevance::flow::max_flow;

    fn layers(matrices: &[Matrix]) -> Vec<Layer<'_>> {
        matrices.iter().map(AsLayer::as_layer).collect()
    }

    #[test]
    fn bounds_every_flow_and_meets_it_where_each_arc_is_the_bottleneck() {
        // Three layers of 2 nodes; flows checked against the engine without the bound.
        let m = |d: &[f64]| Matrix {
            n: 2,
            data: d.to_vec(),
        };
        let caps = [
            m(&[0.5, 0.5, 0.25, 0.75]),
            m(&[0.9, 0.1, 0.2, 0.8]),
            m(&[0.6, 0.4, 0.0, 1.0]),
        ];
        for source in 0..2 {
            let bounds = upper_bounds(&layers(&caps), source);
            for (sink, &bound) in bounds.iter().enumerate() {
                assert!(max_flow(&caps, source, sink) <= bound + 1e-15);
            }
        }
        // From (3, 1): reach (2, ·) = [0, 1]; (1, ·) = [min(1, .2), min(1, .8)] = [.2, .8];
        // sink 0: min(.2, .5) + min(.8, .25) = .45, which a flow attains.
        let bounds = upper_bounds(&layers(&caps), 1);
        assert!((bounds[0] - 0.45).abs() < 1e-15);
        assert!((max_flow(&caps, 1, 0) - 0.45).abs() < 1e-15);
    }

    #[test]
    fn bounds_of_several_sources_equal_each_alone() {
        let m = |d: &[f64]| Matrix {
            n: 3,
            data: d.to_vec(),
        };
        let caps = [
            m(&[0.5, 0.3, 0.2, 0.1, 0.6, 0.3, 0.25, 0.25, 0.5]),
            m(&[0.7, 0.1, 0.2, 0.0, 0.9, 0.1, 0.4, 0.4, 0.2]),
            m(&[0.6, 0.4, 0.0, 0.3, 0.3, 0.4, 0.0, 0.0, 1.0]),
            m(&[0.2, 0.3, 0.5, 0.5, 0.5, 0.0, 0.1, 0.8, 0.1]),
        ];
        let layers = layers(&caps);
        let together = upper_bounds_of(&layers, &[2, 0, 1, 2]);
        for (bounds, source) in together.iter().zip([2, 0, 1, 2]) {
            assert_eq!(bounds, &upper_bounds(&layers, source));
        }
    }

    #[test]
    fn deep_flows_are_settled_by_the_layer_below_and_equal_the_search() {
        let layer = Matrix {
            n: 3,
            data: vec![0.6, 0.2, 0.2, 0.3, 0.4, 0.3, 0.25, 0.25, 0.5],
        };
        let caps = vec![layer; 6];
        let mut settled = 0;
        for l in 4..=6 {
            for j in 0..3 {
                let below: Vec<Settled> = (0..3)
                    .map(|i| Settled::exact(max_flow(&caps[..l - 1], i, j)))
                    .collect();
                let spread = Spread::of(&below);
                for t in 0..3 {
                    let bound = upper_bounds(&layers(&caps[..l]), t)[j];
                    let exact = max_flow(&caps[..l], t, j);
                    assert!(exact <= bound + 1e-15);
                    let weights = caps[l - 1].row(t);
                    let mut top = Vec::new();
                    if let Some(s) = spread.settles(weights, bound, &mut top) {
                        settled += 1;
                        assert!((s.value - exact).abs() <= 1e-13 * exact, "{l} {t} {j}");
                        assert!(s.reached <= exact + 1e-15);
                        // The knapsack flow's arcs out of the source: within their
                        // capacities, carrying what it reaches.
                        assert!(top.iter().zip(weights).all(|(x, w)| *x <= *w));
                        assert!((top.iter().sum::<f64>() - s.reached).abs() <= 1e-15);
                    }
                }
            }
        }
        assert!(settled > 0, "no flow was settled by bounds");
    }
}
