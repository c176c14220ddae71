//! Batch mode's grouped forward passes (`--batch-size`): lines of very different lengths in
//! one pass, each padded to the longest, give every line the report it gets alone, on every
//! family and task.
//!
//! Each line's attention runs on its own tokens, and candle's CPU product gives each row of a
//! dense layer the same bits whatever the rows around it, at the widths of real checkpoints:
//! their reports are identical. The tiny checkpoints' layers are 32 wide, where gemm's kernel
//! depends on the number of rows (`narrow_products_depend_on_the_rows` below): there the
//! reports differ by float32 rounding, at most 7.5e-6 as measured.

mod common;

use std::path::Path;

use bert_explain::causal::{CausalExplainer, CausalOptions, Decoding};
use bert_explain::explain::{Grouping, Input};
use bert_explain::model::Reads;
use bert_explain::{DeviceChoice, ExplainOptions, Explainer, ModelSource};
use common::{fails, minilm, real_model, repo, sentiment_model};
use serde_json::Value;

/// Lines of 1 to 40 words.
fn texts() -> Vec<String> {
    let words = "the keys to the old cabinet by the door are on the table near the window and \
                 the cat that sat on the mat saw them when the author talked to sara about her \
                 book in the house by the river";
    let words: Vec<&str> = words.split_whitespace().collect();
    [1, 40, 3, 12, 2, 25, 7, 33, 5]
        .iter()
        .map(|&n| words[..n].join(" "))
        .collect()
}

/// The largest difference between two reports' numbers; every other value (tokens, ids,
/// the words predicted, shapes) equal.
fn difference(a: &Value, b: &Value, path: &str) -> f64 {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: Vec<_> = x.keys().collect();
            assert_eq!(keys, y.keys().collect::<Vec<_>>(), "{path}");
            x.iter()
                .map(|(k, v)| difference(v, &y[k], &format!("{path}.{k}")))
                .fold(0.0, f64::max)
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{path}");
            x.iter()
                .zip(y)
                .map(|(v, w)| difference(v, w, path))
                .fold(0.0, f64::max)
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs()
        }
        _ => {
            assert_eq!(a, b, "{path}");
            0.0
        }
    }
}

/// Every line's report from one grouped pass against the line alone: the largest difference.
fn grouped_against_alone(model: &Path) -> f64 {
    let device = bert_explain::device(DeviceChoice::Cpu).unwrap();
    let explainer = Explainer::load(&ModelSource::Folder(model.to_path_buf()), &device).unwrap();
    let options = ExplainOptions {
        // The masked LM's (or discriminator's) second token, whatever its mask's spelling.
        target: (explainer.task().reads == Reads::Target).then_some(1),
        all_positions: true,
        ..ExplainOptions::default()
    };
    let texts = texts();
    let given: Vec<(Input, &ExplainOptions)> =
        texts.iter().map(|t| (Input::Text(t), &options)).collect();
    // Every line that may share a pass in one (the one-token line runs alone).
    let together = Grouping {
        padding: f64::INFINITY,
        ..Grouping::of(texts.len())
    };
    let grouped = explainer.forward_many(&given, &together);
    let mut worst = 0.0f64;
    for (text, forwarded) in texts.iter().zip(grouped) {
        let alone = explainer.explain(text, &options);
        let grouped = forwarded.and_then(|f| explainer.finish(f, &options));
        let (alone, grouped) = match (alone, grouped) {
            (Ok(a), Ok(g)) => (a, g),
            (Err(a), Err(g)) => {
                assert_eq!(a.to_string(), g.to_string());
                continue;
            }
            (a, g) => panic!("{text:?}: alone {:?}, grouped {:?}", a.err(), g.err()),
        };
        let (a, g) = (
            serde_json::to_value(&alone).unwrap(),
            serde_json::to_value(&grouped).unwrap(),
        );
        worst = worst.max(difference(&a, &g, text));
    }
    worst
}

