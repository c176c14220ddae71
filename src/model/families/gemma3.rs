//! Gemma 3's text model (Gemma Team 2025): Gemma 2's block (norms after attention and the
//! MLP, `(1 + w)` weights, √hidden embeddings, GeGLU) with an RMSNorm over each head's queries
//! and keys, and two rotary tables: one for the global layers (`rope_theta`, with its
//! scaling) and one for the local, windowed ones (`rope_local_base_freq`); five local layers
//! to a global one unless `layer_types` or `sliding_window_pattern` say otherwise. A `gemma3`
//! (image and text) checkpoint is read for its text model: `text_config`, and the weights
//! under `model.language_model` (transformers 5) or `language_model.model` (transformers 4).

use std::path::Path;

use serde_json::Value;

use super::gemma::{gemma_spec, sandwich_without_bias};
use crate::error::Result;
use crate::model::causal::Decoder;
use crate::model::decoder::{RotaryDecoder, Spec};
use crate::model::decoder_config::Read;
use crate::model::rotary::{rope_of, Rope, RopeScaling};

pub const DECODER: Decoder = Decoder {
    model_types: &["gemma3_text", "gemma3"],
    load: |config, weights| Ok(Box::new(RotaryDecoder::load(weights, spec(config)?)?)),
    spec: Some(spec),
};

/// Reads and checks a config.json of model_type "gemma3_text", or the text model of a
/// "gemma3" one.
pub fn spec(path: &Path) -> Result<Spec> {
    let read = Read::new(path, Some("text_config"))?;
    if read.json.get("use_bidirectional_attention") == Some(&Value::Bool(true)) {
        return Err(read.error(
            "use_bidirectional_attention makes this an encoder (EmbeddingGemma), not a causal LM",
        ));
    }
    let pattern = read
        .number("sliding_window_pattern")
        .map_or(6, |p| p as usize)
        .max(1);
    let mut spec = gemma_spec(&read, "gemma3_text", |layer| {
        !(layer + 1).is_multiple_of(pattern)
    })?;
    spec.qk_norm = true;
    spec.sandwich = true;
    spec.attention_softcap = read.config.attn_logit_softcapping;
    spec.final_softcap = read.config.final_logit_softcapping;
    spec.ropes = ropes(&read)?;
    for layer in &mut spec.layers {
        layer.rope = usize::from(layer.window.is_some());
    }
    // Where transformers 5 and 4 put the text model of an image-and-text checkpoint.
    spec.layouts = vec![
        ("model.language_model", "lm_head.weight"),
        ("language_model.model", "language_model.lm_head.weight"),
        ("model", "lm_head.weight"),
    ];
    sandwich_without_bias(&read, &spec)?;
    read.checked(spec)
}

/// [global, local]: transformers 5's `rope_parameters.full_attention` and
/// `.sliding_attention`, or transformers 4's `rope_theta` and `rope_scaling` (global) and
/// `rope_local_base_freq` (local, never scaled).
fn ropes(read: &Read) -> Result<Vec<Rope>> {
    let local_theta = read.number("rope_local_base_freq").unwrap_or(10_000.0);
    let nested = read.json.get("rope_parameters");
    let of = |kind: &str| nested.and_then(|p| p.get(kind)).filter(|v| v.is_object());
    let (global, local) = match (of("full_attention"), of("sliding_attention")) {
        (None, None) => (
            rope_of(&read.json, None, 1_000_000.0),
            Ok(Rope {
                theta: local_theta,
                scaling: RopeScaling::None,
                partial: 1.0,
            }),
        ),
        (full, sliding) => (
            rope_of(&read.json, Some(full.unwrap_or(&Value::Null)), 1_000_000.0),
            rope_of(
                &read.json,
                Some(sliding.unwrap_or(&Value::Null)),
                local_theta,
            ),
        ),
    };
    let global = global.map_err(|m| read.error(m))?;
    let local = local.map_err(|m| read.error(m))?;
    Ok(vec![global, local])
}
