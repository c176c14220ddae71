//! Causal mode on the rotary decoders (issues 15 and 62) against transformers
//! (scripts/reference/causal_llm_reference.py): models/tiny-llama (sharded, GQA, llama3 rope
//! scaling), tiny-qwen2 (bf16, q/k/v biases, tied), tiny-qwen2-window (Qwen2's own sliding
//! window 3 on the layers from max_window_layers 1 on, given as layer_types), tiny-mistral
//! (sliding window 4, linear rope scaling), tiny-qwen3 (q/k norms, head_dim 12 ≠ 32 / 4, its
//! window), tiny-gemma2 (norms after attention and MLP, soft caps 1.5 and 2.5 that change the
//! tokens, windows of 3 on alternate layers), tiny-gemma3 and tiny-gemma3-mm (q/k norms, a
//! local and a global rotary table; the second inside an image-and-text checkpoint) and
//! tiny-phi3 (fused projections, half the head rotated, LongRoPE's short and long factors)
//! generate the same greedy tokens, with raw attention, rollout, corrected rollout and flow
//! to 1e-5; the command line runs them end to end; configs spelled as transformers 4 wrote
//! them read as transformers 5's. On real weights: IgLM, a GPT-2 over antibody sequences (PyPI
//! iglm==0.1.0, fetched at test time, never committed).

mod common;

use bert_explain::causal::{CausalMethods, CausalOptions, CausalRelevance};
use common::causal::{assert_close, each_case};
use common::{bin, fails, real_model, repo};
use serde::Deserialize;

/// End to end through the model: float32 attention from two implementations.
const END_TO_END: f64 = 1e-5;

#[derive(Deserialize)]
struct Fixture {
    prompt_ids: Vec<u32>,
    generated_ids: Vec<u32>,
    generated_tokens: Vec<String>,
    layers: usize,
    heads: usize,
    relevance: CausalRelevance,
}

/// Every case of `tests/fixtures/causal/<dir>/cases.json`, its model in `models`.
fn check_cases(dir: &str, models: &std::path::Path) {
    let options = CausalOptions {
        methods: CausalMethods {
            correction: true,
            flow: true,
            ..Default::default()
        },
        ..Default::default()
    };
    each_case(dir, models, &options, |case, got, want: Fixture| {
        let name = &case.name;
        assert_eq!(got.prompt_ids, want.prompt_ids, "{name}: prompt ids");
        assert_eq!(got.generated_ids, want.generated_ids, "{name}: tokens");
        assert_eq!(got.generated_tokens, want.generated_tokens, "{name}");
        assert_eq!((got.layers, got.heads), (want.layers, want.heads), "{name}");
        assert_close(name, &got.relevance, &want.relevance, END_TO_END);
    });
}

#[test]
fn every_rotary_decoder_matches_transformers() {
    check_cases("llm", &repo().join("models"));
}

/// GPT-2 parity on real weights: IgLM continues a human heavy chain as transformers does
/// (its prompt: chain and species tags, then one token per amino acid).
#[test]
fn iglm_matches_transformers_on_real_weights() {
    let dir = real_model("iglm-gpt2");
    check_cases("real", dir.parent().unwrap());
}

#[test]
fn the_command_line_runs_every_family_with_every_option() {
    let dir = tempfile::tempdir().unwrap();
    let families = [
        ("tiny-llama", "llama"),
        ("tiny-qwen2", "qwen2"),
        ("tiny-mistral", "mistral"),
        ("tiny-qwen3", "qwen3"),
        ("tiny-gemma", "gemma"),
        ("tiny-gemma2", "gemma2"),
        ("tiny-gemma3", "gemma3_text"),
        ("tiny-gemma3-mm", "gemma3_text"),
        ("tiny-phi3", "phi3"),
    ];
    for (model, family) in families {
        let html = dir.path().join(format!("{model}.html"));
        let svg = dir.path().join(format!("{model}.svg"));
        let output = bin()
            .arg("--model")
            .arg(repo().join("models").join(model))
            .args(["--json", "--generate", "5", "--sample", "--seed", "7"])
            .args(["--correction", "--flow", "--skip-common", "--html"])
            .arg(&html)
            .arg("--figure")
            .arg(&svg)
            .arg("The keys to the cabinet")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{model}: {stderr}");
        let report: bert_explain::causal::CausalReport =
            serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report.generated_ids.len(), 5, "{model}");
        assert_eq!(report.family, family);
        assert_eq!(report.task, "causal-lm");
        assert_eq!(report.generation.seed, Some(7));
        assert_eq!(report.relevance.flow.as_ref().unwrap().len(), 5);
        // The interactive page with the report inlined (tests/report_html.rs drives one).
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.contains(r#"id="report-data""#) && page.contains(r#""mode":"causal""#));
        assert!(std::fs::metadata(&svg).unwrap().len() > 0);
    }
}

