//! Multi-head self-attention that hands back its softmax probabilities.

use candle_core::{Module, Tensor, D};
use candle_nn::Linear;

use super::config::EncoderConfig;
use super::family::LayerNames;
use super::norm::LayerNorm;
use crate::checkpoint::WeightPath;
use crate::error::Result;

/// The attention block of one encoder layer: self-attention, its output projection, the
/// residual connection and LayerNorm.
pub struct Attention {
    query: Linear,
    key: Linear,
    value: Linear,
    output: Linear,
    layer_norm: LayerNorm,
    heads: usize,
    head_size: usize,
}

/// What one attention block computes.
pub struct AttentionOutput {
    /// `[b, n, hidden]`, after the residual connection and LayerNorm.
    pub hidden: Tensor,
    /// `[b, heads, n, n]`: row i is the softmax over the positions that i attends to.
    pub probs: Tensor,
}

impl Attention {
    /// `vb` is the layer; `names` say where its attention tensors are.
    pub fn load(vb: &WeightPath, names: &LayerNames, config: &EncoderConfig) -> Result<Self> {
        let hidden = config.hidden_size;
        let linear = |name: &str| load_linear(&vb.pp(name), hidden, hidden);
        Ok(Self {
            query: linear(names.query)?,
            key: linear(names.key)?,
            value: linear(names.value)?,
            output: linear(names.attention_output)?,
            layer_norm: LayerNorm::load(
                &vb.pp(names.attention_norm),
                hidden,
                config.layer_norm_eps,
            )?,
            heads: config.num_attention_heads,
            head_size: config.head_size(),
        })
    }

    /// `x`: `[b, n, hidden]`. No padding mask: every sequence fills all n positions.
    pub fn forward(&self, x: &Tensor) -> Result<AttentionOutput> {
        let (batch, n, hidden) = x.dims3()?;
        let split = |t: Tensor| -> Result<Tensor> {
            Ok(t.reshape((batch, n, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = split(self.query.forward(x)?)?;
        let k = split(self.key.forward(x)?)?;
        let v = split(self.value.forward(x)?)?;
        let scale = 1.0 / (self.head_size as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?;
        let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((batch, n, hidden))?;
        let projected = self.output.forward(&context)?;
        let hidden = self.layer_norm.forward(&(projected + x)?)?;
        Ok(AttentionOutput { hidden, probs })
    }
}

/// A `Linear` from `dense.weight` `[out, in]` and `dense.bias` `[out]`.
pub fn load_linear(vb: &WeightPath, input: usize, output: usize) -> Result<Linear> {
    Ok(Linear::new(
        vb.get("weight", &[output, input])?,
        Some(vb.get("bias", &[output])?),
    ))
}
