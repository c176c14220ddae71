//! Llama (Touvron et al. 2023) and the decoders built like it, Qwen2 and Mistral: pre-RMSNorm
//! blocks, rotary positions, grouped-query attention (kept per query head), SwiGLU, told apart
//! by config.json alone (Qwen2's q/k/v biases, Mistral's sliding window). Tensor names are
//! transformers' `model.layers.<i>.self_attn.q_proj` etc.

use std::path::Path;

use candle_core::{IndexOp, Module, Tensor};
use candle_nn::Embedding;

use crate::linalg::{matmul, Dense};
use serde::Deserialize;

use crate::checkpoint::{WeightPath, Weights};
use crate::error::{Error, Result};
use crate::input::{read_text_capped, METADATA_LIMIT};
use crate::model::causal::{
    cached_attention, decoder_internals, eos_ids, Attended, CausalDims, CausalLm, Decoder, KvCache,
    Step, StepOutput,
};
use crate::model::norm::RmsNorm;
use crate::model::rotary::{rope_from_config, RopeScaling, Rotary};
use crate::model::{Keep, LayerTrace};

/// The `model_type`s of this family.
pub const MODEL_TYPES: [&str; 3] = ["llama", "qwen2", "mistral"];

pub const DECODER: Decoder = Decoder {
    model_types: &MODEL_TYPES,
    load: |config, weights| Ok(Box::new(Llama::load(weights, &LlamaConfig::load(config)?)?)),
};

/// The parts of a Llama, Qwen2 or Mistral config.json that the forward pass needs.
#[derive(Debug, Clone, Deserialize)]
pub struct LlamaConfig {
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    /// Grouped-query attention: each key/value head serves heads / kv_heads query heads.
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// `None`: hidden_size / num_attention_heads.
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default = "default_rms_norm_eps")]
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Llama: biases on q/k/v/o (Qwen2 always has q/k/v biases, never o).
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default)]
    pub sliding_window: Option<usize>,
    /// Qwen2: the window applies only with this, to layers from max_window_layers on.
    #[serde(default)]
    pub use_sliding_window: bool,
    #[serde(default)]
    pub max_window_layers: Option<usize>,
    /// transformers 5: per layer, "full_attention" or "sliding_attention".
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    #[serde(default, deserialize_with = "eos_ids")]
    pub eos_token_id: Vec<u32>,
    #[serde(skip, default = "default_rope")]
    pub rope: (f64, RopeScaling),
}

fn default_rms_norm_eps() -> f64 {
    1e-6
}

fn default_act() -> String {
    "silu".into()
}

fn default_rope() -> (f64, RopeScaling) {
    (10_000.0, RopeScaling::None)
}

impl LlamaConfig {
    /// Reads and checks a config.json of model_type "llama", "qwen2" or "mistral".
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |message: String| Error::CausalConfig {
            path: path.to_path_buf(),
            message,
        };
        let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| bad(e.to_string()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let mut config: Self =
            serde_json::from_value(value.clone()).map_err(|e| bad(e.to_string()))?;
        config.rope = rope_from_config(&value).map_err(bad)?;
        let (heads, kv) = (config.num_attention_heads, config.kv_heads());
        if heads == 0 || config.num_hidden_layers == 0 || config.max_position_embeddings == 0 {
            return Err(bad(
                "num_attention_heads, num_hidden_layers and max_position_embeddings must be positive"
                    .into(),
            ));
        }
        if kv == 0 || !heads.is_multiple_of(kv) {
            return Err(bad(format!(
                "num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"
            )));
        }
        if config.head_dim.is_none() && !config.hidden_size.is_multiple_of(heads) {
            return Err(bad(format!(
                "hidden_size {} is not a multiple of num_attention_heads {heads}",
                config.hidden_size
            )));
        }
        if !config.head_size().is_multiple_of(2) {
            return Err(bad(format!(
                "head_dim {} is odd; rotary positions need an even width",
                config.head_size()
            )));
        }
        if config.hidden_act != "silu" {
            return Err(bad(format!(
                "hidden_act {:?} is not supported (only \"silu\")",
                config.hidden_act
            )));
        }
        if !(config.rms_norm_eps > 0.0 && config.rms_norm_eps.is_finite()) {
            return Err(bad(format!(
                "rms_norm_eps {} is not a positive number",
                config.rms_norm_eps
            )));
        }
        if config.sliding_window == Some(0) {
            return Err(bad("sliding_window must be positive or null".into()));
        }
        Ok(config)
    }

    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// The width of one attention head.
    pub fn head_size(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// How far back layer `layer` may look (itself included), `None` for everywhere. As
    /// transformers' Qwen2Config: without `use_sliding_window` no layer has a window, and
    /// `max_window_layers` defaults to 28.
    pub fn window(&self, layer: usize) -> Option<usize> {
        let window = self.sliding_window?;
        if self.model_type == "qwen2" && !self.use_sliding_window {
            return None;
        }
        let windowed = match (&self.layer_types, self.model_type.as_str()) {
            (Some(types), _) => types.get(layer).is_some_and(|t| t == "sliding_attention"),
            (None, "qwen2") => layer >= self.max_window_layers.unwrap_or(28),
            (None, "mistral") => true,
            _ => false,
        };
        windowed.then_some(window)
    }
}

/// A decoder with its language-model head (`lm_head.weight`, or the token embeddings when
/// `tie_word_embeddings`).
pub struct Llama {
    embed_tokens: Embedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    /// `[vocab, hidden]`.
    lm_head: Tensor,
    rotary: Rotary,
    model_type: &'static str,
    config: LlamaConfig,
}

impl Llama {
    pub fn load(weights: &Weights, config: &LlamaConfig) -> Result<Self> {
        let model = weights.pp("model");
        let (h, vocab) = (config.hidden_size, config.vocab_size);
        let embed = model.pp("embed_tokens").get("weight", &[vocab, h])?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| DecoderLayer::load(&model.pp("layers").pp(&i.to_string()), config, i))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = match config.tie_word_embeddings {
            true => embed.clone(),
            false => weights.get("lm_head.weight", &[vocab, h])?,
        };
        let (theta, scaling) = &config.rope;
        let rotary = Rotary::new(config.head_size(), *theta, scaling, embed.device())?;
        Ok(Self {
            embed_tokens: Embedding::new(embed, h),
            layers,
            norm: RmsNorm::load(&model.pp("norm"), h, config.rms_norm_eps)?,
            lm_head,
            rotary,
            model_type: MODEL_TYPES
                .into_iter()
                .find(|t| *t == config.model_type)
                .unwrap_or("llama"),
            config: config.clone(),
        })
    }
}