/// A scratch copy of models/`model` with config.json edited by `edit` and the files named in
/// `leave_out` left out.
fn broken(
    model: &str,
    edit: &dyn Fn(&mut serde_json::Value),
    leave_out: &[&str],
) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    for entry in std::fs::read_dir(repo().join("models").join(model)).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if !leave_out.iter().any(|l| name == *l) {
            std::fs::copy(&path, dir.join(name)).unwrap();
        }
    }
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_string()).unwrap();
    scratch
}

fn arg(dir: &tempfile::TempDir) -> String {
    dir.path().display().to_string()
}

#[test]
fn unsupported_configs_and_broken_shards_are_named() {
    let prompt = "The keys";
    let yarn = broken(
        "tiny-mistral",
        &|c| c["rope_parameters"]["rope_type"] = "yarn".into(),
        &[],
    );
    fails(
        &["--model", &arg(&yarn), prompt],
        1,
        &["\"yarn\"", "config.json"],
    );
    let groups = broken("tiny-llama", &|c| c["num_key_value_heads"] = 3.into(), &[]);
    fails(
        &["--model", &arg(&groups), prompt],
        1,
        &["num_key_value_heads 3"],
    );
    let gelu = broken("tiny-qwen2", &|c| c["hidden_act"] = "gelu".into(), &[]);
    fails(&["--model", &arg(&gelu), prompt], 1, &["hidden_act"]);
    let untied = broken(
        "tiny-qwen2",
        &|c| c["tie_word_embeddings"] = false.into(),
        &[],
    );
    fails(&["--model", &arg(&untied), prompt], 1, &["lm_head.weight"]);
    let shard = broken("tiny-llama", &|_| {}, &["model-00002-of-00003.safetensors"]);
    fails(
        &["--model", &arg(&shard), prompt],
        1,
        &["model-00002-of-00003.safetensors"],
    );
}

/// The report of `model` (a folder) on `prompt`, greedy, with flow, its model path left out.
fn report_of(model: &std::path::Path, prompt: &str) -> serde_json::Value {
    let mut cmd = bin();
    cmd.arg("--model").arg(model);
    cmd.args([
        "--json",
        "--generate",
        "6",
        "--correction",
        "--flow",
        prompt,
    ]);
    let mut report: serde_json::Value = common::report_of(&mut cmd);
    report["model"] = serde_json::Value::Null;
    report
}

/// Checkpoints saved by transformers 4 spell the rotary tables and the windows as flat
/// fields (`rope_theta`, `rope_scaling`, `rope_local_base_freq`, `sliding_window_pattern`,
/// `partial_rotary_factor`, Phi-3's `original_max_position_embeddings` at the top) and list no
/// `layer_types`; each config below is a tiny model's config.json rewritten so, and explains
/// the same text identically (transformers 5 reads each rewritten config to the same logits
/// and attention, checked once by hand).
#[test]
fn configs_in_transformers_4_spelling_read_the_same() {
    let flat = |c: &mut serde_json::Value, rope: serde_json::Value| {
        let object = c.as_object_mut().unwrap();
        object.remove("rope_parameters");
        object.remove("layer_types");
        for (key, value) in rope.as_object().unwrap() {
            object.insert(key.clone(), value.clone());
        }
    };
    let cases: [(&str, serde_json::Value); 5] = [
        (
            "tiny-gemma3",
            serde_json::json!({"rope_theta": 1e6, "rope_local_base_freq": 1e4,
                "rope_scaling": {"rope_type": "linear", "factor": 4.0},
                "sliding_window_pattern": 2}),
        ),
        (
            "tiny-phi3",
            serde_json::json!({"rope_theta": 1e4, "partial_rotary_factor": 0.5,
                "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5],
                    "long_factor": [2.0, 5.0]}}),
        ),
        ("tiny-gemma2", serde_json::json!({"rope_theta": 1e4})),
        // Gemma's first releases say "gelu" and mean the tanh GELU.
        (
            "tiny-gemma",
            serde_json::json!({"rope_theta": 1e4, "hidden_act": "gelu"}),
        ),
        (
            "tiny-qwen3",
            serde_json::json!({"rope_theta": 1e6, "rope_scaling": null}),
        ),
    ];
    for (model, rope) in cases {
        let old = broken(model, &|c| flat(c, rope.clone()), &[]);
        for prompt in ["The keys", "The river runs through the valley and the town"] {
            let want = report_of(&repo().join("models").join(model), prompt);
            assert_eq!(report_of(old.path(), prompt), want, "{model}: {prompt}");
        }
    }
}
