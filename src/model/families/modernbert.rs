//! ModernBERT (Warner et al. 2024): an encoder with pre-norm layers (no norm before the first
//! layer's attention), LayerNorms without bias, the embedding norm and a final norm, rotary
//! positions with one theta for global layers and one for local ones, local layers attending
//! to `local_attention / 2` tokens on each side, q/k/v in one projection (`Wqkv`), GeGLU
//! (`Wi` holds the input and the gate), and its own body behind [`Body`]. Heads: the masked
//! LM (`head` then the tied `decoder` with its bias) and the classifier (`head`, then
//! `classifier`, on the first token or on every token's average).

use std::path::Path;

use candle_core::{Module, Tensor};
use candle_nn::Embedding;
use serde_json::Value;

use crate::checkpoint::{WeightPath, Weights};
use crate::error::{Error, Result};
use crate::linalg::Dense;
use crate::model::attention::{load_linear_with, scaled_attention, split_heads, Weighted};
use crate::model::body::{run_layers, Body};
use crate::model::causal::decoder_internals;
use crate::model::config::{read_json, Activation};
use crate::model::family::{
    BodyKind, ClassifierNames, Family, MaskedLmNames, BERT_EMBEDDINGS, BERT_LAYER,
};
use crate::model::norm::LayerNorm;
use crate::model::rotary::{rope_of, Rope, RopeScaling, Rotary};
use crate::model::{activate, rules, Keep, LayerTrace, Reads};

pub const FAMILY: Family = Family {
    name: "modernbert",
    model_types: &["modernbert"],
    base: "model",
    body: BodyKind::Own(|weights, path| Ok(Box::new(ModernBert::load(weights, path)?))),
    // No token types.
    adjust: |config| config.type_vocab_size = 0,
    // Its own body: BERT's embedding and layer names are never read.
    embeddings: BERT_EMBEDDINGS,
    layer: BERT_LAYER,
    masked_lm: &[MaskedLmNames {
        dense: "head.dense",
        norm: "head.norm",
        decoder: "decoder",
        bias: "decoder.bias",
        activation: Some(Activation::Gelu),
    }],
    classifier: ClassifierNames {
        dense: Some("head.dense"),
        activation: Activation::Gelu,
        norm: Some("head.norm"),
        output: "classifier",
        reads: Reads::First,
    },
    discriminator: None,
    image: None,
};

/// The config.json fields the body reads, checked.
struct Settings {
    vocab: usize,
    hidden: usize,
    inner: usize,
    heads: usize,
    layers: usize,
    max_positions: usize,
    eps: f64,
    norm_bias: bool,
    attention_bias: bool,
    mlp_bias: bool,
    gate: Activation,
    /// Per layer: the window (tokens on each side) of a local layer, `None` for a global one.
    windows: Vec<Option<usize>>,
    /// [global, local].
    ropes: [Rope; 2],
}

impl Settings {
    fn read(path: &Path) -> Result<Self> {
        let json = read_json(path)?;
        let bad = |message: String| Error::Config {
            path: path.to_path_buf(),
            message,
        };
        let size = |key: &str| -> Result<usize> {
            json.get(key)
                .and_then(Value::as_u64)
                .filter(|v| *v > 0)
                .map(|v| v as usize)
                .ok_or_else(|| bad(format!("{key} must be a positive whole number")))
        };
        let flag =
            |key: &str, default: bool| json.get(key).and_then(Value::as_bool).unwrap_or(default);
        let (hidden, heads, layers) = (
            size("hidden_size")?,
            size("num_attention_heads")?,
            size("num_hidden_layers")?,
        );
        let head_size = hidden / heads;
        let local = json
            .get("local_attention")
            .and_then(Value::as_u64)
            .unwrap_or(128) as usize;
        let every = json
            .get("global_attn_every_n_layers")
            .and_then(Value::as_u64)
            .unwrap_or(3)
            .max(1) as usize;
        let types: Option<Vec<String>> = json
            .get("layer_types")
            .and_then(|t| serde_json::from_value(t.clone()).ok());
        let windows = (0..layers)
            .map(|i| {
                let local_layer = match &types {
                    Some(types) => types.get(i).is_some_and(|t| t == "sliding_attention"),
                    None => !i.is_multiple_of(every),
                };
                local_layer.then_some(local / 2)
            })
            .collect();
        let gate = match json.get("hidden_activation").and_then(Value::as_str) {
            None | Some("gelu") => Activation::Gelu,
            Some("gelu_pytorch_tanh" | "gelu_new" | "gelu_fast") => Activation::GeluTanh,
            Some("silu") => Activation::Silu,
            Some(other) => {
                return Err(bad(format!(
                "hidden_activation {other:?} is not supported (only gelu, the tanh GELU and silu)"
            )))
            }
        };
        let ropes = ropes(&json).map_err(bad)?;
        for rope in &ropes {
            rope.check(head_size).map_err(bad)?;
        }
        let eps = json.get("norm_eps").and_then(Value::as_f64).unwrap_or(1e-5);
        if !(eps > 0.0 && eps.is_finite()) {
            return Err(bad(format!("norm_eps {eps} is not a positive number")));
        }
        Ok(Self {
            vocab: size("vocab_size")?,
            hidden,
            inner: size("intermediate_size")?,
            heads,
            layers,
            max_positions: size("max_position_embeddings")?,
            eps,
            norm_bias: flag("norm_bias", false),
            attention_bias: flag("attention_bias", false),
            mlp_bias: flag("mlp_bias", false),
            gate,
            windows,
            ropes,
        })
    }
}

