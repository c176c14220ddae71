//! Phi-3 and Phi-4-mini (Abdin et al. 2024): Llama's block with q, k, v in one projection
//! (`qkv_proj`) and gate and up in another (`gate_up_proj`), rotation of only the first
//! `partial_rotary_factor` of each head, LongRoPE's short and long factors, and a sliding
//! window on every layer where the config sets one.

use std::path::Path;

use crate::error::Result;
use crate::model::causal::Decoder;
use crate::model::decoder::{RotaryDecoder, Spec};
use crate::model::decoder_config::{Defaults, Read};

pub const DECODER: Decoder = Decoder {
    model_types: &["phi3"],
    load: |config, weights| Ok(Box::new(RotaryDecoder::load(weights, spec(config)?)?)),
    spec: Some(spec),
};

/// Reads and checks a config.json of model_type "phi3".
pub fn spec(path: &Path) -> Result<Spec> {
    let mut read = Read::new(path, None)?;
    // transformers' Phi3Config reads the older "su" and "yarn" types as LongRoPE.
    for key in ["rope_scaling", "rope_parameters"] {
        if let Some(params) = read.json.get_mut(key).and_then(|v| v.as_object_mut()) {
            for field in ["rope_type", "type"] {
                if params
                    .get(field)
                    .and_then(|t| t.as_str())
                    .is_some_and(|t| t == "su" || t == "yarn")
                {
                    params.insert(field.into(), "longrope".into());
                }
            }
        }
    }
    let defaults = Defaults {
        head_dim: None,
        eps: 1e-5,
        tied: false,
        act: "silu",
    };
    let mut spec = read.spec("phi3", defaults, |_| true)?;
    spec.fused = true;
    spec.biases = Default::default();
    read.checked(spec)
}
