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
        // The paper's scores and integrated gradients, where the fixture has them (fixtures
        // made before them hold the first three).
        let paper = [
            (
                "gradient_sum_abs",
                &got.gradient_sum_abs,
                &want.gradient_sum_abs,
            ),
            (
                "gradient_x_input_abs",
                &got.gradient_x_input_abs,
                &want.gradient_x_input_abs,
            ),
            ("blank_out_abs", &got.blank_out_abs, &want.blank_out_abs),
            (
                "integrated_gradients",
                &got.integrated_gradients,
                &want.integrated_gradients,
            ),
            (
                "embedding_gradient_sum_abs",
                &got.embedding_gradient_sum_abs,
                &want.embedding_gradient_sum_abs,
            ),
            (
                "embedding_gradient_x_input_abs",
                &got.embedding_gradient_x_input_abs,
                &want.embedding_gradient_x_input_abs,
            ),
        ];
        for (what, g, w) in paper {
            if !w.is_empty() {
                assert_close(name, what, g, w, TOLERANCE);
            }
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
            let norm = got.gradient_norm.iter().cloned().fold(0.0, f64::max);
            let sum = got.gradient_sum_abs.iter().cloned().fold(0.0, f64::max);
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
