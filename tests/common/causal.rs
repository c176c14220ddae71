//! Causal relevance against a reference's, shared by the causal tests.

use std::path::Path;

use bert_explain::causal::{CausalExplainer, CausalOptions, CausalRelevance, CausalReport};
use bert_explain::ModelSource;
use candle_core::Device;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// One case of a `tests/fixtures/causal/<dir>/cases.json`.
#[derive(Deserialize)]
pub struct Case {
    pub name: String,
    pub model: String,
    pub prompt: String,
    pub generate: usize,
}

/// `tests/fixtures/causal/<file>`, parsed.
pub fn read<T: DeserializeOwned>(file: &str) -> T {
    let path = super::repo().join("tests/fixtures/causal").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Every case of `tests/fixtures/causal/<dir>/cases.json`, its model in `models`: generates
/// with `options` (`generate` from the case) and hands the report and the case's fixture
/// (`<dir>/<name>.json`) to `check`.
pub fn each_case<F: DeserializeOwned>(
    dir: &str,
    models: &Path,
    options: &CausalOptions,
    check: impl Fn(&Case, CausalReport, F),
) {
    let cases: Vec<Case> = read(&format!("{dir}/cases.json"));
    for case in cases {
        let source = ModelSource::Folder(models.join(&case.model));
        let explainer = CausalExplainer::load(&source, &Device::Cpu).unwrap();
        let want: F = read(&format!("{dir}/{}.json", case.name));
        let options = CausalOptions {
            generate: case.generate,
            ..options.clone()
        };
        let got = explainer.explain(&case.prompt, &options).unwrap();
        check(&case, got, want);
    }
}

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
