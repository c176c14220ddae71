//! GPT-2 (Radford et al. 2019), the causal family: GPT2LMHeadModel's forward pass with a
//! key/value cache, pre-LayerNorm blocks, every layer's causal attention kept. Its names
//! (`h.<i>.attn.c_attn`, transformers' `Conv1D` stored `[in, out]`) and its
//! layout differ from the encoders' too much to share their blocks; its layers expose the
//! same [`LayerTrace`].

use std::path::Path;

use candle_core::{IndexOp, Module, Tensor};
use candle_nn::Embedding;

use crate::linalg::Dense;
use serde::Deserialize;

use crate::checkpoint::{WeightPath, Weights};
use crate::error::{Error, Result};
use crate::input::{read_text_capped, METADATA_LIMIT};
use crate::model::causal::{
    cached_attention, decoder_internals, eos_ids, last_rows, pack, positions, unpack, Attended,
    Cached, CausalDims, CausalLm, Decoder, KvCache, Step, StepOutput,
};
use crate::model::norm::LayerNorm;
use crate::model::{activate, Activation, Keep, LayerTrace};

/// The `model_type`s of this family.
pub const MODEL_TYPES: [&str; 1] = ["gpt2"];

pub const DECODER: Decoder = Decoder {
    model_types: &MODEL_TYPES,
    spec: None,
    load: |config, weights| Ok(Box::new(Gpt2::load(weights, &Gpt2Config::load(config)?)?)),
};

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
    #[serde(default, deserialize_with = "eos_ids")]
    pub eos_token_id: Vec<u32>,
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
        if !MODEL_TYPES.contains(&found) {
            return Err(Error::NotCausal {
                path: path.to_path_buf(),
                found: found.to_string(),
                supported: super::causal_model_types(),
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

/// A GPT-2 with its language-model head (tied to the token embeddings unless the checkpoint
/// stores its own `lm_head.weight`).
pub struct Gpt2 {
    wte: Embedding,
    wpe: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    /// `[vocab, n_embd]`.
    lm_head: Dense,
    config: Gpt2Config,
}

impl Gpt2 {
    /// Builds the model from transformers' names, with or without the `transformer.` prefix.
    pub fn load(weights: &Weights, config: &Gpt2Config) -> Result<Self> {
        let root = if weights.contains("transformer.wte.weight") {
            weights.pp("transformer")
        } else {
            weights.pp("")
        };
        let e = config.n_embd;
        let wte = root.pp("wte").get("weight", &[config.vocab_size, e])?;
        let wpe = root.pp("wpe").get("weight", &[config.n_positions, e])?;
        let blocks = (0..config.n_layer)
            .map(|i| Block::load(&root.pp("h").pp(&i.to_string()), config))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = if weights.contains("lm_head.weight") {
            weights.get("lm_head.weight", &[config.vocab_size, e])?
        } else {
            wte.clone()
        };
        Ok(Self {
            wte: Embedding::new(wte, e),
            wpe: Embedding::new(wpe, e),
            blocks,
            ln_f: layer_norm(&root.pp("ln_f"), config)?,
            lm_head: Dense::new(lm_head, None),
            config: config.clone(),
        })
    }

    /// The word embeddings `words` (`[1, rows, n_embd]`) plus those of `positions` (one a
    /// row), then every block, each with its cache in `caches` → (the last block's output
    /// `[1, rows, n_embd]`, each block's trace).
    fn run<'c>(
        &self,
        words: &Tensor,
        positions: Vec<u32>,
        caches: impl IntoIterator<Item = Cached<'c>>,
        keep: Keep,
    ) -> Result<(Tensor, Vec<LayerTrace>)> {
        let positions = Tensor::new(positions, words.device())?.unsqueeze(0)?;
        let mut x = words.broadcast_add(&self.wpe.forward(&positions)?)?;
        let mut layers = Vec::with_capacity(self.blocks.len());
        for (block, cached) in self.blocks.iter().zip(caches) {
            let (next, trace) = block.forward(&x, cached, keep, None)?;
            x = next;
            layers.push(trace);
        }
        Ok((x, layers))
    }

    /// The next-token logits of the last block's output `[..., n_embd]`.
    fn logits(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.lm_head.forward(&self.ln_f.forward(x)?)?)
    }
}

impl CausalLm for Gpt2 {
    fn model_type(&self) -> &'static str {
        "gpt2"
    }

    fn dims(&self) -> CausalDims {
        CausalDims {
            vocab_size: self.config.vocab_size,
            max_positions: self.config.n_positions,
            layers: self.config.n_layer,
            heads: self.config.n_head,
            intermediate: self.config.inner_size(),
        }
    }

    fn eos(&self) -> &[u32] {
        &self.config.eos_token_id
    }

    fn step(&self, ids: &Tensor, cache: &mut KvCache, keep: Keep) -> Result<StepOutput> {
        let (seen, q) = (cache.len(), ids.dim(1)?);
        cache.layers.resize(self.blocks.len(), None);
        let caches = cache.layers.iter_mut().map(|kv| Cached::Alike(kv, seen));
        let positions = (seen..seen + q).map(|p| p as u32).collect();
        let (x, layers) = self.run(&self.wte.forward(ids)?, positions, caches, keep)?;
        Ok(StepOutput {
            logits: self.logits(&x.i((0, q - 1..q))?)?.squeeze(0)?,
            layers,
        })
    }

    fn step_lines(&self, feeds: &[&[u32]], caches: &mut [KvCache]) -> Result<Vec<StepOutput>> {
        let device = self.wte.embeddings().device();
        let (ids, fed) = pack(feeds, caches, self.blocks.len(), device)?;
        let words = self.wte.forward(&ids)?;
        let cached = Cached::lines(caches, &fed);
        let (x, traces) = self.run(&words, positions(&fed), cached, Keep::default())?;
        unpack(&self.logits(&last_rows(&x, &fed)?)?, &traces, &fed)
    }

    fn embed_words(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(self.wte.forward(ids)?)
    }

    /// The words reach ln_1 of every block and ln_f, and nothing else.
    fn shift_free_words(&self) -> bool {
        true
    }

    fn next_logits(&self, words: &Tensor) -> Result<Tensor> {
        let n = words.dim(1)?;
        let mut none = vec![None; self.blocks.len()];
        let caches = none.iter_mut().map(|kv| Cached::Alike(kv, 0));
        let positions = (0..n as u32).collect();
        let (x, _) = self.run(words, positions, caches, Keep::default())?;
        self.logits(&x.i((.., n - 1, ..))?)
    }

    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor> {
        let block = &self.blocks[layer];
        Ok(block
            .forward(x, Cached::Alike(&mut None, 0), Keep::default(), value_mask)?
            .0)
    }
}