impl CausalLm for Llama {
    fn model_type(&self) -> &'static str {
        self.model_type
    }

    fn dims(&self) -> CausalDims {
        CausalDims {
            vocab_size: self.config.vocab_size,
            max_positions: self.config.max_position_embeddings,
            layers: self.config.num_hidden_layers,
            heads: self.config.num_attention_heads,
            intermediate: self.config.intermediate_size,
        }
    }

    fn eos(&self) -> &[u32] {
        &self.config.eos_token_id
    }

    fn step(&self, ids: &Tensor, cache: &mut KvCache, keep: Keep) -> Result<StepOutput> {
        let (_, q) = ids.dims2()?;
        let seen = cache.len();
        cache.layers.resize(self.layers.len(), None);
        let rope = self.rotary.tables(seen, q)?;
        let mut x = self.embed_tokens.forward(ids)?;
        let mut layers = Vec::with_capacity(self.layers.len());
        for (layer, kv) in self.layers.iter().zip(cache.layers.iter_mut()) {
            let (next, trace) = layer.forward(&x, kv, (seen, &rope), keep, None)?;
            x = next;
            layers.push(trace);
        }
        let last = self.norm.forward(&x.i((0, q - 1..q))?)?;
        let logits = matmul(&last, &self.lm_head.t()?)?.squeeze(0)?;
        Ok(StepOutput { logits, layers })
    }

    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor> {
        let rope = self.rotary.tables(0, x.dim(1)?)?;
        let layer = &self.layers[layer];
        Ok(layer
            .forward(x, &mut None, (0, &rope), Keep::default(), value_mask)?
            .0)
    }
}

/// `model.layers.<i>.*`: RMSNorm, attention, residual; RMSNorm, SwiGLU MLP, residual.
struct DecoderLayer {
    input_layernorm: RmsNorm,
    attn: Attention,
    post_attention_layernorm: RmsNorm,
    gate_proj: Dense,
    up_proj: Dense,
    down_proj: Dense,
}

impl DecoderLayer {
    fn load(vb: &WeightPath, config: &LlamaConfig, index: usize) -> Result<Self> {
        let (h, inner, eps) = (
            config.hidden_size,
            config.intermediate_size,
            config.rms_norm_eps,
        );
        let mlp = vb.pp("mlp");
        let bias = config.mlp_bias;
        Ok(Self {
            input_layernorm: RmsNorm::load(&vb.pp("input_layernorm"), h, eps)?,
            attn: Attention::load(&vb.pp("self_attn"), config, index)?,
            post_attention_layernorm: RmsNorm::load(&vb.pp("post_attention_layernorm"), h, eps)?,
            gate_proj: linear(&mlp.pp("gate_proj"), h, inner, bias)?,
            up_proj: linear(&mlp.pp("up_proj"), h, inner, bias)?,
            down_proj: linear(&mlp.pp("down_proj"), inner, h, bias)?,
        })
    }

