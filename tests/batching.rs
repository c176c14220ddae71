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

use bert_explain::explain::Grouping;
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
    let given: Vec<(&str, &ExplainOptions)> =
        texts.iter().map(|t| (t.as_str(), &options)).collect();
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

/// `--batch-size` takes 1 to 256 lines, and only where lines are grouped: an encoder's.
#[test]
fn the_batch_size_is_checked() {
    let input = repo().join("data/pronouns.jsonl");
    let input = input.to_str().unwrap();
    fails(
        &[
            "--model",
            "models/tiny-gpt2",
            "--input",
            input,
            "--batch-size",
            "4",
        ],
        2,
        &["--batch-size applies to encoders", "leave --batch-size out"],
    );
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
