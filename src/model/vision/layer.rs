//! One pre-norm layer of a vision transformer: LayerNorm, self-attention, (layer scale,)
//! residual; LayerNorm, MLP, (layer scale,) residual. A layer scale multiplies its block's
//! output channel by channel, so it is folded into the block's last projection when the
//! weights are read: the layer then is ViT's, and what SPEC §8's methods read of it (each
//! head's values through the output projection) includes the scale.

use candle_core::{Module, Tensor};

use super::Settings;
use crate::checkpoint::WeightPath;
use crate::error::Result;
use crate::linalg::Dense;
use crate::model::attention::{load_linear_with, scaled_attention, split_heads, Weighted};
use crate::model::causal::decoder_internals;
use crate::model::config::Activation;
use crate::model::norm::LayerNorm;
use crate::model::{activate, Keep, LayerTrace};

/// A family's names inside `encoder.layer.<i>` (the attention's are every family's:
/// `attention.attention.{query,key,value}`, `attention.output.dense`).
pub struct LayerNames {
    pub norm1: &'static str,
    /// The attention block's layer scale (`None`: none).
    pub scale1: Option<&'static str>,
    pub norm2: &'static str,
    pub fc1: &'static str,
    pub fc2: &'static str,
    /// The MLP's layer scale.
    pub scale2: Option<&'static str>,
}

/// The sizes a layer's tensors have.
pub struct Sizes {
    hidden: usize,
    inner: usize,
    heads: usize,
    eps: f64,
    qkv_bias: bool,
    activation: Activation,
}

impl Sizes {
    pub(super) fn of(s: &Settings) -> Self {
        Self {
            hidden: s.hidden,
            inner: s.inner,
            heads: s.heads,
            eps: s.eps,
            qkv_bias: s.qkv_bias,
            activation: s.activation,
        }
    }
}

pub struct VisionLayer {
    norm1: LayerNorm,
    query: Dense,
    key: Dense,
    value: Dense,
    /// With the attention's layer scale folded in.
    output: Dense,
    norm2: LayerNorm,
    fc1: Dense,
    /// With the MLP's layer scale folded in.
    fc2: Dense,
    activation: Activation,
    heads: usize,
}

/// `dense` followed by a multiplication by `scale` (`[out]`), as one projection.
fn scaled(dense: Dense, vb: &WeightPath, scale: Option<&str>, out: usize) -> Result<Dense> {
    let Some(name) = scale else {
        return Ok(dense);
    };
    let lambda = vb.get(name, &[out])?;
    let weight = dense.weight().broadcast_mul(&lambda.unsqueeze(1)?)?;
    let bias = dense.bias().map(|b| b * &lambda).transpose()?;
    Ok(Dense::new(weight, bias))
}

impl VisionLayer {
    pub fn load(vb: &WeightPath, names: &LayerNames, s: &Sizes) -> Result<Self> {
        let h = s.hidden;
        let attention = vb.pp("attention");
        let qkv =
            |name: &str| load_linear_with(&attention.pp("attention").pp(name), h, h, s.qkv_bias);
        let output = load_linear_with(&attention.pp("output.dense"), h, h, true)?;
        let fc2 = load_linear_with(&vb.pp(names.fc2), s.inner, h, true)?;
        Ok(Self {
            norm1: LayerNorm::load(&vb.pp(names.norm1), h, s.eps)?,
            query: qkv("query")?,
            key: qkv("key")?,
            value: qkv("value")?,
            output: scaled(output, vb, names.scale1, h)?,
            norm2: LayerNorm::load(&vb.pp(names.norm2), h, s.eps)?,
            fc1: load_linear_with(&vb.pp(names.fc1), h, s.inner, true)?,
            fc2: scaled(fc2, vb, names.scale2, h)?,
            activation: s.activation,
            heads: s.heads,
        })
    }

    /// `x`: `[b, n, hidden]`; each position's value vectors multiplied by `value_mask`
    /// (`[b, n]`); `lengths` as [`crate::model::Body::forward`] says → (`[b, n, hidden]`,
    /// the layer's trace).
    pub fn forward(
        &self,
        x: &Tensor,
        keep: Keep,
        value_mask: Option<&Tensor>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, LayerTrace)> {
        let normed = self.norm1.forward(x)?;
        let split = |dense: &Dense| split_heads(&dense.forward(&normed)?, self.heads);
        let (query, key) = (split(&self.query)?, split(&self.key)?);
        let value = match value_mask {
            Some(mask) => split(&self.value)?.broadcast_mul(&mask.unsqueeze(1)?.unsqueeze(3)?)?,
            None => split(&self.value)?,
        };
        let Weighted {
            probs,
            probe,
            context,
        } = scaled_attention((&query, &key, &value), |_| Ok(None), keep, lengths)?;
        let internals = decoder_internals(keep, x, &value, &self.output, None)?;
        let x = (x + self.output.forward(&context)?)?;
        let inner = activate(
            self.activation,
            &self.fc1.forward(&self.norm2.forward(&x)?)?,
        )?;
        let trace = LayerTrace {
            probs,
            probe,
            internals,
            head_sums: None,
        };
        Ok(((x + self.fc2.forward(&inner)?)?, trace))
    }
}
