//! The binary against the PyTorch reference on the tiny checkpoints in models/:
//! bert-base-uncased naming (pytorch_model.bin, tied decoder, vocab.txt only), modern naming
//! (safetensors, untied decoder, tokenizer.json), and an encoder without an MLM head.

mod common;

use common::{assert_matches, cases, fixture, repo, run_case};

/// Probabilities and relevances, end to end through the model, as the issue asks.
const TOLERANCE: f64 = 1e-5;

fn check_model(model: &str) {
    let cases: Vec<_> = cases().into_iter().filter(|c| c.model == model).collect();
    assert!(
        cases.len() >= 6,
        "{model}: expected the six reference sentences"
    );
    for case in cases {
        let got = run_case(&case, &repo().join("models").join(model));
        assert_matches(&case.name, &got, &fixture(&case.name), TOLERANCE);
    }
}

#[test]
fn legacy_naming_matches_the_reference() {
    check_model("tiny-bert-legacy");
}

#[test]
fn modern_naming_matches_the_reference() {
    check_model("tiny-bert-modern");
}

#[test]
fn encoder_without_head_matches_the_reference_and_predicts_nothing() {
    check_model("tiny-bert-encoder");
}

#[test]
fn terminal_report_shows_the_reference_numbers() {
    let case = &cases()[0];
    let want = fixture(&case.name);
    let output = common::bin()
        .args(["--model", "models/tiny-bert-legacy", &case.text])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let Some(bert_explain::report::Prediction::Words { candidates, .. }) = want.prediction else {
        panic!("the reference has a masked-LM prediction");
    };
    // Printed with four decimals: within half a unit of the last digit, plus the tolerance.
    let close = |printed: &str, value: f64| {
        let printed: f64 = printed.parse().unwrap();
        (printed - value).abs() <= 5e-5 + TOLERANCE
    };
    for c in &candidates {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("p({}) = ", c.word)))
            .unwrap_or_else(|| panic!("no p({}) in {stdout}", c.word));
        assert!(
            close(line.rsplit(' ').next().unwrap(), c.probability),
            "{line}"
        );
    }
    let last = want.layers - 1;
    for (j, token) in want.tokens.iter().enumerate() {
        let row = stdout
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .take(2)
                    .eq([j.to_string().as_str(), token])
            })
            .unwrap_or_else(|| panic!("no row for token {j} {token} in {stdout}"));
        let numbers: Vec<&str> = row
            .split_whitespace()
            .filter(|w| w.starts_with("0."))
            .collect();
        let r = &want.relevance;
        let expected = [r.raw[last][j], r.rollout[last][j], common::flow(r)[last][j]];
        assert_eq!(numbers.len(), 3, "row {row:?}");
        for (printed, value) in numbers.iter().zip(expected) {
            assert!(close(printed, value), "row {row:?}: {printed} vs {value}");
        }
    }
}
