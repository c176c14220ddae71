//! config.json of a GPT-2 checkpoint: the sizes the weights must have.

use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::{read_text_capped, METADATA_LIMIT};
use crate::model::Activation;

/// The parts of a GPT-2 config.json that the forward pass and generation need.
#[derive(Debug, Clone, Deserialize)]
pub struct Gpt2Config {
    pub vocab_size: usize,
    /// The context: prompt plus generated tokens must fit.
    pub n_positions: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    /// The feed-forward width; `null` means 4 · n_embd.
    #[serde(default)]
    pub n_inner: Option<usize>,
    #[serde(default = "default_activation")]
    pub activation_function: Activation,
    #[serde(default = "default_layer_norm_epsilon")]
    pub layer_norm_epsilon: f64,
    #[serde(default = "default_true")]
    pub scale_attn_weights: bool,
    #[serde(default)]
    pub scale_attn_by_inverse_layer_idx: bool,
    #[serde(default)]
    pub eos_token_id: Option<u32>,
}

fn default_activation() -> Activation {
    Activation::GeluTanh
}

fn default_layer_norm_epsilon() -> f64 {
    1e-5
}

fn default_true() -> bool {
    true
}

/// The `model_type` of a config.json, if it can be read and names one.
pub fn model_type(path: &Path) -> Option<String> {
    let text = read_text_capped(path, METADATA_LIMIT).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(value.get("model_type")?.as_str()?.to_string())
}

impl Gpt2Config {
    /// Reads and checks a config.json: model_type "gpt2" and sizes that fit.
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |message: String| Error::CausalConfig {
            path: path.to_path_buf(),
            message,
        };
        let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| bad(e.to_string()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let found = value
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        if found != "gpt2" {
            return Err(Error::NotCausal {
                path: path.to_path_buf(),
                found: found.to_string(),
            });
        }
        let config: Self = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        if config.n_head == 0 || config.n_layer == 0 || config.n_positions == 0 {
            return Err(bad(
                "n_head, n_layer and n_positions must be positive".into()
            ));
        }
        if !config.n_embd.is_multiple_of(config.n_head) {
            return Err(bad(format!(
                "n_embd {} is not a multiple of n_head {}",
                config.n_embd, config.n_head
            )));
        }
        if !(config.layer_norm_epsilon > 0.0 && config.layer_norm_epsilon.is_finite()) {
            return Err(bad(format!(
                "layer_norm_epsilon {} is not a positive number",
                config.layer_norm_epsilon
            )));
        }
        if config.scale_attn_by_inverse_layer_idx {
            return Err(bad(
                "scale_attn_by_inverse_layer_idx is not supported".into()
            ));
        }
        Ok(config)
    }

    /// The width of one attention head.
    pub fn head_size(&self) -> usize {
        self.n_embd / self.n_head
    }

    /// The feed-forward width.
    pub fn inner_size(&self) -> usize {
        self.n_inner.unwrap_or(4 * self.n_embd)
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

    #[test]
    fn reads_gpt2_defaults_and_rejects_bert() {
        let dir = tempfile::tempdir().unwrap();
        let gpt2 = r#"{"model_type": "gpt2", "vocab_size": 10, "n_positions": 8,
            "n_embd": 8, "n_layer": 2, "n_head": 2, "n_inner": null}"#;
        let config = Gpt2Config::load(&write(dir.path(), gpt2)).unwrap();
        assert_eq!((config.head_size(), config.inner_size()), (4, 32));
        assert_eq!(config.activation_function, Activation::GeluTanh);
        assert_eq!(model_type(&dir.path().join("config.json")).unwrap(), "gpt2");
        let err = Gpt2Config::load(&write(dir.path(), r#"{"model_type": "bert"}"#)).unwrap_err();
        assert!(matches!(err, Error::NotCausal { ref found, .. } if found == "bert"));
    }
}