/// [global, local]: transformers 5's `rope_parameters.full_attention` and
/// `.sliding_attention`, or the older `global_rope_theta` and `local_rope_theta` (defaults
/// 160,000 and 10,000).
fn ropes(json: &Value) -> std::result::Result<[Rope; 2], String> {
    let theta = |key: &str, default: f64| json.get(key).and_then(Value::as_f64).unwrap_or(default);
    let nested = json.get("rope_parameters");
    let of = |kind: &str| nested.and_then(|p| p.get(kind)).filter(|v| v.is_object());
    let plain = |theta: f64| Rope {
        theta,
        scaling: RopeScaling::None,
        partial: 1.0,
    };
    Ok(match (of("full_attention"), of("sliding_attention")) {
        (None, None) => [
            plain(theta("global_rope_theta", 160_000.0)),
            plain(theta("local_rope_theta", 10_000.0)),
        ],
        (full, sliding) => [
            rope_of(
                json,
                Some(full.unwrap_or(&Value::Null)),
                theta("global_rope_theta", 160_000.0),
            )?,
            rope_of(
                json,
                Some(sliding.unwrap_or(&Value::Null)),
                theta("local_rope_theta", 10_000.0),
            )?,
        ],
    })
}

/// The body: embeddings and their norm, the layers, the final norm.
pub struct ModernBert {
    tok_embeddings: Embedding,
    embedding_norm: LayerNorm,
    layers: Vec<EncoderLayer>,
    final_norm: LayerNorm,
    /// [global, local].
    rotaries: [Rotary; 2],
    max_positions: usize,
    factor: usize,
}

impl ModernBert {
    /// `weights`: the checkpoint's tensors with the task prefix `model.` dropped.
    pub fn load(weights: &Weights, path: &Path) -> Result<Self> {
        let s = Settings::read(path)?;
        let root = weights.pp("");
        let norm = |vb: &WeightPath| LayerNorm::load_with(vb, s.hidden, s.eps, s.norm_bias);
        let table = root
            .pp("embeddings.tok_embeddings")
            .get("weight", &[s.vocab, s.hidden])?;
        let device = table.device().clone();
        let head_size = s.hidden / s.heads;
        let layers = (0..s.layers)
            .map(|i| EncoderLayer::load(&root.pp("layers").pp(&i.to_string()), &s, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embedding_norm: norm(&root.pp("embeddings.norm"))?,
            final_norm: norm(&root.pp("final_norm"))?,
            tok_embeddings: Embedding::new(table, s.hidden),
            layers,
            rotaries: [
                Rotary::new(head_size, &s.ropes[0], &device)?,
                Rotary::new(head_size, &s.ropes[1], &device)?,
            ],
            max_positions: s.max_positions,
            factor: s.inner.div_ceil(s.hidden),
        })
    }

    /// The rotary tables of both kinds of layer for n positions.
    fn tables(&self, n: usize) -> Result<[(Tensor, Tensor); 2]> {
        Ok([
            self.rotaries[0].tables(0, n)?,
            self.rotaries[1].tables(0, n)?,
        ])
    }
}

impl Body for ModernBert {
    fn embed_words(&self, input_ids: &Tensor) -> Result<Tensor> {
        Ok(self.tok_embeddings.forward(input_ids)?)
    }

    fn embed(&self, words: &Tensor, _types: Option<&Tensor>) -> Result<Tensor> {
        self.embedding_norm.forward(words)
    }

    fn forward(
        &self,
        embedded: &Tensor,
        keep: Keep,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, Vec<LayerTrace>)> {
        let tables = self.tables(embedded.dim(1)?)?;
        let (x, traces) = run_layers(&self.layers, embedded, keep, |layer, x| {
            layer.forward(x, &tables, keep, None, lengths)
        })?;
        Ok((self.final_norm.forward(&x)?, traces))
    }

    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor> {
        let tables = self.tables(x.dim(1)?)?;
        Ok(self.layers[layer]
            .forward(x, &tables, Keep::default(), value_mask, None)?
            .0)
    }

    fn max_tokens(&self) -> usize {
        self.max_positions
    }

    fn layers(&self) -> usize {
        self.layers.len()
    }

    fn intermediate_factor(&self) -> usize {
        self.factor
    }

    fn word_table(&self) -> &Tensor {
        self.tok_embeddings.embeddings()
    }

    /// The embedding norm reads the words alone.
    fn scale_free_words(&self) -> bool {
        true
    }

