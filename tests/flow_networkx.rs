//! The flow engine against networkx's edmonds_karp on the same capacities
//! (tests/fixtures/flow_networkx.json, written by scripts/bench/make_flow_fixture.py): every
//! maximum flow of the reference's `compute_flows`, to 1e-9.

mod common;

use bert_explain::attention::Matrix;
use bert_explain::relevance::{flow_from_every_position, max_flow};

const TOLERANCE: f64 = 1e-9;

fn fixture() -> (Vec<Matrix>, Vec<Vec<Vec<f64>>>) {
    common::flow::fixture("flow_networkx.json")
}

#[test]
fn every_max_flow_matches_networkx() {
    let (graph, want) = fixture();
    let n = graph[0].n;
    for (l, per_source) in want.iter().enumerate() {
        for (i, row) in per_source.iter().enumerate() {
            for (j, &expected) in row.iter().enumerate() {
                let got = max_flow(&graph[..=l], i, j);
                assert!(
                    (got - expected).abs() <= TOLERANCE,
                    "layer {} from {i} to {j}: {got} vs networkx {expected}",
                    l + 1
                );
            }
        }
    }
    assert_eq!(want.len() * n * n, 4 * 9 * 9);
}

#[test]
fn every_position_matches_networkx_normalised() {
    let (graph, want) = fixture();
    let got = flow_from_every_position(&graph);
    assert_eq!(got.len(), want.len());
    for (l, (g, w)) in got.iter().zip(&want).enumerate() {
        for (i, (gr, wr)) in g.iter().zip(w).enumerate() {
            let total: f64 = wr.iter().sum();
            for (j, (a, b)) in gr.iter().zip(wr).enumerate() {
                assert!(
                    (a - b / total).abs() <= TOLERANCE,
                    "layer {} position {i} token {j}: {a} vs {}",
                    l + 1,
                    b / total
                );
            }
        }
    }
}
