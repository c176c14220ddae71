//! Raw attention, rollout and flow against the reference (networkx edmonds_karp for flow)
//! on the very attention tensors the reference used, so only the methods are compared.

mod common;

use bert_explain::{AttentionStack, Relevance, RelevanceOptions};
use common::AttentionFixture;

/// Far tighter than SPEC §1's 1e-6: both sides compute in f64 from the same inputs.
const TOLERANCE: f64 = 1e-9;

#[test]
fn methods_match_the_reference_on_its_own_attention() {
    let dir = common::repo().join("tests/fixtures/attention");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let fixture = AttentionFixture::load(&name);
        let (layers, heads, n) = (
            fixture.attention.len(),
            fixture.attention[0].len(),
            fixture.attention[0][0].len(),
        );
        let flat: Vec<f64> = fixture
            .attention
            .into_iter()
            .flatten()
            .flatten()
            .flatten()
            .collect();
        let stack = AttentionStack::from_vec(layers, heads, n, flat).unwrap();
        let got = Relevance::compute(&stack, fixture.target, RelevanceOptions::default()).unwrap();
        let want = common::fixture(&name).relevance;
        for (method, g, w) in [
            ("raw", &got.raw, &want.raw),
            ("rollout", &got.rollout, &want.rollout),
            ("flow", common::flow(&got), common::flow(&want)),
        ] {
            for (l, (gr, wr)) in g.iter().zip(w).enumerate() {
                for (j, (a, b)) in gr.iter().zip(wr).enumerate() {
                    assert!(
                        (a - b).abs() <= TOLERANCE,
                        "{name} {method} layer {} token {j}: {a} vs {b}",
                        l + 1
                    );
                }
            }
        }
        checked += 1;
    }
    assert!(
        checked >= 18,
        "expected the attention of every tiny-model case"
    );
}
