//! `--evaluate` against the PyTorch + scipy reference (scripts/reference/importance.py), and
//! batch mode over the datasets in data/.

mod common;

use std::path::Path;

use common::{bin, repo};
use serde::Deserialize;

#[derive(Deserialize)]
struct ImportanceFixture {
    name: String,
    model: String,
    text: String,
    target: Option<usize>,
    word: Option<String>,
    /// Classifiers (tests/fixtures/families/importance): the label explained.
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    pair: Option<String>,
    blank: String,
    importance: bert_explain::importance::Importance,
    evaluation: bert_explain::evaluate::Evaluation,
}

/// The issue's bound for parity with PyTorch.
const TOLERANCE: f64 = 1e-4;

fn evaluate(fixture: &ImportanceFixture) -> bert_explain::Report {
    let mut cmd = bin();
    cmd.current_dir(repo())
        .args(["--json", "--evaluate", "--blank", &fixture.blank, "--model"])
        .arg(Path::new("models").join(&fixture.model));
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

#[test]
fn importance_and_correlations_match_the_reference() {
    let checked = check_importance_fixtures("tests/fixtures/importance");
    assert!(
        checked >= 15,
        "expected the twelve tiny MLM cases and three variants"
    );
}

/// Classifiers of every family: gradients and blank-out of the chosen label's probability.
#[test]
fn classifier_importance_matches_the_reference() {
    let checked = check_importance_fixtures("tests/fixtures/families/importance");
    assert!(checked >= 5, "expected a classifier of each family");
}

/// Checks every fixture in `dir`; returns how many.
fn check_importance_fixtures(dir: &str) -> usize {
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let fixture: ImportanceFixture = serde_json::from_str(&text).unwrap();
        let report = evaluate(&fixture);
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

#[test]
fn evaluate_needs_a_masked_lm_head() {
    let output = bin()
        .current_dir(repo())
        .args([
            "--evaluate",
            "--model",
            "models/tiny-bert-encoder",
            "The [MASK] book",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // An option that does not fit the model: a usage error (SPEC §3).
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--evaluate needs a checkpoint with a prediction head"),
        "{stderr}"
    );
}

#[test]
fn datasets_have_at_least_fifty_examples_each() {
    for (file, candidates) in [
        ("pronouns.jsonl", ["his", "her"]),
        ("agreement.jsonl", ["is", "are"]),
    ] {
        let text = std::fs::read_to_string(repo().join("data").join(file)).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(lines.len() >= 50, "{file}: {} examples", lines.len());
        for line in &lines {
            assert_eq!(
                line["text"].as_str().unwrap().matches("[MASK]").count(),
                1,
                "{line}"
            );
            assert_eq!(line["candidates"], serde_json::json!(candidates), "{line}");
        }
    }
}

#[test]
fn batch_mode_reports_every_line_and_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let lines = [
        r#"{"text": "The author talked to Sara about [MASK] book"}"#,
        "",
        r#"{"text": "The keys to the cabinet [MASK] on the table", "candidates": ["is", "are"]}"#,
        r#"{"text": "no mask here"}"#,
        "not json",
        r#"{"text": "He talked to her about his book", "target": 6, "expected": "his"}"#,
    ];
    std::fs::write(&input, lines.join("\n")).unwrap();
    let output = dir.path().join("out.jsonl");
    let run = bin()
        .current_dir(repo())
        .args([
            "--model",
            "models/tiny-bert-modern",
            "--evaluate",
            "--input",
        ])
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("Spearman correlation with blank_out (mean ± std over 3 examples)"),
        "{stdout}"
    );
    assert!(stdout.contains("5 sentences (2 failed)"), "{stdout}");

    let records: Vec<serde_json::Value> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 5, "one record per non-blank line");
    assert_eq!(records[2]["line"], 4);
    assert!(records[2]["error"].as_str().unwrap().contains("no [MASK]"));
    assert_eq!(records[3]["line"], 5);
    assert_eq!(records[4]["target"]["index"], 6);
    assert_eq!(records[1]["prediction"]["candidates"][1]["word"], "are");

    // A batch record is the same report as a single run of that sentence.
    let single = bin()
        .current_dir(repo())
        .args(["--model", "models/tiny-bert-modern", "--evaluate", "--json"])
        .arg("The author talked to Sara about [MASK] book")
        .output()
        .unwrap();
    let single: serde_json::Value = serde_json::from_slice(&single.stdout).unwrap();
    assert_eq!(records[0], single);
}

#[test]
fn terminal_shows_the_scores_and_correlations() {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/importance/modern-author.json"));
    let fixture: ImportanceFixture = serde_json::from_str(&text.unwrap()).unwrap();
    let output = bin()
        .current_dir(repo())
        .args([
            "--model",
            "models/tiny-bert-modern",
            "--evaluate",
            &fixture.text,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("Spearman correlation of relevance with importance"),
        "{stdout}"
    );
    // The relevance table comes first; the importance table's row for token 8 is the last.
    let row = stdout
        .lines()
        .rev()
        .find(|l| l.split_whitespace().take(2).eq(["8", "book"]))
        .unwrap_or_else(|| panic!("no importance row for book in {stdout}"));
    let numbers: Vec<f64> = row
        .split_whitespace()
        .skip(2)
        .map(|v| v.parse().unwrap())
        .collect();
    let want = &fixture.importance;
    let expected = [
        want.gradient_norm[8],
        want.gradient_x_input[8],
        want.blank_out[8],
    ];
    for (printed, value) in numbers.iter().zip(expected) {
        assert!(
            (printed - value).abs() <= 5e-5 + TOLERANCE,
            "{row}: {printed} vs {value}"
        );
    }
    let flow_row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("blank_out") && l.contains("flow"));
    let printed: Vec<f64> = flow_row
        .unwrap()
        .split_whitespace()
        .skip(2)
        .map(|v| v.parse().unwrap())
        .collect();
    let reference = &fixture.evaluation.blank_out.flow;
    for (p, r) in printed.iter().zip(reference) {
        assert!((p - r.unwrap()).abs() <= 5e-4, "{p} vs {r:?}");
    }
}
