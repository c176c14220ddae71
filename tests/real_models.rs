//! Real pretrained weights from PyPI against transformers, to 1e-4 (SPEC §7): rxnfp's BERT
//! masked LM and its 50-label BertForSequenceClassification, rxnmapper's ALBERT masked LM,
//! all in torch's legacy `pytorch_model.bin` format and all on reaction SMILES given as
//! `--pretokenized` vocabulary tokens. References: scripts/reference/real_reference.py.

mod common;

use bert_explain::report::Prediction;
use bert_explain::Report;
use common::{assert_matches, bin, real_model, repo};
use serde::Deserialize;

/// Real checkpoints, as for all-MiniLM-L6-v2.
const TOLERANCE: f64 = 1e-4;

/// One row of tests/fixtures/real/cases.json.
#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    model: String,
    text: String,
    target: Option<usize>,
    candidates: Vec<String>,
    top_k: usize,
}

fn cases() -> Vec<Case> {
    let path = repo().join("tests/fixtures/real/cases.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn fixture(name: &str) -> Report {
    let path = repo().join(format!("tests/fixtures/real/{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn check(model: &str) {
    let cases: Vec<Case> = cases().into_iter().filter(|c| c.model == model).collect();
    assert!(
        cases.len() >= 3,
        "{model}: expected at least three reference inputs"
    );
    let dir = real_model(model);
    for case in &cases {
        let want = fixture(&case.name);
        let mut cmd = bin();
        cmd.args(["--json", "--pretokenized", "--model"]).arg(&dir);
        if matches!(want.prediction, Some(Prediction::Words { .. })) {
            cmd.arg("--candidates")
                .arg(case.candidates.join(","))
                .arg("--top-k")
                .arg(case.top_k.to_string());
        }
        if let Some(target) = case.target {
            cmd.arg("--target").arg(target.to_string());
        }
        let got = common::report_of(cmd.arg(&case.text));
        assert_matches(&case.name, &got, &want, TOLERANCE);
        assert_eq!(
            (&got.family, &got.task),
            (&want.family, &want.task),
            "{}",
            case.name
        );
    }
}

#[test]
fn rxnfp_bert_masked_lm() {
    check("rxnfp-bert-mlm");
}

#[test]
fn rxnfp_bert_classifier_with_50_labels() {
    check("rxnfp-bert-cls");
}

#[test]
fn rxnmapper_albert_masked_lm() {
    check("rxnmapper-albert-mlm");
}

/// SMILES tokens that BERT's punctuation splitting would break are looked up whole, and
/// one the vocabulary lacks is named.
#[test]
fn pretokenized_text_keeps_smiles_tokens_whole() {
    let dir = real_model("rxnfp-bert-mlm");
    let text = "c 1 c c [nH] c 1 >> [MASK]";
    let report: Report = common::report_of(
        bin()
            .args(["--json", "--pretokenized", "--model"])
            .arg(&dir)
            .arg(text),
    );
    assert_eq!(
        report.tokens,
        ["[CLS]", "c", "1", "c", "c", "[nH]", "c", "1", ">>", "[MASK]", "[SEP]"]
    );
    common::fails(
        &[
            "--pretokenized",
            "--model",
            &dir.display().to_string(),
            "C [Xx] >> [MASK]",
        ],
        2,
        &["[Xx]", "not in the model's vocabulary"],
    );
}

/// `--evaluate` on a real masked LM and the real classifier: importance to 1e-4 and the
/// correlations to 1e-9 (the reference rounds its maps to 1e-10 before ranking, so that
/// flows equal in exact arithmetic tie as they do here).
#[test]
fn importance_on_real_weights_matches_the_reference() {
    for model in ["rxnmapper-albert-mlm", "rxnfp-bert-cls"] {
        real_model(model);
    }
    let models = repo().join("models/downloaded");
    let root = std::env::var_os("BERT_EXPLAIN_REAL_MODELS").map_or(models, Into::into);
    let checked = common::importance::check_importance_fixtures(
        "tests/fixtures/real/importance",
        &root,
        &["--pretokenized"],
    );
    assert!(checked >= 2, "expected a masked LM and a classifier");
}