/// `h.<i>.*`: LayerNorm, causal self-attention, LayerNorm, MLP, each with a residual.
struct Block {
    ln_1: LayerNorm,
    attn: CausalSelfAttention,
    ln_2: LayerNorm,
    c_fc: Dense,
    c_proj: Dense,
    activation: Activation,
}

impl Block {
    fn load(vb: &WeightPath, config: &Gpt2Config) -> Result<Self> {
        let (e, inner) = (config.n_embd, config.inner_size());
        let mlp = vb.pp("mlp");
        Ok(Self {
            ln_1: layer_norm(&vb.pp("ln_1"), config)?,
            attn: CausalSelfAttention::load(&vb.pp("attn"), config)?,
            ln_2: layer_norm(&vb.pp("ln_2"), config)?,
            c_fc: conv1d(&mlp.pp("c_fc"), e, inner)?,
            c_proj: conv1d(&mlp.pp("c_proj"), inner, e)?,
            activation: config.activation_function,
        })
    }

    /// `x`: `[b, q, n_embd]` at the positions after `cache`'s → (`[b, q, n_embd]`, the
    /// layer's trace).
    fn forward(
        &self,
        x: &Tensor,
        cache: Cached,
        keep: Keep,
        value_mask: Option<&Tensor>,
    ) -> Result<(Tensor, LayerTrace)> {
        let step = Step {
            window: None,
            scale: self.attn.scale,
            softcap: None,
            keep,
            value_mask,
            lengths: None,
        };
        let (attended, step) = self.attn.forward(&self.ln_1.forward(x)?, cache, step)?;
        let internals = decoder_internals(keep, x, &step.value, &self.attn.c_proj, None)?;
        let x = (x + attended)?;
        let inner = self.c_fc.forward(&self.ln_2.forward(&x)?)?;
        let inner = activate(self.activation, &inner)?;
        let trace = LayerTrace {
            probs: step.probs,
            probe: step.probe,
            internals,
            head_sums: None,
        };
        Ok(((x + self.c_proj.forward(&inner)?)?, trace))
    }
}

/// `attn.*`: fused query/key/value projection `c_attn`, output projection `c_proj`.
struct CausalSelfAttention {
    c_attn: Dense,
    c_proj: Dense,
    heads: usize,
    head_size: usize,
    scale: f64,
}

impl CausalSelfAttention {
    fn load(vb: &WeightPath, config: &Gpt2Config) -> Result<Self> {
        let e = config.n_embd;
        let head_size = config.head_size();
        Ok(Self {
            c_attn: conv1d(&vb.pp("c_attn"), e, 3 * e)?,
            c_proj: conv1d(&vb.pp("c_proj"), e, e)?,
            heads: config.n_head,
            head_size,
            scale: match config.scale_attn_weights {
                true => 1.0 / (head_size as f64).sqrt(),
                false => 1.0,
            },
        })
    }

    /// `x`: `[b, q, n_embd]` (after ln_1) at positions `seen..seen + q` → (the projected
    /// output, what the attention step yields).
    fn forward(&self, x: &Tensor, cache: Cached, step: Step) -> Result<(Tensor, Attended)> {
        let (batch, q, e) = x.dims3()?;
        let qkv = self.c_attn.forward(x)?;
        let split = |i: usize| -> Result<Tensor> {
            Ok(qkv
                .narrow(2, i * e, e)?
                .reshape((batch, q, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let attended = cached_attention(&split(0)?, (split(1)?, split(2)?), cache, step, |t| {
            Ok(t.clone())
        })?;
        Ok((self.c_proj.forward(&attended.context)?, attended))
    }
}

/// A transformers `Conv1D`: `weight` stored `[in, out]` (the transpose of a `Linear`'s).
fn conv1d(vb: &WeightPath, input: usize, output: usize) -> Result<Dense> {
    let weight = vb.get("weight", &[input, output])?.t()?.contiguous()?;
    Ok(Dense::new(weight, Some(vb.get("bias", &[output])?)))
}

fn layer_norm(vb: &WeightPath, config: &Gpt2Config) -> Result<LayerNorm> {
    let size = config.n_embd;
    Ok(LayerNorm::new(
        vb.get("weight", &[size])?,
        vb.get("bias", &[size])?,
        config.layer_norm_epsilon,
    ))
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
        assert_eq!(
            crate::model::config::model_type(&dir.path().join("config.json")).unwrap(),
            "gpt2"
        );
        let err = Gpt2Config::load(&write(dir.path(), r#"{"model_type": "bert"}"#)).unwrap_err();
        assert!(matches!(err, Error::NotCausal { ref found, .. } if found == "bert"));
    }
}
