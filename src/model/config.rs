//! config.json of an encoder checkpoint (BERT, RoBERTa, XLM-R, DistilBERT, ALBERT, ELECTRA):
//! the sizes the weights must have, under one set of names (each family's spellings are
//! aliases), and what the task head is.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::input::{read_text_capped, METADATA_LIMIT};

/// The feed-forward activation named by `hidden_act` (DistilBERT: `activation`).
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
    #[serde(rename = "tanh")]
    Tanh,
    /// SiLU (a decoder's MLP gate, read when its config is read as an encoder's).
    #[serde(rename = "silu", alias = "swish")]
    Silu,
}

/// The parts of an encoder's config.json that the forward pass and the heads need.
#[derive(Debug, Clone, Deserialize)]
pub struct EncoderConfig {
    pub vocab_size: usize,
    #[serde(alias = "dim")]
    pub hidden_size: usize,
    #[serde(alias = "n_layers")]
    pub num_hidden_layers: usize,
    #[serde(alias = "n_heads")]
    pub num_attention_heads: usize,
    #[serde(alias = "hidden_dim")]
    pub intermediate_size: usize,
    #[serde(alias = "activation")]
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    /// Word embedding width when it differs from the hidden size (ALBERT, ELECTRA).
    #[serde(default)]
    pub embedding_size: Option<usize>,
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: usize,
    #[serde(default = "default_layer_norm_eps", alias = "norm_eps")]
    pub layer_norm_eps: f64,
    /// ModernBERT: whether its LayerNorms have a bias (`None`: they do).
    #[serde(default)]
    pub norm_bias: Option<bool>,
    /// ModernBERT: whether its heads' dense layer has a bias (`None`: it does).
    #[serde(default)]
    pub classifier_bias: Option<bool>,
    /// ModernBERT: what a classifier reads, "cls" (the first token) or "mean" (every token's
    /// average).
    #[serde(default)]
    pub classifier_pooling: Option<String>,
    #[serde(default)]
    pub pad_token_id: Option<usize>,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// ALBERT: layers share this many groups of parameters.
    #[serde(default = "one")]
    pub num_hidden_groups: usize,
    #[serde(default = "one")]
    pub inner_group_num: usize,
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub architectures: Vec<String>,
    /// Label names of a classifier, by id.
    #[serde(default)]
    pub id2label: BTreeMap<String, String>,
    #[serde(default)]
    pub num_labels: Option<usize>,
    /// DINOv2 with registers: the register tokens between the class token and the patches.
    #[serde(default)]
    pub num_register_tokens: usize,
}

fn default_type_vocab_size() -> usize {
    2
}

fn default_layer_norm_eps() -> f64 {
    1e-12
}

fn one() -> usize {
    1
}

/// The `model_type` of a config.json, if it can be read and names one.
pub fn model_type(path: &Path) -> Option<String> {
    let text = read_text_capped(path, METADATA_LIMIT).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(value.get("model_type")?.as_str()?.to_string())
}

/// A config.json as JSON, read with the size cap every metadata file has.
pub fn read_json(path: &Path) -> Result<serde_json::Value> {
    let bad = |message: String| Error::Config {
        path: path.to_path_buf(),
        message,
    };
    let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| bad(e.to_string()))
}

impl EncoderConfig {
    /// The config.json at `path`, read as `value` ([`read_json`]), with its family's
    /// defaults applied by `adjust`, and checked: sizes that fit.
    pub fn from_json(
        path: &Path,
        value: serde_json::Value,
        adjust: fn(&mut EncoderConfig),
    ) -> Result<Self> {
        let bad = |message: String| Error::Config {
            path: path.to_path_buf(),
            message,
        };
        let mut config: Self = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        adjust(&mut config);
        config.check().map_err(bad)?;
        Ok(config)
    }

    fn check(&self) -> std::result::Result<(), String> {
        if self.num_attention_heads == 0 || self.hidden_size == 0 {
            return Err("hidden_size and num_attention_heads must be positive".into());
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if !(self.layer_norm_eps > 0.0 && self.layer_norm_eps.is_finite()) {
            return Err(format!(
                "layer_norm_eps {} is not a positive number",
                self.layer_norm_eps
            ));
        }
        if self.num_hidden_layers == 0 {
            return Err("num_hidden_layers must be positive".into());
        }
        if self.num_hidden_groups != 1 || self.inner_group_num != 1 {
            return Err(format!(
                "ALBERT with {} layer groups of {} layers is not supported (only 1 group of 1 shared layer)",
                self.num_hidden_groups, self.inner_group_num
            ));
        }
        match self.position_embedding_type.as_deref() {
            None | Some("absolute") => Ok(()),
            Some(other) => Err(format!(
                "position_embedding_type {other:?} is not supported (only \"absolute\")"
            )),
        }
    }

    /// The width of one attention head.
    pub fn head_size(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// The width of the word embeddings.
    pub fn embedding_width(&self) -> usize {
        self.embedding_size.unwrap_or(self.hidden_size)
    }

    /// The name of label `id`: from `id2label`, else `LABEL_<id>` as transformers says.
    pub fn label_name(&self, id: usize) -> String {
        self.id2label
            .get(&id.to_string())
            .cloned()
            .unwrap_or_else(|| format!("LABEL_{id}"))
    }

    /// Whether `architectures` names a class ending in `suffix`.
    pub fn architecture_ends_with(&self, suffix: &str) -> bool {
        self.architectures.iter().any(|a| a.ends_with(suffix))
    }
}
