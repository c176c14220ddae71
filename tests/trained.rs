//! The classifiers trained here for the paper's experiments (scripts/train/): each loads and
//! classifies its whole held-out set at the accuracy its TRAINING.md states, and the
//! faithfulness tables and figures regenerate from scripts/paper/. Their explanations against
//! transformers are in tests/methods.rs (agreement-*, fine-foods-*).

mod common;

use std::path::Path;

use bert_explain::report::Prediction;
use bert_explain::{ExplainOptions, Explainer, ModelSource};
use candle_core::Device;
use common::{bin, repo, sentiment_model};
use serde::Deserialize;

#[derive(Deserialize)]
struct Line {
    text: String,
    expected: String,
}

/// The fraction of `data`'s lines whose top label is the expected one.
fn accuracy(model: &Path, data: &str) -> (usize, usize) {
    let explainer = Explainer::load(&ModelSource::Folder(model.to_path_buf()), &Device::Cpu)
        .unwrap_or_else(|e| panic!("{model:?}: {e}"));
    let text = std::fs::read_to_string(repo().join(data)).unwrap();
    let options = ExplainOptions::default();
    let mut correct = 0;
    let mut total = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let line: Line = serde_json::from_str(line).unwrap();
        let prediction = explainer.predict(&line.text, &options).unwrap();
        let Some(Prediction::Labels { labels }) = prediction else {
            panic!("{model:?} is not a classifier");
        };
        correct += usize::from(labels[0].label == line.expected);
        total += 1;
    }
    eprintln!("{model:?} on {data}: {correct}/{total} right");
    (correct, total)
}

#[test]
fn agreement_classifier_gets_the_held_out_prefixes_right() {
    // TRAINING.md: 2000/2000 with transformers; a prediction or two may flip in another
    // implementation's arithmetic, no more.
    let (correct, total) = accuracy(
        &repo().join("models/agreement-classifier"),
        "data/agreement-heldout.jsonl",
    );
    assert_eq!(total, 2000);
    assert!(correct >= 1995, "{correct}/{total} held-out prefixes");
}

#[test]
fn natural_agreement_classifier_gets_its_stated_held_out_accuracy() {
    // models/agreement-natural/TRAINING.md: 3691/4073 with transformers. Prefixes whose two
    // probabilities are within f32 rounding of each other may flip, a handful at most.
    let (correct, total) = accuracy(
        &repo().join("models/agreement-natural"),
        "data/agreement-natural-heldout.jsonl",
    );
    assert_eq!(total, 4073);
    assert!(
        (3686..=3696).contains(&correct),
        "{correct}/{total} held-out prefixes"
    );
}

#[test]
fn sentiment_classifier_on_real_minilm_gets_its_stated_test_accuracy() {
    // models/sentiment-head/TRAINING.md: 747/1000 with transformers. Reviews whose two
    // probabilities are within f32 rounding of each other may flip, a handful at most.
    let (correct, total) = accuracy(sentiment_model(), "data/fine-foods-test.jsonl");
    assert_eq!(total, 1000);
    assert!(
        (742..=752).contains(&correct),
        "{correct}/{total} test reviews"
    );
}

#[test]
fn the_faithfulness_tables_and_figures_regenerate_from_the_scripts() {
    let out = tempfile::tempdir().unwrap();
    let binary = bin().get_program().to_owned();
    let status = std::process::Command::new("bash")
        .arg(repo().join("scripts/paper/faithfulness.sh"))
        .args([
            "models/agreement-classifier",
            "data/agreement-heldout.jsonl",
        ])
        .arg(out.path())
        .args(["0", "12"])
        .env("BERT_EXPLAIN", &binary)
        .current_dir(repo())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let summary = std::fs::read_to_string(out.path().join("summary.txt")).unwrap();
    for score in ["gradient_norm", "gradient_x_input", "blank_out"] {
        assert!(
            summary.contains(&format!(
                "Spearman correlation with {score} (mean ± std over 12 examples)"
            )),
            "{summary}"
        );
    }
    for row in [
        "raw",
        "rollout",
        "flow",
        "alti flow",
        "grad-attention rollout",
        "value-zeroing layer",
    ] {
        assert!(summary.contains(&format!("\n  {row} ")), "{row}: {summary}");
    }
    assert!(summary.contains("ERASER AOPC"), "{summary}");
    let reports = std::fs::read_to_string(out.path().join("reports.jsonl")).unwrap();
    assert_eq!(reports.lines().count(), 12);

    let svg = out.path().join("blank_out.svg");
    let status = std::process::Command::new("python3")
        .arg(repo().join("scripts/paper/figure.py"))
        .arg(out.path().join("reports.jsonl"))
        .arg("blank_out")
        .arg(&svg)
        .status()
        .unwrap();
    assert!(status.success());
    let svg = std::fs::read_to_string(svg).unwrap();
    // One line per map: attention's raw/rollout/flow and 3 maps for each of 4 other methods.
    assert_eq!(svg.matches("<polyline").count(), 15, "{svg}");
}
