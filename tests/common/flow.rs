//! The flow fixtures: `augmented` Â_1 … Â_L and `max_flow[l][i][j]`, the maximum flow from
//! `(l + 1, i)` to `(0, j)` by a reference (flow_networkx.json, flow_exact.json).

use bert_explain::attention::Matrix;
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    /// `[L][n][n]`.
    augmented: Vec<Vec<Vec<f64>>>,
    /// `[L][n][n]`.
    max_flow: Vec<Vec<Vec<f64>>>,
}

/// The layers and the reference's maximum flows of tests/fixtures/`name`.
pub fn fixture(name: &str) -> (Vec<Matrix>, Vec<Vec<Vec<f64>>>) {
    let path = super::repo().join("tests/fixtures").join(name);
    let fixture: Fixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let layers = fixture
        .augmented
        .into_iter()
        .map(|rows| Matrix {
            n: rows.len(),
            data: rows.into_iter().flatten().collect(),
        })
        .collect();
    (layers, fixture.max_flow)
}
