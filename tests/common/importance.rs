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
    /// `--correlate-without-specials`: the correlations leave [CLS] and [SEP] out.
    #[serde(default)]
    pub without_specials: bool,
    pub importance: bert_explain::faithfulness::Importance,
    pub evaluation: bert_explain::faithfulness::correlations::Evaluation,
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
    if fixture.without_specials {
        cmd.arg("--correlate-without-specials");
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
        // Subfolders hold other inputs' fixtures (vision/: images).
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
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
        // Every score the fixture has (fixtures made before the paper's scores and integrated
        // gradients hold the first three).
        let want_scores = want.scores();
        assert!(want_scores.len() >= 3, "{name}: {want_scores:?}");
        for (what, w) in want_scores {
            let g = got
                .score(what)
                .unwrap_or_else(|| panic!("{name}: no {what}"));
            assert_close(name, what, g, w, TOLERANCE);
        }
        // captum's completeness check: the attributions' sum and p − p(baseline).
        if let Some(want) = &want.integrated_gradients_check {
            let got = got.integrated_gradients_check.as_ref().unwrap();
            assert_eq!(got.steps, want.steps, "{name}");
            assert!(
                (got.sum - want.sum).abs() <= TOLERANCE,
                "{name}: {got:?} vs {want:?}"
            );
            let (g, w) = (got.difference, want.difference);
            assert!((g - w).abs() <= TOLERANCE, "{name}: {got:?} vs {want:?}");
        }
        // The gradient's components sum to zero in exact arithmetic wherever the embeddings
        // enter a LayerNorm (every encoder's; a decoder's RMSNorm does not centre), so
        // |Σ_d ∂p/∂e_jd| is f32 rounding there: tiny beside the gradient's norm, and its ranks
        // (and correlations) are noise in any implementation.
        let decoders = [
            "llama",
            "qwen2",
            "mistral",
            "qwen3",
            "gemma",
            "gemma2",
            "gemma3_text",
            "phi3",
        ];
        if !decoders.contains(&report.family.as_deref().unwrap_or("bert")) {
            let largest = |score: &str| {
                got.score(score)
                    .unwrap()
                    .iter()
                    .cloned()
                    .fold(0.0, f64::max)
            };
            let (norm, sum) = (largest("gradient_norm"), largest("gradient_sum_abs"));
            assert!(
                sum <= 1e-4 * norm,
                "{name}: |Σ grad| {sum} against ‖grad‖ {norm}"
            );
        }
        // Ranks of values that agree to 1e-4 are the same unless two values tie that
        // closely; the correlations then agree to rounding.
        let evaluation = report.evaluation.unwrap();
        assert_eq!(
            evaluation.without_specials, fixture.without_specials,
            "{name}"
        );
        let got_entries = evaluation.entries();
        let want_entries = fixture.evaluation.entries();
        assert!(
            want_entries.len() >= 9,
            "{name}: the fixture's correlations"
        );
        for (score, method, w) in want_entries {
            if score == "gradient_sum_abs" {
                continue;
            }
            let g = got_entries
                .iter()
                .find(|(s, m, _)| *s == score && *m == method)
                .unwrap_or_else(|| panic!("{name}: no {score} × {method} in the report"))
                .2;
            let pair =
                |v: &[Option<f64>]| v.iter().map(|x| x.unwrap_or(f64::NAN)).collect::<Vec<_>>();
            let (g, w) = (pair(g), pair(w));
            assert_eq!(g.len(), w.len(), "{name}: {score} × {method}");
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