#[test]
fn every_tiny_checkpoint_reports_each_line_as_alone() {
    let mut measured = Vec::new();
    for entry in std::fs::read_dir(repo().join("models")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let source = ModelSource::Folder(dir.clone());
        if !name.starts_with("tiny-") || bert_explain::model::families::is_causal(&source) {
            continue;
        }
        measured.push((name, grouped_against_alone(&dir)));
    }
    for (name, worst) in &measured {
        println!("{name}: {worst:e}");
        assert!(*worst <= TINY_ROUNDING, "{name}: {worst:e}");
    }
    assert!(measured.len() > 20);
}

/// What float32 products of 32-wide layers may round apart, grouped or alone.
const TINY_ROUNDING: f64 = 1e-5;

/// The cause of the tiny checkpoints' differences: a dense layer's row gets other bits from a
/// product of 8 rows than from one of 24 when the layer is 32 wide, the same bits when it is
/// 384 wide (real checkpoints: 256 to 4,096).
#[test]
fn narrow_products_depend_on_the_rows() {
    use bert_explain::linalg::Dense;
    use candle_core::{Device, Module, Tensor};
    let rows_apart = |width: usize| -> f32 {
        let values = |count: usize, seed: f32| -> Vec<f32> {
            (0..count).map(|i| (i as f32 * 0.37 + seed).sin()).collect()
        };
        let x = Tensor::from_vec(values(24 * width, 0.1), (24, width), &Device::Cpu).unwrap();
        let w = Tensor::from_vec(values(width * width, 0.7), (width, width), &Device::Cpu).unwrap();
        let dense = Dense::new(w, None);
        let all = dense.forward(&x).unwrap().narrow(0, 0, 8).unwrap();
        let first = dense.forward(&x.narrow(0, 0, 8).unwrap()).unwrap();
        let apart = (all - first).unwrap().abs().unwrap().flatten_all().unwrap();
        apart.max(0).unwrap().to_scalar::<f32>().unwrap()
    };
    assert!(rows_apart(32) > 0.0);
    assert_eq!(rows_apart(384), 0.0);
}

#[test]
fn real_checkpoints_report_each_line_as_alone() {
    for dir in [
        minilm().to_path_buf(),
        sentiment_model().to_path_buf(),
        real_model("rxnfp-bert-mlm"),
        real_model("rxnfp-bert-cls"),
        real_model("rxnmapper-albert-mlm"),
    ] {
        assert_eq!(grouped_against_alone(&dir), 0.0, "{}", dir.display());
    }
}

/// Each prompt's causal report, generated beside every other prompt in shared steps,
/// against the prompt's alone: the largest difference. The prompts differ in length and in
/// the tokens asked for (some stop where the others go on), one is sampled.
fn causal_grouped_against_alone(model: &Path, words: &[&str]) -> f64 {
    let device = bert_explain::device(DeviceChoice::Cpu).unwrap();
    let source = ModelSource::Folder(model.to_path_buf());
    let explainer = CausalExplainer::load(&source, &device).unwrap();
    let asked: Vec<(String, CausalOptions)> = [(1, 3), (9, 6), (4, 1), (14, 4), (2, 6), (6, 2)]
        .iter()
        .enumerate()
        .map(|(i, &(n, generate))| {
            let prompt: Vec<&str> = words.iter().cycle().skip(i).take(n).copied().collect();
            let decoding = match i {
                3 => Decoding::Sample {
                    seed: 7,
                    temperature: 0.8,
                },
                _ => Decoding::Greedy,
            };
            let options = CausalOptions {
                generate,
                decoding,
                ..CausalOptions::default()
            };
            (prompt.join(" "), options)
        })
        .collect();
    let given: Vec<(&str, &CausalOptions)> = asked.iter().map(|(p, o)| (p.as_str(), o)).collect();
    let together = Grouping {
        padding: f64::INFINITY,
        ..Grouping::of(given.len())
    };
    let mut worst = 0.0f64;
    for ((prompt, options), generated) in
        given.iter().zip(explainer.generate_many(&given, &together))
    {
        let alone = explainer.explain(prompt, options).unwrap();
        let grouped = explainer.finish(generated.unwrap(), options).unwrap();
        let (a, g) = (
            serde_json::to_value(&alone).unwrap(),
            serde_json::to_value(&grouped).unwrap(),
        );
        worst = worst.max(difference(&a, &g, prompt));
    }
    worst
}

