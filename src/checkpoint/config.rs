//! config.json of a BERT checkpoint: the sizes the weights must have.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::{read_text_capped, METADATA_LIMIT};

/// The feed-forward activation named by `hidden_act`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Activation {
    /// The exact GELU, with erf (transformers' "gelu").
    #[serde(rename = "gelu")]
    Gelu,
    /// The tanh approximation of GELU.
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh", rename = "gelu_fast")]
    GeluTanh,
    #[serde(rename = "relu")]
    Relu,
}

/// The parts of a BERT config.json that the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: usize,
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_type_vocab_size() -> usize {
    2
}

fn default_layer_norm_eps() -> f64 {
    1e-12
}

impl BertConfig {
    /// Reads and checks a config.json: a BERT with absolute positions and sizes that fit.
    pub fn load(path: &Path) -> Result<Self> {
        let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        // Check the architecture first: another model's config fails later with a less
        // helpful "missing field".
        let model_type = value.get("model_type").and_then(|v| v.as_str());
        if model_type == Some("gpt2") {
            return Err(Error::CausalModelInBertMode {
                path: path.to_path_buf(),
            });
        }
        if let Some(found) = model_type.filter(|t| *t != "bert") {
            return Err(Error::UnsupportedArchitecture {
                path: path.to_path_buf(),
                found: found.to_string(),
            });
        }
        let config: BertConfig = serde_json::from_value(value).map_err(|e| Error::Config {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        config.check(path)?;
        Ok(config)
    }

    fn check(&self, path: &Path) -> Result<()> {
        let problem = if self.num_attention_heads == 0 || self.hidden_size == 0 {
            Some("hidden_size and num_attention_heads must be positive".to_string())
        } else if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            Some(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ))
        } else if !(self.layer_norm_eps > 0.0 && self.layer_norm_eps.is_finite()) {
            Some(format!(
                "layer_norm_eps {} is not a positive number",
                self.layer_norm_eps
            ))
        } else if self.num_hidden_layers == 0 {
            Some("num_hidden_layers must be positive".to_string())
        } else {
            match self.position_embedding_type.as_deref() {
                None | Some("absolute") => None,
                Some(other) => Some(format!(
                    "position_embedding_type {other:?} is not supported (only \"absolute\")"
                )),
            }
        };
        match problem {
            Some(message) => Err(Error::Config {
                path: path.to_path_buf(),
                message,
            }),
            None => Ok(()),
        }
    }

    /// The width of one attention head.
    pub fn head_size(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let config = BertConfig::load(&write(dir.path(), BERT)).unwrap();
        assert_eq!(config.head_size(), 4);
        assert_eq!(config.type_vocab_size, 2);
        assert_eq!(config.hidden_act, Activation::Gelu);
    }

    #[test]
    fn names_another_architecture() {
        let dir = tempfile::tempdir().unwrap();
        let err = BertConfig::load(&write(dir.path(), r#"{"model_type": "llama"}"#)).unwrap_err();
        assert!(
            matches!(err, Error::UnsupportedArchitecture { ref found, .. } if found == "llama")
        );
        let err = BertConfig::load(&write(dir.path(), r#"{"model_type": "gpt2"}"#)).unwrap_err();
        assert!(matches!(err, Error::CausalModelInBertMode { .. }));
    }

    #[test]
    fn rejects_heads_that_do_not_divide_the_width() {
        let dir = tempfile::tempdir().unwrap();
        let text = BERT.replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3");
        let err = BertConfig::load(&write(dir.path(), &text)).unwrap_err();
        assert!(err.to_string().contains("not a multiple"), "{err}");
    }
}
