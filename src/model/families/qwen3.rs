//! Qwen3 (Qwen team 2025): Qwen2's decoder with an RMSNorm over each head's queries and keys
//! before the rotation, an explicit `head_dim`, and no q/k/v biases unless `attention_bias`.

use std::path::Path;

use super::llama::qwen_windows;
use crate::error::Result;
use crate::model::causal::Decoder;
use crate::model::decoder::{RotaryDecoder, Spec};
use crate::model::decoder_config::{Defaults, Read};

pub const DECODER: Decoder = Decoder {
    model_types: &["qwen3"],
    load: |config, weights| Ok(Box::new(RotaryDecoder::load(weights, spec(config)?)?)),
    spec: Some(spec),
};

/// Reads and checks a config.json of model_type "qwen3".
pub fn spec(path: &Path) -> Result<Spec> {
    let read = Read::new(path, None)?;
    let defaults = Defaults {
        head_dim: Some(128),
        eps: 1e-6,
        tied: false,
        act: "silu",
    };
    let mut spec = qwen_windows(&read, "qwen3", defaults)?;
    spec.qk_norm = true;
    read.checked(spec)
}