/// Prompts generate together as alone: the same tokens, and maps within float32 rounding.
/// A prompt alone feeds one row a step after its first, which wide layers multiply with
/// gemv, and several prompts' rows take gemm's general kernel; on the 32-wide tiny
/// checkpoints the kernel also changes with the rows (`narrow_products_depend_on_the_rows`).
#[test]
fn prompts_generated_together_report_as_alone() {
    let english = [
        "the", "author", "talked", "to", "sara", "about", "her", "book", "and", "they",
    ];
    let mut measured = Vec::new();
    for entry in std::fs::read_dir(repo().join("models")).unwrap() {
        let dir = entry.unwrap().path();
        let source = ModelSource::Folder(dir.clone());
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("tiny-") && bert_explain::model::families::is_causal(&source) {
            measured.push((name, causal_grouped_against_alone(&dir, &english)));
        }
    }
    let austen = repo().join("models/austen-gpt2");
    measured.push((
        "austen-gpt2".into(),
        causal_grouped_against_alone(&austen, &english),
    ));
    let protein = ["E", "V", "Q", "L", "V", "E", "S", "G", "G", "G", "L"];
    let iglm = real_model("iglm-gpt2");
    measured.push(("iglm".into(), causal_grouped_against_alone(&iglm, &protein)));
    for (name, worst) in &measured {
        println!("{name}: {worst:e}");
        let bound = match name.starts_with("tiny-") {
            true => TINY_ROUNDING,
            false => 1e-6,
        };
        assert!(*worst <= bound, "{name}: {worst:e}");
    }
    assert!(measured.len() > 10);
}

/// `--batch-size` takes 1 to 256 lines, with an encoder or a causal model: a causal model's
/// prompts generated together give the reports they give a prompt at a time.
#[test]
fn the_batch_size_is_checked() {
    let input = repo().join("data/austen-next-word.jsonl");
    let input = input.to_str().unwrap();
    let lines = |size: &str| -> Vec<Value> {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first.jsonl");
        // Twelve prompts, each generating as many tokens as its place says.
        let text = std::fs::read_to_string(input).unwrap();
        let prompts: Vec<String> = (text.lines().take(12).enumerate())
            .map(|(i, line)| {
                let mut line: Value = serde_json::from_str(line).unwrap();
                line["generate"] = (1 + i % 4).into();
                line.to_string()
            })
            .collect();
        std::fs::write(&first, prompts.join("\n")).unwrap();
        let output = dir.path().join("out.jsonl");
        common::bin()
            .args(["--model", "models/austen-gpt2", "--batch-size", size])
            .arg("--input")
            .arg(&first)
            .arg("--output")
            .arg(&output)
            .assert()
            .success();
        let written = std::fs::read_to_string(&output).unwrap();
        written
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (alone, together) = (lines("1"), lines("5"));
    assert_eq!(alone.len(), 12);
    assert!(alone
        .iter()
        .all(|report| report["generated_ids"].is_array()));
    let worst = (alone.iter().zip(&together))
        .map(|(a, t)| difference(a, t, "line"))
        .fold(0.0, f64::max);
    assert!(worst <= 1e-6, "{worst:e}");
    for bad in ["0", "257", "x"] {
        fails(
            &[
                "--model",
                "models/tiny-bert-modern",
                "--input",
                input,
                "--batch-size",
                bad,
            ],
            2,
            &["is not a whole number from 1 to 256"],
        );
    }
    fails(
        &[
            "--model",
            "models/tiny-bert-modern",
            "--batch-size",
            "4",
            "a [MASK] b",
        ],
        2,
        &["--batch-size"],
    );
}
