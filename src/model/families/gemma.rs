//! Gemma and Gemma 2 (Gemma Team 2024): RMSNorms that multiply by `1 + weight`, embeddings
//! multiplied by √hidden, a GeGLU MLP with the tanh GELU, wide heads (`head_dim`); Gemma 2
//! adds a norm after attention and one after the MLP, each before its residual, scores scaled
//! by 1 / √`query_pre_attn_scalar` and soft-capped (`attn_logit_softcapping`), soft-capped
//! final logits, and the sliding window on every other layer (the first, third, …).

use std::path::Path;

use crate::error::Result;
use crate::model::causal::Decoder;
use crate::model::decoder::{Gate, RotaryDecoder, Spec};
use crate::model::decoder_config::{Defaults, Read};

pub const DECODER: Decoder = Decoder {
    model_types: &["gemma", "gemma2"],
    load: |config, weights| Ok(Box::new(RotaryDecoder::load(weights, spec(config)?)?)),
    spec: Some(spec),
};

/// Reads and checks a config.json of model_type "gemma2" or "gemma".
pub fn spec(path: &Path) -> Result<Spec> {
    let read = Read::new(path, None)?;
    let second = read.json.get("model_type").and_then(|v| v.as_str()) == Some("gemma2");
    let mut spec = gemma_spec(&read, if second { "gemma2" } else { "gemma" }, |layer| {
        second && layer % 2 == 0
    })?;
    if second {
        spec.sandwich = true;
        spec.attention_softcap = read.config.attn_logit_softcapping;
        spec.final_softcap = read.config.final_logit_softcapping;
    }
    sandwich_without_bias(&read, &spec)?;
    read.checked(spec)
}

/// What every Gemma shares: the spec with Gemma's defaults, norms, embedding scale and query
/// scale; `window` as for [`Read::spec`].
pub fn gemma_spec(
    read: &Read,
    model_type: &'static str,
    window: impl Fn(usize) -> bool,
) -> Result<Spec> {
    let defaults = Defaults {
        head_dim: Some(256),
        eps: 1e-6,
        tied: true,
        act: "gelu_pytorch_tanh",
    };
    let mut read_as_gemma = read.clone();
    // Gemma's first releases say "gelu" and mean the tanh approximation (as transformers
    // reads them).
    if read.config.hidden_activation.is_none() && read.config.hidden_act.as_deref() == Some("gelu")
    {
        read_as_gemma.config.hidden_act = Some("gelu_pytorch_tanh".into());
    }
    let mut spec = read_as_gemma.spec(model_type, defaults, window)?;
    if spec.gate != Gate::GeluTanh {
        return Err(read.error("Gemma's MLP takes the tanh GELU (\"gelu_pytorch_tanh\") only"));
    }
    spec.norm_plus_one = true;
    spec.embed_scale = Some((spec.hidden_size as f64).sqrt());
    if model_type != "gemma" {
        let scalar = read.config.query_pre_attn_scalar.unwrap_or(256.0);
        if !(scalar > 0.0 && scalar.is_finite()) {
            return Err(read.error(format!(
                "query_pre_attn_scalar {scalar} is not a positive number"
            )));
        }
        spec.query_scale = 1.0 / scalar.sqrt();
    }
    Ok(spec)
}

/// SPEC §8's methods take a norm after attention into each part (causal.rs); an output bias
/// there would belong to no part, so such a checkpoint is refused rather than misread.
pub fn sandwich_without_bias(read: &Read, spec: &Spec) -> Result<()> {
    match spec.sandwich && spec.biases.output {
        true => Err(read.error(
            "attention_bias with a norm after attention is not supported (no Gemma release has it)",
        )),
        false => Ok(()),
    }
}
