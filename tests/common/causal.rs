//! Causal relevance against a reference's, shared by the causal tests.

use bert_explain::causal::CausalRelevance;

/// Every map (raw, rollout, corrected rollout, flow) of `got` equals `want`'s within
/// `tolerance`, shape included.
pub fn assert_close(name: &str, got: &CausalRelevance, want: &CausalRelevance, tolerance: f64) {
    let pairs = [
        ("raw", Some(&got.raw), Some(&want.raw)),
        ("rollout", Some(&got.rollout), Some(&want.rollout)),
        (
            "rollout_corrected",
            got.rollout_corrected.as_ref(),
            want.rollout_corrected.as_ref(),
        ),
        ("flow", got.flow.as_ref(), want.flow.as_ref()),
    ];
    for (method, g, w) in pairs {
        let (g, w) = (g.expect(method), w.expect(method));
        assert_eq!(g.len(), w.len(), "{name}: {method} generated tokens");
        for (k, (gk, wk)) in g.iter().zip(w).enumerate() {
            assert_eq!(gk.len(), wk.len(), "{name}: {method} prompt tokens");
            for (j, (gj, wj)) in gk.iter().zip(wk).enumerate() {
                assert_eq!(gj.len(), wj.len(), "{name}: {method} layers");
                for (l, (a, b)) in gj.iter().zip(wj).enumerate() {
                    assert!(
                        (a - b).abs() <= tolerance,
                        "{name}: {method}[{k}][{j}][{l}] = {a} vs reference {b}"
                    );
                }
            }
        }
    }
}
