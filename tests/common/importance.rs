//! `--evaluate` against reference fixtures (scripts/reference/importance.py and its
//! relatives): importance scores to 1e-4, correlations to 1e-9.

use std::path::Path;

use serde::Deserialize;

use super::{bin, repo};

#[derive(Deserialize)]
pub struct ImportanceFixture {
    pub name: String,
    pub model: String,
    pub text: String,
    pub target: Option<usize>,
    pub word: Option<String>,
    /// Classifiers (tests/fixtures/families/importance): the label explained.
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub pair: Option<String>,
    pub blank: String,
    pub importance: bert_explain::importance::Importance,
    pub evaluation: bert_explain::evaluate::Evaluation,
}

/// The bound for parity with PyTorch.
pub const TOLERANCE: f64 = 1e-4;

fn evaluate(fixture: &ImportanceFixture, models: &Path, extra: &[&str]) -> bert_explain::Report {
    let mut cmd = bin();
    cmd.current_dir(repo())
        .args(["--json", "--evaluate", "--blank", &fixture.blank])
        .args(extra)
        .arg("--model")
        .arg(models.join(&fixture.model));
    if let Some(word) = &fixture.word {
        cmd.args(["--importance-word", word]);
    }
    if let Some(label) = &fixture.label {
        cmd.args(["--label", label]);
    }
    if let Some(pair) = &fixture.pair {
        cmd.args(["--pair", pair]);
    }
    if let Some(target) = fixture.target {
        cmd.args(["--target", &target.to_string()]);
    }
    let output = cmd.arg(&fixture.text).output().unwrap();
    assert!(
        output.status.success(),
        "{}: {}",
        fixture.name,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn assert_close(name: &str, what: &str, got: &[f64], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{name}: {what}");
    for (j, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tolerance,
            "{name}: {what}[{j}] = {a}, reference {b}"
        );
    }
}

/// Checks every fixture in `dir`; returns how many.
pub fn check_importance_fixtures(dir: &str, models: &Path, extra: &[&str]) -> usize {
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let fixture: ImportanceFixture = serde_json::from_str(&text).unwrap();
        let report = evaluate(&fixture, models, extra);
        let (got, want) = (report.importance.unwrap(), &fixture.importance);
        let name = &fixture.name;
        assert_eq!((&got.word, got.id), (&want.word, want.id), "{name}: word");
        assert_eq!(got.blank_token, want.blank_token, "{name}");
        assert!(
            (got.probability - want.probability).abs() <= TOLERANCE,
            "{name}"
        );
        assert_close(
            name,
            "gradient_norm",
            &got.gradient_norm,
            &want.gradient_norm,
            TOLERANCE,
        );
        let (g, w) = (&got.gradient_x_input, &want.gradient_x_input);
        assert_close(name, "gradient_x_input", g, w, TOLERANCE);
        assert_close(
            name,
            "blank_out",
            &got.blank_out,
            &want.blank_out,
            TOLERANCE,
        );
        // Ranks of values that agree to 1e-4 are the same unless two values tie that
        // closely; the correlations then agree to rounding.
        let evaluation = report.evaluation.unwrap();
        for ((score, method, g), (_, _, w)) in evaluation
            .entries()
            .into_iter()
            .zip(fixture.evaluation.entries())
        {
            let pair =
                |v: &[Option<f64>]| v.iter().map(|x| x.unwrap_or(f64::NAN)).collect::<Vec<_>>();
            let (g, w) = (pair(g), pair(w));
            for (l, (a, b)) in g.iter().zip(&w).enumerate() {
                let same = (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9;
                assert!(
                    same,
                    "{name}: {score} × {method} layer {}: {a} vs {b}",
                    l + 1
                );
            }
        }
        checked += 1;
    }
    checked
}
