//! The config.json fields that the rotary decoders share (Llama, Qwen, Mistral, Gemma, Phi-3),
//! as transformers 5 writes them and as the flat fields of checkpoints saved by transformers 4,
//! read once and turned into a [`Spec`] that each family file then adjusts.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::causal::eos_ids;
use super::decoder::{Biases, Gate, LayerKind, Spec};
use super::rotary::{rope_of, Rope};
use crate::error::{Error, Result};
use crate::input::{read_text_capped, METADATA_LIMIT};

/// The shared fields; the ones whose default differs by family are options.
#[derive(Debug, Clone, Deserialize)]
pub struct DecoderConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default)]
    pub rms_norm_eps: Option<f64>,
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub tie_word_embeddings: Option<bool>,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default)]
    pub hidden_act: Option<String>,
    /// Gemma's name for the MLP's activation.
    #[serde(default)]
    pub hidden_activation: Option<String>,
    #[serde(default)]
    pub sliding_window: Option<usize>,
    #[serde(default)]
    pub use_sliding_window: bool,
    #[serde(default)]
    pub max_window_layers: Option<usize>,
    /// transformers 5: per layer, "full_attention" or "sliding_attention".
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    #[serde(default, deserialize_with = "eos_ids")]
    pub eos_token_id: Vec<u32>,
    /// Gemma: scores are scaled by 1 / √this instead of 1 / √head_dim.
    #[serde(default)]
    pub query_pre_attn_scalar: Option<f64>,
    #[serde(default)]
    pub attn_logit_softcapping: Option<f64>,
    #[serde(default)]
    pub final_logit_softcapping: Option<f64>,
}

/// What a family assumes where its config.json is silent.
pub struct Defaults {
    /// `None`: hidden_size / num_attention_heads.
    pub head_dim: Option<usize>,
    pub eps: f64,
    pub tied: bool,
    pub act: &'static str,
}

/// A config.json read: its JSON, for the fields a family reads itself, and the shared ones.
#[derive(Clone)]
pub struct Read {
    pub path: std::path::PathBuf,
    pub json: Value,
    pub config: DecoderConfig,
}

impl Read {
    /// Reads `path`; `nested` names a sub-object to read instead (Gemma 3's `text_config`),
    /// where there is one.
    pub fn new(path: &Path, nested: Option<&str>) -> Result<Self> {
        let bad = |message: String| config_error(path, message);
        let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| bad(e.to_string()))?;
        let mut json: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if let Some(inner) = nested
            .and_then(|key| json.get(key))
            .filter(|v| v.is_object())
        {
            json = inner.clone();
        }
        let config = serde_json::from_value(json.clone()).map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            path: path.to_path_buf(),
            json,
            config,
        })
    }

    /// An error about this config.
    pub fn error(&self, message: impl Into<String>) -> Error {
        config_error(&self.path, message.into())
    }

    /// The rotary settings at the config's top level (`rope_parameters`, or `rope_theta`,
    /// `rope_scaling` and `partial_rotary_factor`).
    pub fn rope(&self) -> Result<Rope> {
        rope_of(&self.json, None, 10_000.0).map_err(|m| self.error(m))
    }

    /// A number field of the JSON, if present.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.json.get(key).and_then(Value::as_f64)
    }

    /// The spec every family starts from: Llama's block with the config's sizes, one rotary
    /// table for every layer, and `window` deciding which layers have the sliding window
    /// (where the config lists `layer_types`, they decide instead).
    pub fn spec(
        &self,
        model_type: &'static str,
        defaults: Defaults,
        window: impl Fn(usize) -> bool,
    ) -> Result<Spec> {
        let c = &self.config;
        if c.num_attention_heads == 0 || c.num_hidden_layers == 0 || c.max_position_embeddings == 0
        {
            return Err(self.error(
                "num_attention_heads, num_hidden_layers and max_position_embeddings must be positive",
            ));
        }
        let heads = c.num_attention_heads;
        let kv_heads = c.num_key_value_heads.unwrap_or(heads);
        if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
            return Err(self.error(format!(
                "num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}"
            )));
        }
        let head_size = match c.head_dim.or(defaults.head_dim) {
            Some(d) => d,
            None if c.hidden_size.is_multiple_of(heads) => c.hidden_size / heads,
            None => {
                return Err(self.error(format!(
                    "hidden_size {} is not a multiple of num_attention_heads {heads}",
                    c.hidden_size
                )))
            }
        };
        if head_size == 0 {
            return Err(self.error("head_dim must be positive"));
        }
        let eps = c.rms_norm_eps.unwrap_or(defaults.eps);
        if !(eps > 0.0 && eps.is_finite()) {
            return Err(self.error(format!("rms_norm_eps {eps} is not a positive number")));
        }
        if c.sliding_window == Some(0) {
            return Err(self.error("sliding_window must be positive or null"));
        }
        let act = c
            .hidden_activation
            .as_deref()
            .or(c.hidden_act.as_deref())
            .unwrap_or(defaults.act);
        let gate = match act {
            "silu" | "swish" => Gate::Silu,
            "gelu_pytorch_tanh" | "gelu_new" | "gelu_fast" => Gate::GeluTanh,
            other => {
                return Err(self.error(format!(
                "hidden_act {other:?} is not supported (only \"silu\" and \"gelu_pytorch_tanh\")"
            )))
            }
        };
        for cap in [c.attn_logit_softcapping, c.final_logit_softcapping]
            .into_iter()
            .flatten()
        {
            if !(cap > 0.0 && cap.is_finite()) {
                return Err(self.error(format!("a soft cap of {cap} is not a positive number")));
            }
        }
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let windowed = match &c.layer_types {
                    Some(types) => types.get(i).is_some_and(|t| t == "sliding_attention"),
                    None => window(i),
                };
                LayerKind {
                    window: c.sliding_window.filter(|_| windowed),
                    rope: 0,
                }
            })
            .collect();
        Ok(Spec {
            model_type,
            vocab_size: c.vocab_size,
            hidden_size: c.hidden_size,
            intermediate_size: c.intermediate_size,
            heads,
            kv_heads,
            head_size,
            max_positions: c.max_position_embeddings,
            eps,
            eos: c.eos_token_id.clone(),
            tied: c.tie_word_embeddings.unwrap_or(defaults.tied),
            gate,
            biases: Biases {
                qkv: c.attention_bias,
                output: c.attention_bias,
                mlp: c.mlp_bias,
            },
            fused: false,
            qk_norm: false,
            sandwich: false,
            norm_plus_one: false,
            embed_scale: None,
            query_scale: 1.0 / (head_size as f64).sqrt(),
            attention_softcap: None,
            final_softcap: None,
            ropes: vec![self.rope()?],
            layers,
            layouts: vec![("model", "lm_head.weight")],
        })
    }

    /// Checks what a family built: every rotary table fits the heads.
    pub fn checked(&self, spec: Spec) -> Result<Spec> {
        for rope in &spec.ropes {
            rope.check(spec.head_size).map_err(|m| self.error(m))?;
        }
        Ok(spec)
    }
}

fn config_error(path: &Path, message: String) -> Error {
    Error::CausalConfig {
        path: path.to_path_buf(),
        message,
    }
}