    fn shift_free_words(&self) -> bool {
        true
    }
}

/// `layers.<i>.*`: (LayerNorm,) attention, residual; LayerNorm, GeGLU MLP, residual.
struct EncoderLayer {
    /// `None` for the first layer, whose input is the embedding norm's output.
    attn_norm: Option<LayerNorm>,
    query: Dense,
    key: Dense,
    value: Dense,
    output: Dense,
    mlp_norm: LayerNorm,
    input: Dense,
    gate: Dense,
    mlp_out: Dense,
    activation: Activation,
    heads: usize,
    window: Option<usize>,
}

impl EncoderLayer {
    fn load(vb: &WeightPath, s: &Settings, index: usize) -> Result<Self> {
        let (h, inner) = (s.hidden, s.inner);
        let norm = |name: &str| LayerNorm::load_with(&vb.pp(name), h, s.eps, s.norm_bias);
        let qkv = load_linear_with(&vb.pp("attn.Wqkv"), h, 3 * h, s.attention_bias)?;
        let wi = load_linear_with(&vb.pp("mlp.Wi"), h, 2 * inner, s.mlp_bias)?;
        Ok(Self {
            attn_norm: (index > 0).then(|| norm("attn_norm")).transpose()?,
            query: qkv.rows(0, h)?,
            key: qkv.rows(h, h)?,
            value: qkv.rows(2 * h, h)?,
            output: load_linear_with(&vb.pp("attn.Wo"), h, h, s.attention_bias)?,
            mlp_norm: norm("mlp_norm")?,
            input: wi.rows(0, inner)?,
            gate: wi.rows(inner, inner)?,
            mlp_out: load_linear_with(&vb.pp("mlp.Wo"), inner, h, s.mlp_bias)?,
            activation: s.gate,
            heads: s.heads,
            window: s.windows[index],
        })
    }

    /// `x`: `[b, n, hidden]`; `tables`: the global and local rotary tables; `lengths`: what
    /// [`Body::forward`] says → (`[b, n, hidden]`, the layer's trace).
    fn forward(
        &self,
        x: &Tensor,
        tables: &[(Tensor, Tensor); 2],
        keep: Keep,
        value_mask: Option<&Tensor>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, LayerTrace)> {
        let normed = match &self.attn_norm {
            Some(norm) => norm.forward(x)?,
            None => x.clone(),
        };
        let split = |dense: &Dense| split_heads(&dense.forward(&normed)?, self.heads);
        let (cos, sin) = &tables[usize::from(self.window.is_some())];
        let query = Rotary::apply(&split(&self.query)?, cos, sin)?;
        let key = Rotary::apply(&split(&self.key)?, cos, sin)?;
        let value = match value_mask {
            Some(mask) => split(&self.value)?.broadcast_mul(&mask.unsqueeze(1)?.unsqueeze(3)?)?,
            None => split(&self.value)?,
        };
        let mask = |n: usize| local_mask(n, self.window, x.device());
        let Weighted {
            probs,
            probe,
            context,
        } = scaled_attention((&query, &key, &value), mask, keep, lengths)?;
        let internals = decoder_internals(keep, x, &value, &self.output, None)?;
        let x = (x + self.output.forward(&context)?)?;
        let normed = self.mlp_norm.forward(&x)?;
        // GeGLU: the activated half is the gate of LRP's rules.
        let gate = activate(self.activation, &rules::gate(self.input.forward(&normed)?))?;
        let inner = rules::product((gate * self.gate.forward(&normed)?)?)?;
        let trace = LayerTrace {
            probs,
            probe,
            internals,
            head_sums: None,
        };
        Ok(((x + self.mlp_out.forward(&inner)?)?, trace))
    }
}

/// `[n, n]`: 0 where |i − j| ≤ w, −∞ elsewhere (transformers' bidirectional sliding window);
/// `None` for a global layer, or a window that hides nothing.
fn local_mask(
    n: usize,
    window: Option<usize>,
    device: &candle_core::Device,
) -> Result<Option<Tensor>> {
    let Some(w) = window.filter(|w| *w + 1 < n) else {
        return Ok(None);
    };
    let values: Vec<f32> = (0..n)
        .flat_map(|i| {
            (0..n).map(move |j| {
                if i.abs_diff(j) <= w {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            })
        })
        .collect();
    Ok(Some(Tensor::from_vec(values, (n, n), device)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_window_reaches_w_tokens_each_way() {
        let device = candle_core::Device::Cpu;
        let rows: Vec<Vec<f32>> = local_mask(5, Some(1), &device)
            .unwrap()
            .unwrap()
            .to_vec2()
            .unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(rows[2], [inf, 0.0, 0.0, 0.0, inf]);
        assert_eq!(rows[0], [0.0, 0.0, inf, inf, inf]);
        assert!(local_mask(3, Some(2), &device).unwrap().is_none());
        assert!(local_mask(5, None, &device).unwrap().is_none());
    }
}
