//! Causal mode against the transformers reference (scripts/reference/causal_reference.py) on
//! models/tiny-gpt2 and models/austen-gpt2 (trained here, a word-level vocabulary): the same
//! tokens, greedy continuations, and raw attention, rollout, corrected rollout and flow to 1e-5
//! end to end, and to 1e-9 on the reference's own attention tensors.

mod common;

use bert_explain::causal::{
    causal_relevance, CausalExplainer, CausalMethods, CausalOptions, CausalRelevance,
};
use bert_explain::{AttentionStack, ModelSource};
use candle_core::Device;
use common::causal::assert_close;
use common::repo;
use serde::Deserialize;

/// End to end through the model: float32 attention from two implementations.
const END_TO_END: f64 = 1e-5;
/// The same attention tensors: only the order of f64 operations differs.
const SAME_ATTENTION: f64 = 1e-9;

#[derive(Deserialize)]
struct Case {
    name: String,
    model: String,
    prompt: String,
    generate: usize,
}

#[derive(Deserialize)]
struct Fixture {
    prompt_ids: Vec<u32>,
    prompt_tokens: Vec<String>,
    generated_ids: Vec<u32>,
    generated_tokens: Vec<String>,
    layers: usize,
    heads: usize,
    relevance: CausalRelevance,
}

#[derive(Deserialize)]
struct AttentionFile {
    shape: Vec<usize>,
    data: Vec<f64>,
}

fn fixtures_dir() -> std::path::PathBuf {
    repo().join("tests/fixtures/causal")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures_dir().join("cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn read<T: for<'a> Deserialize<'a>>(file: String) -> T {
    let path = fixtures_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn all_methods() -> CausalMethods {
    CausalMethods {
        correction: true,
        flow: true,
        ..Default::default()
    }
}

#[test]
fn greedy_tokens_and_every_method_match_the_reference() {
    for case in cases() {
        let source = ModelSource::Folder(repo().join("models").join(&case.model));
        let explainer = CausalExplainer::load(&source, &Device::Cpu).unwrap();
        let want: Fixture = read(format!("{}.json", case.name));
        let options = CausalOptions {
            generate: case.generate,
            methods: all_methods(),
            ..Default::default()
        };
        let got = explainer.explain(&case.prompt, &options).unwrap();
        assert_eq!(got.prompt_ids, want.prompt_ids, "{}: prompt ids", case.name);
        assert_eq!(got.prompt_tokens, want.prompt_tokens, "{}", case.name);
        assert_eq!(
            got.generated_ids, want.generated_ids,
            "{}: tokens",
            case.name
        );
        assert_eq!(got.generated_tokens, want.generated_tokens, "{}", case.name);
        assert_eq!((got.layers, got.heads), (want.layers, want.heads));
        assert_close(&case.name, &got.relevance, &want.relevance, END_TO_END);
    }
}

#[test]
fn methods_match_the_reference_on_its_own_attention() {
    for case in cases() {
        let want: Fixture = read(format!("{}.json", case.name));
        let attention: AttentionFile = read(format!("{}.attention.json", case.name));
        let [layers, heads, n, _] = attention.shape[..] else {
            panic!("{}: attention shape {:?}", case.name, attention.shape)
        };
        let stack = AttentionStack::from_vec(layers, heads, n, attention.data).unwrap();
        let (m, g) = (want.prompt_ids.len(), want.generated_ids.len());
        assert_eq!(n, m + g - 1, "{}: fed positions", case.name);
        let got = causal_relevance(&stack, m, g, all_methods()).unwrap();
        assert_close(&case.name, &got, &want.relevance, SAME_ATTENTION);
    }
}
