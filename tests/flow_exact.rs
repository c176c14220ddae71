//! The flow engine against exact arithmetic (tests/fixtures/flow_exact.json, written by
//! scripts/bench/make_exact_flow_fixture.py: Dinic's algorithm on the capacities scaled to
//! integers, no rounding and no zero threshold). The rows are peaked: half the arcs lie at or
//! below 1e-14, and leaving those out moves some flows by 4e-7 of themselves, so an engine
//! that counted them as zero fails here. Every flow, alone, from one position and from every
//! position, to 1e-13 of itself (each within 1e-14 when written).

mod common;

use bert_explain::attention::Matrix;
use bert_explain::relevance::{flow, flow_from_every_position, max_flow};

const TOLERANCE: f64 = 1e-13;

fn fixture() -> (Vec<Matrix>, Vec<Vec<Vec<f64>>>) {
    common::flow::fixture("flow_exact.json")
}

fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= TOLERANCE * want,
        "{what}: {got} vs exact {want} ({:.1e} of it)",
        (got - want).abs() / want
    );
}

/// `[l][i][j]` normalised over `j`, as the maps report it.
fn normalised(raw: &[Vec<Vec<f64>>]) -> Vec<Vec<Vec<f64>>> {
    raw.iter()
        .map(|layer| {
            layer
                .iter()
                .map(|row| {
                    let total: f64 = row.iter().sum();
                    row.iter().map(|f| f / total).collect()
                })
                .collect()
        })
        .collect()
}

#[test]
fn every_max_flow_is_exact() {
    let (graph, want) = fixture();
    for (l, per_source) in want.iter().enumerate() {
        for (i, row) in per_source.iter().enumerate() {
            for (j, &exact) in row.iter().enumerate() {
                let what = format!("layer {} from {i} to {j}", l + 1);
                close(max_flow(&graph[..=l], i, j), exact, &what);
            }
        }
    }
    assert_eq!(want.len() * graph[0].n * graph[0].n, 5 * 16 * 16);
}

#[test]
fn one_position_and_every_position_are_exact() {
    let (graph, want) = fixture();
    let want = normalised(&want);
    let every = flow_from_every_position(&graph);
    for i in 0..graph[0].n {
        let one = flow(&graph, i);
        for (l, want) in want.iter().enumerate() {
            for (j, &exact) in want[i].iter().enumerate() {
                let what = format!("layer {} position {i} token {j}", l + 1);
                close(one[l][j], exact, &format!("{what}, from one position"));
                close(
                    every[l][i][j],
                    exact,
                    &format!("{what}, from every position"),
                );
            }
        }
    }
}
