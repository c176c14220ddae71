//! GPT2LMHeadModel's forward pass with a key/value cache, keeping every layer's causal
//! attention probabilities (pre-LayerNorm blocks; Radford et al. 2019).

use candle_core::{IndexOp, Module, Tensor, D};
use candle_nn::{Embedding, LayerNorm, Linear};

use super::config::Gpt2Config;
use crate::checkpoint::{WeightPath, Weights};
use crate::error::Result;
use crate::model::activate;
use crate::model::Activation;

/// A GPT-2 with its language-model head (tied to the token embeddings unless the checkpoint
/// stores its own `lm_head.weight`).
pub struct Gpt2 {
    wte: Embedding,
    wpe: Embedding,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    /// `[vocab, n_embd]`.
    lm_head: Tensor,
}

/// The keys and values of the positions seen so far, one entry per layer.
#[derive(Default)]
pub struct KvCache {
    /// Per layer: keys and values, each `[1, heads, seen, head_size]`.
    layers: Vec<Option<(Tensor, Tensor)>>,
}

impl KvCache {
    /// How many positions the cache holds.
    pub fn len(&self) -> usize {
        match self.layers.first() {
            Some(Some((k, _))) => k.dims()[2],
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one forward step yields.
pub struct StepOutput {
    /// `[vocab]`: the next-token logits at the last fed position.
    pub logits: Tensor,
    /// One `[1, heads, q, seen + q]` tensor per layer, first layer first: the attention rows
    /// of the `q` fed positions over every position so far (zero where the mask hides).
    pub attentions: Vec<Tensor>,
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
            lm_head,
        })
    }

    /// `ids`: `[1, q]` u32, the positions after those in `cache`, which this call extends.
    pub fn forward(&self, ids: &Tensor, cache: &mut KvCache) -> Result<StepOutput> {
        let (_, q) = ids.dims2()?;
        let seen = cache.len();
        cache.layers.resize(self.blocks.len(), None);
        let positions =
            Tensor::arange(seen as u32, (seen + q) as u32, ids.device())?.unsqueeze(0)?;
        let mut x = self
            .wte
            .forward(ids)?
            .broadcast_add(&self.wpe.forward(&positions)?)?;
        let mut attentions = Vec::with_capacity(self.blocks.len());
        for (block, kv) in self.blocks.iter().zip(cache.layers.iter_mut()) {
            let (next, probs) = block.forward(&x, kv, seen)?;
            x = next;
            attentions.push(probs);
        }
        let last = self.ln_f.forward(&x.i((0, q - 1..q))?)?;
        let logits = last.matmul(&self.lm_head.t()?)?.squeeze(0)?;
        Ok(StepOutput { logits, attentions })
    }
}

/// `h.<i>.*`: LayerNorm, causal self-attention, LayerNorm, MLP, each with a residual.
struct Block {
    ln_1: LayerNorm,
    attn: CausalSelfAttention,
    ln_2: LayerNorm,
    c_fc: Linear,
    c_proj: Linear,
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

    /// `x`: `[1, q, n_embd]` → (`[1, q, n_embd]`, probabilities `[1, heads, q, seen + q]`).
    fn forward(
        &self,
        x: &Tensor,
        kv: &mut Option<(Tensor, Tensor)>,
        seen: usize,
    ) -> Result<(Tensor, Tensor)> {
        let (attended, probs) = self.attn.forward(&self.ln_1.forward(x)?, kv, seen)?;
        let x = (x + attended)?;
        let inner = self.c_fc.forward(&self.ln_2.forward(&x)?)?;
        let inner = activate(self.activation, &inner)?;
        Ok(((x + self.c_proj.forward(&inner)?)?, probs))
    }
}

/// `attn.*`: fused query/key/value projection `c_attn`, output projection `c_proj`.
struct CausalSelfAttention {
    c_attn: Linear,
    c_proj: Linear,
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

    /// `x`: `[1, q, n_embd]` (after ln_1) at positions `seen..seen + q`.
    fn forward(
        &self,
        x: &Tensor,
        kv: &mut Option<(Tensor, Tensor)>,
        seen: usize,
    ) -> Result<(Tensor, Tensor)> {
        let (batch, q, e) = x.dims3()?;
        let qkv = self.c_attn.forward(x)?;
        let split = |i: usize| -> Result<Tensor> {
            Ok(qkv
                .narrow(2, i * e, e)?
                .reshape((batch, q, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let (query, mut key, mut value) = (split(0)?, split(1)?, split(2)?);
        if let Some((past_k, past_v)) = kv.as_ref() {
            key = Tensor::cat(&[past_k, &key], 2)?;
            value = Tensor::cat(&[past_v, &value], 2)?;
        }
        *kv = Some((key.clone(), value.clone()));
        let scores = (query.matmul(&key.t()?.contiguous()?)? * self.scale)?;
        let scores = match causal_mask(q, seen, x.device())? {
            Some(mask) => scores.broadcast_add(&mask.to_dtype(scores.dtype())?)?,
            None => scores,
        };
        let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let context = probs
            .matmul(&value)?
            .transpose(1, 2)?
            .reshape((batch, q, e))?;
        Ok((self.c_proj.forward(&context)?, probs))
    }
}

/// `[q, seen + q]`: 0 where row `seen + i` may look (columns ≤ `seen + i`), −∞ elsewhere;
/// `None` for a single new position, which may look everywhere.
fn causal_mask(q: usize, seen: usize, device: &candle_core::Device) -> Result<Option<Tensor>> {
    if q == 1 {
        return Ok(None);
    }
    let width = seen + q;
    let mask: Vec<f32> = (0..q)
        .flat_map(|i| (0..width).map(move |j| if j > seen + i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Ok(Some(Tensor::from_vec(mask, (q, width), device)?))
}

/// A transformers `Conv1D`: `weight` stored `[in, out]` (the transpose of a `Linear`'s).
fn conv1d(vb: &WeightPath, input: usize, output: usize) -> Result<Linear> {
    let weight = vb.get("weight", &[input, output])?.t()?.contiguous()?;
    Ok(Linear::new(weight, Some(vb.get("bias", &[output])?)))
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

    #[test]
    fn mask_hides_the_future_only() {
        let mask = causal_mask(2, 1, &candle_core::Device::Cpu)
            .unwrap()
            .unwrap();
        assert_eq!(mask.dims(), &[2, 3]);
        let rows: Vec<Vec<f32>> = mask.to_vec2().unwrap();
        assert_eq!(rows[0], [0.0, 0.0, f32::NEG_INFINITY]);
        assert_eq!(rows[1], [0.0, 0.0, 0.0]);
        assert!(causal_mask(1, 5, &candle_core::Device::Cpu)
            .unwrap()
            .is_none());
    }
}