    /// `x`: `[b, q, hidden]` at positions `seen..seen + q`, whose rotary tables are `rope`
    /// → (`[b, q, hidden]`, the layer's trace).
    fn forward(
        &self,
        x: &Tensor,
        kv: &mut Option<(Tensor, Tensor)>,
        (seen, rope): (usize, &(Tensor, Tensor)),
        keep: Keep,
        value_mask: Option<&Tensor>,
    ) -> Result<(Tensor, LayerTrace)> {
        let normed = self.input_layernorm.forward(x)?;
        let step = Step {
            seen,
            window: self.attn.window,
            scale: 1.0 / (self.attn.head_size as f64).sqrt(),
            keep,
            value_mask,
        };
        let (attended, step) = self.attn.forward(&normed, kv, step, rope)?;
        let internals = decoder_internals(keep, x, &step.value, &self.attn.o_proj)?;
        let x = (x + attended)?;
        let normed = self.post_attention_layernorm.forward(&x)?;
        // SwiGLU (Shazeer 2020): down(silu(gate(x)) · up(x)).
        let inner = (self.gate_proj.forward(&normed)?.silu()? * self.up_proj.forward(&normed)?)?;
        let trace = LayerTrace {
            probs: step.probs,
            probe: step.probe,
            internals,
        };
        Ok(((x + self.down_proj.forward(&inner)?)?, trace))
    }
}

/// `self_attn.*`: q/k/v/o projections; keys and values have `kv_heads` heads.
struct Attention {
    q_proj: Dense,
    k_proj: Dense,
    v_proj: Dense,
    o_proj: Dense,
    heads: usize,
    kv_heads: usize,
    head_size: usize,
    window: Option<usize>,
}

impl Attention {
    fn load(vb: &WeightPath, config: &LlamaConfig, index: usize) -> Result<Self> {
        let (h, d) = (config.hidden_size, config.head_size());
        let (heads, kv_heads) = (config.num_attention_heads, config.kv_heads());
        let qkv_bias = config.attention_bias || config.model_type == "qwen2";
        Ok(Self {
            q_proj: linear(&vb.pp("q_proj"), h, heads * d, qkv_bias)?,
            k_proj: linear(&vb.pp("k_proj"), h, kv_heads * d, qkv_bias)?,
            v_proj: linear(&vb.pp("v_proj"), h, kv_heads * d, qkv_bias)?,
            o_proj: linear(&vb.pp("o_proj"), heads * d, h, config.attention_bias)?,
            heads,
            kv_heads,
            head_size: d,
            window: config.window(index),
        })
    }

    /// `x`: `[b, q, hidden]` (normed) at the step's positions → (the projected output, what
    /// the attention step yields, its values expanded to the query heads).
    fn forward(
        &self,
        x: &Tensor,
        kv: &mut Option<(Tensor, Tensor)>,
        step: Step,
        (cos, sin): &(Tensor, Tensor),
    ) -> Result<(Tensor, Attended)> {
        let (batch, q, _) = x.dims3()?;
        let split = |t: Tensor, heads: usize| -> Result<Tensor> {
            Ok(t.reshape((batch, q, heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let query = Rotary::apply(&split(self.q_proj.forward(x)?, self.heads)?, cos, sin)?;
        let key = Rotary::apply(&split(self.k_proj.forward(x)?, self.kv_heads)?, cos, sin)?;
        let value = split(self.v_proj.forward(x)?, self.kv_heads)?;
        let attended = cached_attention(&query, (key, value), kv, step, |t| self.expand(t))?;
        Ok((self.o_proj.forward(&attended.context)?, attended))
    }

    /// `[b, kv_heads, n, d]` → `[b, heads, n, d]`: query head h reads key/value head
    /// h / (heads / kv_heads), as transformers' `repeat_kv`.
    fn expand(&self, x: &Tensor) -> Result<Tensor> {
        let group = self.heads / self.kv_heads;
        if group == 1 {
            return Ok(x.clone());
        }
        let (b, kv, n, d) = x.dims4()?;
        Ok(x.unsqueeze(2)?
            .broadcast_as((b, kv, group, n, d))?
            .contiguous()?
            .reshape((b, kv * group, n, d))?)
    }
}

/// `weight` `[out, in]`, with `bias` `[out]` when the config says so.
fn linear(vb: &WeightPath, input: usize, output: usize, bias: bool) -> Result<Dense> {
    let b = match bias {
        true => Some(vb.get("bias", &[output])?),
        false => None,
    };
    Ok(Dense::new(vb.get("weight", &[output, input])?, b))
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
            let config = LlamaConfig::load(&path).unwrap();
            (0..30).map(|l| config.window(l)).collect::<Vec<_>>()
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
