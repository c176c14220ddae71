//! Llama (Touvron et al. 2023) and the decoders built like it, Qwen2 and Mistral: pre-RMSNorm
//! blocks, rotary positions, grouped-query attention, SwiGLU ([`crate::model::decoder`]),
//! told apart by config.json alone (Qwen2's q/k/v biases, Mistral's sliding window).

use std::path::Path;

use crate::error::Result;
use crate::model::causal::Decoder;
use crate::model::decoder::{RotaryDecoder, Spec};
use crate::model::decoder_config::{Defaults, Read};

/// The `model_type`s of this family.
pub const MODEL_TYPES: [&str; 3] = ["llama", "qwen2", "mistral"];

pub const DECODER: Decoder = Decoder {
    model_types: &MODEL_TYPES,
    load: |config, weights| Ok(Box::new(RotaryDecoder::load(weights, spec(config)?)?)),
    spec: Some(spec),
};

/// Reads and checks a config.json of model_type "llama", "qwen2" or "mistral".
pub fn spec(path: &Path) -> Result<Spec> {
    let read = Read::new(path, None)?;
    let model_type = read
        .json
        .get("model_type")
        .and_then(|v| v.as_str())
        .and_then(|t| MODEL_TYPES.into_iter().find(|m| *m == t))
        .unwrap_or("llama");
    let defaults = Defaults {
        head_dim: None,
        eps: 1e-6,
        tied: false,
        act: "silu",
    };
    let mut spec = match model_type {
        "qwen2" => qwen_windows(&read, model_type, defaults)?,
        "mistral" => read.spec(model_type, defaults, |_| true)?,
        _ => read.spec(model_type, defaults, |_| false)?,
    };
    if model_type == "qwen2" {
        // Qwen2 always has q/k/v biases, never an output bias.
        spec.biases.qkv = true;
    }
    read.checked(spec)
}

/// The spec of a Qwen (2 or 3) config, whose window is on only with `use_sliding_window`, and
/// then on the layers from `max_window_layers` (default 28) on, as transformers' Qwen2Config
/// and Qwen3Config read it; `layer_types` when a config lists them.
pub fn qwen_windows(read: &Read, model_type: &'static str, defaults: Defaults) -> Result<Spec> {
    let from = read.config.max_window_layers.unwrap_or(28);
    let mut spec = read.spec(model_type, defaults, |layer| layer >= from)?;
    if !read.config.use_sliding_window {
        for layer in &mut spec.layers {
            layer.window = None;
        }
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen2's window as transformers' Qwen2Config reads it: layers from max_window_layers
    /// (default 28) on, given `use_sliding_window`; `layer_types` when a config lists them.
    #[test]
    fn qwen2_windows_follow_its_config() {
        let windows = |extra: &str| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("config.json");
            let text = format!(
                r#"{{"model_type": "qwen2", "vocab_size": 8, "hidden_size": 8,
                "intermediate_size": 8, "num_hidden_layers": 30, "num_attention_heads": 2,
                "max_position_embeddings": 16, "sliding_window": 4{extra}}}"#
            );
            std::fs::write(&path, text).unwrap();
            let spec = spec(&path).unwrap();
            spec.layers.iter().map(|l| l.window).collect::<Vec<_>>()
        };
        let windowed = |w: &[Option<usize>]| w.iter().filter(|w| w.is_some()).count();
        assert_eq!(windowed(&windows("")), 0);
        let default = windows(r#", "use_sliding_window": true"#);
        assert_eq!((default[27], default[28]), (None, Some(4)));
        assert_eq!(windowed(&default), 2);
        let from_one = windows(r#", "use_sliding_window": true, "max_window_layers": 1"#);
        assert_eq!((from_one[0], windowed(&from_one)), (None, 29));
        let listed = r#", "use_sliding_window": false, "layer_types": ["sliding_attention"]"#;
        assert_eq!(windowed(&windows(listed)), 0);
    }
}
