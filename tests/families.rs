//! Every encoder family and head of the model abstraction (SPEC §7) against transformers:
//! tiny checkpoints made by scripts/reference/make_family_models.py (fixed seed), reference
//! reports by scripts/reference/family_reference.py (eager attention + networkx). Then each
//! family's answer to bad input.

mod common;

use std::path::{Path, PathBuf};

use bert_explain::report::Prediction;
use bert_explain::Report;
use common::{assert_matches, bin, fails, repo};
use serde::Deserialize;

/// Probabilities and relevances, end to end, as for the BERT tiny models.
const TOLERANCE: f64 = 1e-5;

/// One row of tests/fixtures/families/cases.json.
#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    model: String,
    text: String,
    #[serde(default)]
    pair: Option<String>,
    target: Option<usize>,
    #[serde(default)]
    candidates: Vec<String>,
    top_k: usize,
}

fn fixtures() -> PathBuf {
    repo().join("tests/fixtures/families")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fixture(name: &str) -> Report {
    let path = fixtures().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn model(name: &str) -> String {
    repo().join("models").join(name).display().to_string()
}

fn run(case: &Case) -> Report {
    run_on(case, &model(&case.model))
}

/// The case on the checkpoint in `folder`.
fn run_on(case: &Case, folder: &str) -> Report {
    let mut cmd = bin();
    cmd.arg("--json").arg("--model").arg(folder);
    if !case.candidates.is_empty() {
        cmd.arg("--candidates").arg(case.candidates.join(","));
    }
    if matches!(
        fixture(&case.name).prediction,
        Some(Prediction::Words { .. })
    ) {
        cmd.arg("--top-k").arg(case.top_k.to_string());
    }
    if let Some(pair) = &case.pair {
        cmd.arg("--pair").arg(pair);
    }
    if let Some(target) = case.target {
        cmd.arg("--target").arg(target.to_string());
    }
    common::report_of(cmd.arg(&case.text))
}

fn check(model: &str) {
    let cases: Vec<Case> = cases().into_iter().filter(|c| c.model == model).collect();
    assert!(!cases.is_empty(), "{model}: no reference cases");
    for case in &cases {
        let got = run(case);
        let want = fixture(&case.name);
        assert_matches(&case.name, &got, &want, TOLERANCE);
        assert_eq!(got.family, want.family, "{}: family", case.name);
        assert_eq!(got.task, want.task, "{}: task", case.name);
    }
}

#[test]
fn roberta_masked_lm() {
    check("tiny-roberta-mlm");
}

#[test]
fn roberta_classifier_with_pairs() {
    check("tiny-roberta-cls");
}

#[test]
fn xlm_roberta_masked_lm_with_sentencepiece() {
    check("tiny-xlmr-mlm");
}

#[test]
fn distilbert_masked_lm() {
    check("tiny-distilbert-mlm");
}

#[test]
fn distilbert_classifier() {
    check("tiny-distilbert-cls");
}

#[test]
fn albert_masked_lm_with_factorised_embeddings() {
    check("tiny-albert-mlm");
}

#[test]
fn albert_classifier() {
    check("tiny-albert-cls");
}

#[test]
fn electra_generator_masked_lm() {
    check("tiny-electra-mlm");
}

#[test]
fn electra_discriminator() {
    check("tiny-electra-disc");
}

#[test]
fn electra_classifier() {
    check("tiny-electra-cls");
}

/// Decoders read as classifiers (issue 62): `score` at the last token, each family's body
/// (Llama's llama3 rope scaling, Mistral's window, Qwen3's q/k norms, Gemma's norms and scaled
/// embeddings, Gemma 2's soft caps, Gemma 3's two rotary tables, Phi-3's LongRoPE).
#[test]
fn decoder_classifiers_of_every_family() {
    for family in [
        "llama", "qwen2", "mistral", "qwen3", "gemma", "gemma2", "gemma3", "phi3",
    ] {
        check(&format!("tiny-{family}-cls"));
    }
}

/// ModernBERT (issue 62): pre-norm layers, local windows of 2 tokens each side shorter than
/// the texts, two rotary tables, GeGLU; its masked LM, and classifiers on [CLS] and on the mean.
#[test]
fn modernbert_masked_lm_and_classifiers() {
    for model in [
        "tiny-modernbert-mlm",
        "tiny-modernbert-cls",
        "tiny-modernbert-mean",
    ] {
        check(model);
    }
}

/// DeBERTa (issue 62): v3's layout (relative positions only, 8 log buckets that the texts
/// reach, shared projections, the relative table normed, the masked LM under
/// `lm_predictions`) and v2's (absolute positions too, positions clamped at 6, projections of
/// their own, token types in a pair, a factorised embedding, the legacy masked-LM names); the
/// classifier through the context pooler.
#[test]
fn deberta_masked_lms_and_classifier() {
    for model in [
        "tiny-deberta-mlm",
        "tiny-deberta-v2-mlm",
        "tiny-deberta-cls",
    ] {
        check(model);
    }
}

#[test]
fn bert_classifier_with_pairs() {
    check("tiny-bert-cls");
}

/// The masked-LM checkpoint of every family, with its own mask token.
const MASKED: [(&str, &str); 5] = [
    ("tiny-roberta-mlm", "<mask>"),
    ("tiny-xlmr-mlm", "<mask>"),
    ("tiny-distilbert-mlm", "[MASK]"),
    ("tiny-albert-mlm", "[MASK]"),
    ("tiny-electra-mlm", "[MASK]"),
];

/// The classifier of every family.
const CLASSIFIERS: [&str; 5] = [
    "tiny-roberta-cls",
    "tiny-distilbert-cls",
    "tiny-albert-cls",
    "tiny-electra-cls",
    "tiny-bert-cls",
];

/// An encoder's weights split into shards with an index (as large checkpoints come) load as
/// the one file does: a RoBERTa masked LM cut in two gives the transformers reference's
/// report.
#[test]
fn a_sharded_encoder_checkpoint_loads_like_one_file() {
    use candle_core::{safetensors, Device};
    let source = repo().join("models/tiny-roberta-mlm");
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "model.safetensors" {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let tensors = safetensors::load(source.join("model.safetensors"), &Device::Cpu).unwrap();
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut weight_map = serde_json::Map::new();
    for (k, part) in names.chunks(names.len().div_ceil(2)).enumerate() {
        let file = format!("model-{:05}-of-00002.safetensors", k + 1);
        let shard: std::collections::HashMap<String, candle_core::Tensor> = part
            .iter()
            .map(|name| ((*name).clone(), tensors[*name].clone()))
            .collect();
        safetensors::save(&shard, dir.path().join(&file)).unwrap();
        for name in part {
            weight_map.insert((*name).clone(), file.clone().into());
        }
    }
    let index = serde_json::json!({ "metadata": {}, "weight_map": weight_map });
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        index.to_string(),
    )
    .unwrap();
    let case = cases()
        .into_iter()
        .find(|c| c.model == "tiny-roberta-mlm")
        .unwrap();
    let got = run_on(&case, &dir.path().display().to_string());
    assert_matches(&case.name, &got, &fixture(&case.name), TOLERANCE);
}

#[test]
fn bad_text_gets_its_message_in_every_family() {
    for (name, mask) in MASKED {
        let m = model(name);
        let with_mask = format!("the book {mask} here");
        fails(&["--model", &m, "  "], 2, &["empty"]);
        fails(
            &["--model", &m, "the book is here"],
            2,
            &[&format!("has no {mask} token"), "--target"],
        );
        let two = format!("{mask} book {mask}");
        fails(&["--model", &m, &two], 2, &["--target"]);
        fails(&["--model", &m, "--target", "99", &with_mask], 2, &["99"]);
        let long = format!("{} {mask}", "book ".repeat(200));
        fails(&["--model", &m, &long], 2, &["positions"]);
        fails(
            &["--model", &m, "--label", "0", "--evaluate", &with_mask],
            2,
            &["--label"],
        );
        fails(
            &["--model", &m, "--candidates", "zzzqqqxxyy", &with_mask],
            2,
            &["zzzqqqxxyy"],
        );
    }
}

#[test]
fn classifier_options_are_checked_in_every_family() {
    for name in CLASSIFIERS {
        let m = model(name);
        fails(
            &["--model", &m, "--candidates", "a,b", "good film"],
            2,
            &["--candidates"],
        );
        fails(
            &["--model", &m, "--top-k", "3", "good film"],
            2,
            &["--top-k"],
        );
        fails(
            &[
                "--model",
                &m,
                "--evaluate",
                "--label",
                "no-such-label",
                "good film",
            ],
            2,
            &["no-such-label", "give a label's name or id"],
        );
        fails(&["--model", &m, "--target", "99", "good film"], 2, &["99"]);
    }
}

/// A checkpoint of each family with one body tensor missing names it (in the family's own
/// spelling), and a config with an unknown model_type names every supported one.
#[test]
fn broken_checkpoints_are_named_in_every_family() {
    use candle_core::{safetensors, Device};
    let removed = [
        (
            "tiny-roberta-mlm",
            "encoder.layer.1.attention.self.key.weight",
        ),
        (
            "tiny-distilbert-mlm",
            "transformer.layer.1.attention.k_lin.weight",
        ),
        (
            "tiny-albert-mlm",
            "encoder.embedding_hidden_mapping_in.weight",
        ),
        ("tiny-electra-cls", "classifier.out_proj.weight"),
    ];
    for (name, tensor) in removed {
        let dir = copy_of(name);
        let weights = dir.path().join("model.safetensors");
        let mut tensors = safetensors::load(&weights, &Device::Cpu).unwrap();
        let full = tensors
            .keys()
            .find(|k| k.ends_with(tensor))
            .unwrap_or_else(|| panic!("{name}: no {tensor}"))
            .clone();
        tensors.remove(&full);
        safetensors::save(&tensors, &weights).unwrap();
        fails(&["--model", &arg(dir.path()), "a b"], 1, &[tensor]);

        let config = dir.path().join("config.json");
        let text = std::fs::read_to_string(&config).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let family = value["model_type"].as_str().unwrap().to_string();
        std::fs::write(&config, text.replace(&format!("\"{family}\""), "\"t5\"")).unwrap();
        fails(
            &["--model", &arg(dir.path()), "a b"],
            1,
            &[
                "\"t5\"",
                "bert, roberta, xlm-roberta, distilbert, albert, electra, modernbert, deberta-v2, \
                 vit, deit, dinov2, dinov2_with_registers, gpt2",
            ],
        );
    }
}

fn copy_of(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo().join("models").join(name)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

/// Batch lines carry "pair" and "label"; each report equals the single run's, and the
/// importance is that of the label asked for.
#[test]
fn batch_lines_take_pairs_and_labels() {
    let m = model("tiny-bert-cls");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let output = dir.path().join("out.jsonl");
    std::fs::write(
        &input,
        concat!(
            "{\"text\": \"the film was good\", \"pair\": \"i liked it\", \"label\": \"1\"}\n",
            "{\"text\": \"the film was bad\", \"label\": \"0\"}\n",
        ),
    )
    .unwrap();
    let status = bin()
        .args(["--evaluate", "--model", &m, "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let lines: Vec<Report> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let single = |text: &str, pair: Option<&str>, label: &str| {
        let mut cmd = bin();
        cmd.args(["--json", "--evaluate", "--label", label, "--model", &m]);
        if let Some(pair) = pair {
            cmd.args(["--pair", pair]);
        }
        common::report_of::<Report>(cmd.arg(text))
    };
    let want = [
        single("the film was good", Some("i liked it"), "1"),
        single("the film was bad", None, "0"),
    ];
    for (got, want) in lines.iter().zip(&want) {
        assert_eq!(got.tokens, want.tokens);
        assert_matches("batch", got, want, 1e-9);
        let (g, w) = (
            got.importance.as_ref().unwrap(),
            want.importance.as_ref().unwrap(),
        );
        assert_eq!(
            serde_json::to_value(g).unwrap(),
            serde_json::to_value(w).unwrap()
        );
    }
    // The pair's second segment is in the first report's tokens.
    assert!(
        lines[0].tokens.iter().any(|t| t == "liked"),
        "{:?}",
        lines[0].tokens
    );
}

/// The figure and the HTML page name the labels from id2label.
#[test]
fn figures_show_the_labels() {
    let m = model("tiny-bert-cls");
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("models/tiny-bert-cls/config.json")).unwrap(),
    )
    .unwrap();
    let names: Vec<String> = config["id2label"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("f.svg");
    let html = dir.path().join("f.html");
    let output = bin()
        .args(["--model", &m, "--figure"])
        .arg(&svg)
        .arg("--html")
        .arg(&html)
        .arg("the film was good")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let svg = std::fs::read_to_string(svg).unwrap();
    let html = std::fs::read_to_string(html).unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    for name in &names {
        assert!(svg.contains(name.as_str()), "{name} not in the SVG");
        assert!(html.contains(name.as_str()), "{name} not in the HTML");
        assert!(
            stdout.contains(&format!("p({name})")),
            "{name} not in {stdout}"
        );
    }
}
