//! One file per family: an encoder family's tensor names and config defaults, or (GPT-2,
//! Llama) a whole causal model; and the registries that list them (`FAMILIES`, `DECODERS`),
//! which pick a family from a config.json's `model_type`.

pub mod albert;
pub mod bert;
pub mod deberta;
pub mod decoder_classifier;
pub mod deit;
pub mod dinov2;
pub mod dinov2_registers;
pub mod distilbert;
pub mod electra;
pub mod gemma;
pub mod gemma3;
pub mod gpt2;
pub mod llama;
pub mod modernbert;
pub mod phi3;
pub mod qwen3;
pub mod roberta;
pub mod vit;

use std::path::Path;

use super::causal::{CausalLm, Decoder};
use super::config::{model_type, read_json, EncoderConfig};
use super::family::Family;
use crate::checkpoint::{HubRepo, ModelSource, Weights};
use crate::error::{Error, Result};
use decoder_classifier::classifier_family;

/// The supported encoder families.
const FAMILIES: [&Family; 11] = [
    &bert::FAMILY,
    &roberta::FAMILY,
    &distilbert::FAMILY,
    &albert::FAMILY,
    &electra::FAMILY,
    &modernbert::FAMILY,
    &deberta::FAMILY,
    &vit::FAMILY,
    &deit::FAMILY,
    &dinov2::FAMILY,
    &dinov2_registers::FAMILY,
];

/// The supported decoder families.
const DECODERS: [&Decoder; 6] = [
    &gpt2::DECODER,
    &llama::DECODER,
    &qwen3::DECODER,
    &gemma::DECODER,
    &gemma3::DECODER,
    &phi3::DECODER,
];

/// The family whose `model_type` this is.
pub fn family_of(model_type: &str) -> Option<&'static Family> {
    FAMILIES
        .into_iter()
        .find(|f| f.model_types.contains(&model_type))
}

/// Whether `model_type` names a causal family.
pub fn is_causal_model_type(model_type: &str) -> bool {
    decoder_of(model_type).is_some()
}

/// The Spec reader of a rotary decoder's `model_type`, for its classifier's body.
pub fn rotary_spec(model_type: &str) -> Option<fn(&Path) -> Result<crate::model::decoder::Spec>> {
    decoder_of(model_type).and_then(|d| d.spec)
}

/// Whether a config.json (as JSON) names a sequence classifier in `architectures`.
fn is_classifier(config: &serde_json::Value) -> bool {
    config
        .get("architectures")
        .and_then(|a| a.as_array())
        .is_some_and(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .any(|a| a.ends_with("ForSequenceClassification"))
        })
}

/// The decoder family whose `model_type` this is.
fn decoder_of(model_type: &str) -> Option<&'static Decoder> {
    DECODERS
        .into_iter()
        .find(|d| d.model_types.contains(&model_type))
}

/// Whether `source` is a causal LM this crate explains (config.json's `model_type` names a
/// causal family, and its `architectures` no classifier, which is explained as an encoder's).
/// Unreadable or missing configs say no: the encoders' path then reports what is wrong.
pub fn is_causal(source: &ModelSource) -> bool {
    let config = match source {
        ModelSource::Folder(folder) => Some(folder.join("config.json")),
        ModelSource::Hub { id, revision } => {
            HubRepo::from_env(id, revision).file("config.json").ok()
        }
    };
    let Some(value) = config.and_then(|path| read_json(&path).ok()) else {
        return false;
    };
    let causal = value
        .get("model_type")
        .and_then(|t| t.as_str())
        .is_some_and(is_causal_model_type);
    causal && !is_classifier(&value)
}

/// Every causal `model_type`, for messages.
pub fn causal_model_types() -> String {
    let causal = DECODERS.iter().flat_map(|d| d.model_types).copied();
    causal.collect::<Vec<_>>().join(", ")
}

/// Every supported `model_type`, for messages.
pub fn supported_model_types() -> String {
    let encoders = FAMILIES.iter().flat_map(|f| f.model_types).copied();
    let causal = DECODERS.iter().flat_map(|d| d.model_types).copied();
    encoders.chain(causal).collect::<Vec<_>>().join(", ")
}

