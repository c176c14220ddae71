//! Bad input gets one clear message, exit status 2 for usage and 1 otherwise, never a panic.

mod common;

use std::path::Path;

use common::{bin, fails, repo};

const TEXT: &str = "The author talked to Sara about [MASK] book";

fn tiny() -> String {
    repo().join("models/tiny-bert-modern").display().to_string()
}

/// A scratch copy of the modern tiny checkpoint, to break.
fn copy_of_tiny() -> tempfile::TempDir {
    copy_of("tiny-bert-modern")
}

/// A scratch copy of `models/<model>`.
fn copy_of(model: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo().join("models").join(model)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn empty_text() {
    fails(&["--model", &tiny(), ""], 2, &["text is empty"]);
    fails(&["--model", &tiny(), "   "], 2, &["text is empty"]);
}

#[test]
fn no_mask_and_no_target() {
    fails(
        &["--model", &tiny(), "He talked to her about his book"],
        2,
        &["no [MASK]", "--target"],
    );
}

#[test]
fn several_masks_and_no_target() {
    fails(
        &[
            "--model",
            &tiny(),
            "The [MASK] talked to [MASK] about his book",
        ],
        2,
        &["2 [MASK] tokens", "[2, 5]", "--target"],
    );
}

#[test]
fn target_out_of_range() {
    fails(
        &["--model", &tiny(), "--target", "10", TEXT],
        2,
        &["--target 10 is out of range", "0 to 9"],
    );
}

#[test]
fn candidate_that_is_not_one_wordpiece() {
    fails(
        &["--model", &tiny(), "--candidates", "his,backache", TEXT],
        2,
        &["\"backache\"", "[\"back\", \"##ache\"]"],
    );
    fails(
        &["--model", &tiny(), "--candidates", "his,,her", TEXT],
        2,
        &["empty word"],
    );
}

#[test]
fn text_longer_than_the_positions() {
    let long = format!("{} [MASK]", "the book ".repeat(40));
    fails(
        &["--model", &tiny(), &long],
        2,
        &["83 tokens", "only 64 positions"],
    );
}

#[test]
fn usage_errors_from_the_parser() {
    fails(
        &["--model", &tiny(), "--no-such-flag", TEXT],
        2,
        &["--no-such-flag"],
    );
    fails(
        &["--model", &tiny(), "--residual", "2", TEXT],
        2,
        &["between 0 and 1"],
    );
    fails(
        &["--model", &tiny(), "--top-k", "many", TEXT],
        2,
        &["--top-k"],
    );
}

#[test]
fn folder_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let missing = arg(&dir.path().join("no-such-model"));
    fails(
        &["--model", &missing, TEXT],
        1,
        &["does not exist", "no-such-model"],
    );
}

#[test]
fn folder_without_config() {
    let dir = copy_of_tiny();
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["has no config.json"],
    );
}

#[test]
fn truncated_safetensors() {
    let dir = copy_of_tiny();
    let weights = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["model.safetensors", "truncated"],
    );
}

#[test]
fn config_of_another_architecture() {
    let dir = copy_of_tiny();
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("\"bert\"", "\"falcon\"")).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["\"falcon\"", "config.json"],
    );
}

#[test]
fn missing_and_misshapen_tensors_are_named() {
    use candle_core::{safetensors, Device, Tensor};
    let dir = copy_of_tiny();
    let weights = dir.path().join("model.safetensors");
    let original = safetensors::load(&weights, &Device::Cpu).unwrap();

    let mut missing = original.clone();
    missing.remove("bert.encoder.layer.1.attention.self.key.weight");
    safetensors::save(&missing, &weights).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &[
            "no tensor encoder.layer.1.attention.self.key.weight",
            "model.safetensors",
        ],
    );

    let mut misshapen = original;
    let wrong = Tensor::zeros((3, 5), candle_core::DType::F32, &Device::Cpu).unwrap();
    misshapen.insert("bert.embeddings.LayerNorm.weight".into(), wrong);
    safetensors::save(&misshapen, &weights).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["embeddings.LayerNorm.weight", "[3, 5]", "[32]"],
    );
}

#[test]
fn hub_id_not_in_the_cache_while_offline() {
    let home = tempfile::tempdir().unwrap();
    let output = bin()
        .env("HF_HOME", home.path())
        .env_remove("HF_HUB_CACHE")
        .args(["--model", "someone/not-cached", TEXT])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    for needle in [
        "someone/not-cached",
        "not in the Hugging Face cache",
        "HF_HUB_OFFLINE",
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
}

#[test]
fn unavailable_device() {
    if cfg!(feature = "cuda") {
        return;
    }
    fails(
        &["--model", &tiny(), "--device", "cuda", TEXT],
        1,
        &["--features cuda"],
    );
}

#[test]
fn token_type_embeddings_that_config_json_says_are_not_there() {
    let dir = copy_of_tiny();
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["type_vocab_size"] = 0.into();
    std::fs::write(&config, json.to_string()).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &[
            "token_type_embeddings",
            "[2, 32]",
            "[0, 32]",
            "do not belong together",
        ],
    );
}

#[test]
fn a_masked_lm_head_cut_short_is_refused() {
    use candle_core::{safetensors, Device};
    let dir = copy_of_tiny();
    let weights = dir.path().join("model.safetensors");
    let mut tensors = safetensors::load(&weights, &Device::Cpu).unwrap();
    tensors.remove("cls.predictions.transform.dense.weight");
    safetensors::save(&tensors, &weights).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &[
            "no tensor cls.predictions.transform.dense.weight",
            "incomplete",
        ],
    );
}

#[test]
fn a_malformed_tokenizer_config_beside_vocab_txt() {
    let dir = copy_of("tiny-bert-legacy");
    let config = dir.path().join("tokenizer_config.json");
    for (text, needle) in [
        ("{\"do_lower_case\": tru", "not valid JSON"),
        ("[true]", "not a JSON object"),
        ("{\"do_lower_case\": \"no\"}", "do_lower_case is \"no\""),
    ] {
        std::fs::write(&config, text).unwrap();
        fails(
            &["--model", &arg(dir.path()), TEXT],
            1,
            &["tokenizer_config.json", needle],
        );
    }
}
