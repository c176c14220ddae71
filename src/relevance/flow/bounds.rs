//! Upper bounds on attention flow that cost one pass over the layers instead of a
//! max-flow search.
//!
//! No flow into node `(k, m)` exceeds `h_k(m) = Σ_i min(h_{k+1}(i), C_{k+1}[i][m])`: the flow
//! on each arc into it is at most the arc's capacity and at most what reached the arc's tail,
//! starting from `h_{L-1}(m) = C_L[source][m]` below the source. The flow into the sink
//! `(0, j)` is then at most `Σ_m min(h_1(m), C_1[m][j])`. On real attention this bound is
//! usually the answer, and knowing it lets the search stop as soon as the flow reaches it
//! instead of running a last phase that proves no more can pass.

use crate::attention::Matrix;

/// For the source `(L, source)`, `L = capacities.len()`: an upper bound on the maximum flow
/// to each sink `(0, j)`, `[n]`. With fewer than three layers the answer has a closed form and
/// no bound is needed: every entry is infinite.
pub fn upper_bounds(capacities: &[Matrix], source: usize) -> Vec<f64> {
    let layers = capacities.len();
    let n = capacities.first().map_or(0, |m| m.n);
    if layers < 3 {
        return vec![f64::INFINITY; n];
    }
    let mut reach = capacities[layers - 1].row(source).to_vec();
    for k in (0..layers - 1).rev() {
        let mut below = vec![0.0; n];
        for (i, &arrives) in reach.iter().enumerate() {
            if arrives > 0.0 {
                for (b, &c) in below.iter_mut().zip(capacities[k].row(i)) {
                    *b += arrives.min(c);
                }
            }
        }
        reach = below;
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relevance::flow::max_flow;

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
            let bounds = upper_bounds(&caps, source);
            for (sink, &bound) in bounds.iter().enumerate() {
                assert!(max_flow(&caps, source, sink) <= bound + 1e-15);
            }
        }
        // From (3, 1): reach (2, ·) = [0, 1]; (1, ·) = [min(1, .2), min(1, .8)] = [.2, .8];
        // sink 0: min(.2, .5) + min(.8, .25) = .45, which a flow attains.
        let bounds = upper_bounds(&caps, 1);
        assert!((bounds[0] - 0.45).abs() < 1e-15);
        assert!((max_flow(&caps, 1, 0) - 0.45).abs() < 1e-15);
    }
}