/// Reads and checks an encoder's config.json: a supported family (the family first: another
/// model's config fails later with a less helpful "missing field"), with sizes that fit.
pub fn load_encoder_config(path: &Path) -> Result<(&'static Family, EncoderConfig)> {
    let mut value = read_json(path)?;
    // Gemma 2 and 3 name their MLP's activation `hidden_activation`.
    if let Some(object) = value.as_object_mut() {
        if let Some(act) = object.get("hidden_activation").cloned() {
            object.entry("hidden_act").or_insert(act);
        }
    }
    let model_type = value.get("model_type").and_then(|v| v.as_str());
    let classifier = model_type
        .filter(|_| is_classifier(&value))
        .and_then(classifier_family);
    if classifier.is_none() && model_type.is_some_and(is_causal_model_type) {
        return Err(Error::CausalModelInBertMode {
            path: path.to_path_buf(),
        });
    }
    let family = classifier
        .or_else(|| family_of(model_type.unwrap_or("bert")))
        .ok_or_else(|| Error::UnsupportedArchitecture {
            path: path.to_path_buf(),
            found: model_type.unwrap_or("").to_string(),
            supported: supported_model_types(),
        })?;
    if family.image.is_some() {
        crate::model::vision::complete_config(&mut value);
    }
    Ok((
        family,
        EncoderConfig::from_json(path, value, family.adjust)?,
    ))
}

/// Reads a causal model's config.json, picks the family by its `model_type` and builds the
/// model.
pub fn load_causal(config: &Path, weights: &Weights) -> Result<Box<dyn CausalLm>> {
    let found = model_type(config).unwrap_or_default();
    if read_json(config).is_ok_and(|v| is_classifier(&v)) {
        return Err(Error::ClassifierAsCausal {
            path: config.to_path_buf(),
        });
    }
    match decoder_of(&found) {
        Some(decoder) => (decoder.load)(config, weights),
        None => Err(Error::NotCausal {
            path: config.to_path_buf(),
            found,
            supported: causal_model_types(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Activation;

    fn write(dir: &Path, text: &str) -> std::path::PathBuf {
        let path = dir.join("config.json");
        std::fs::write(&path, text).unwrap();
        path
    }

    const BERT: &str = r#"{"model_type": "bert", "vocab_size": 10, "hidden_size": 8,
        "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16,
        "hidden_act": "gelu", "max_position_embeddings": 16}"#;

    #[test]
    fn reads_a_bert_config_with_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let (family, config) = load_encoder_config(&write(dir.path(), BERT)).unwrap();
        assert_eq!(family.name, "bert");
        assert_eq!(config.head_size(), 4);
        assert_eq!(config.type_vocab_size, 2);
        assert_eq!(config.hidden_act, Activation::Gelu);
        assert_eq!(config.label_name(1), "LABEL_1");
    }

    #[test]
    fn reads_distilberts_own_names() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"model_type": "distilbert", "vocab_size": 10, "dim": 8, "n_layers": 2,
            "n_heads": 2, "hidden_dim": 16, "activation": "gelu", "max_position_embeddings": 16,
            "id2label": {"0": "NEGATIVE", "1": "POSITIVE"}}"#;
        let (family, config) = load_encoder_config(&write(dir.path(), text)).unwrap();
        assert_eq!(family.name, "distilbert");
        assert_eq!((config.hidden_size, config.intermediate_size), (8, 16));
        assert_eq!(config.type_vocab_size, 0);
        assert_eq!(config.label_name(1), "POSITIVE");
    }

    #[test]
    fn names_another_architecture() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_encoder_config(&write(dir.path(), r#"{"model_type": "t5"}"#)).unwrap_err();
        assert!(matches!(err, Error::UnsupportedArchitecture { ref found, .. } if found == "t5"));
        assert!(err.to_string().contains("roberta"), "{err}");
        let err = load_encoder_config(&write(dir.path(), r#"{"model_type": "gpt2"}"#)).unwrap_err();
        assert!(matches!(err, Error::CausalModelInBertMode { .. }));
    }

    #[test]
    fn tells_causal_model_types() {
        assert!(is_causal_model_type("qwen2") && !is_causal_model_type("bert"));
    }

    #[test]
    fn rejects_heads_that_do_not_divide_the_width() {
        let dir = tempfile::tempdir().unwrap();
        let text = BERT.replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3");
        let err = load_encoder_config(&write(dir.path(), &text)).unwrap_err();
        assert!(err.to_string().contains("not a multiple"), "{err}");
    }
}
