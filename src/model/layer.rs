//! One encoder layer: attention, then the feed-forward block, each with residual and LayerNorm.

use crate::linalg::Dense;
use candle_core::{Module, Tensor};

use super::attention::{load_linear, Attention, Scores};
use super::config::{Activation, EncoderConfig};
use super::family::LayerNames;
use super::norm::LayerNorm;
use super::rules;
use super::{Keep, LayerTrace};
use crate::checkpoint::WeightPath;
use crate::error::Result;

/// One post-LayerNorm encoder layer (every family's layers compute this).
pub struct Layer {
    attention: Attention,
    intermediate: Dense,
    output: Dense,
    layer_norm: LayerNorm,
    activation: Activation,
}

impl Layer {
    /// `vb` is the layer, `names` its tensors' names within it.
    pub fn load(vb: &WeightPath, names: &LayerNames, config: &EncoderConfig) -> Result<Self> {
        let (hidden, inner) = (config.hidden_size, config.intermediate_size);
        Ok(Self {
            attention: Attention::load(vb, names, config)?,
            intermediate: load_linear(&vb.pp(names.ffn_in), hidden, inner)?,
            output: load_linear(&vb.pp(names.ffn_out), inner, hidden)?,
            layer_norm: LayerNorm::load(&vb.pp(names.output_norm), hidden, config.layer_norm_eps)?,
            activation: config.hidden_act,
        })
    }

    /// The same layer with a family's own attention logits (DeBERTa's).
    pub fn with_scores(self, scores: Box<dyn Scores>) -> Self {
        Self {
            attention: self.attention.with_scores(scores),
            ..self
        }
    }

    /// How many times wider the feed-forward block is than the hidden states (rounded up).
    pub fn intermediate_factor(&self) -> usize {
        let (inner, hidden) = self.intermediate.weight().dims2().unwrap_or((1, 1));
        inner.div_ceil(hidden.max(1))
    }

    /// `x`: `[b, n, hidden]` → (`[b, n, hidden]`, what the layer exposes).
    /// `value_mask`: `[b, n]`, multiplies each position's value vector (value zeroing);
    /// `lengths`: what [`crate::model::Body::forward`] says.
    pub fn forward(
        &self,
        x: &Tensor,
        keep: Keep,
        value_mask: Option<&Tensor>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, LayerTrace)> {
        let attended = self.attention.forward(x, keep, value_mask, lengths)?;
        let inner = activate(
            self.activation,
            &self.intermediate.forward(&attended.hidden)?,
        )?;
        let out = self.output.forward(&inner)?;
        let hidden = self.layer_norm.forward(&(out + &attended.hidden)?)?;
        let trace = LayerTrace {
            probs: attended.probs,
            probe: attended.probe,
            internals: attended.internals,
            head_sums: None,
        };
        Ok((hidden, trace))
    }
}

/// Applies the configured activation elementwise (an elementwise nonlinearity of
/// [`rules`]).
pub fn activate(activation: Activation, x: &Tensor) -> Result<Tensor> {
    rules::nonlinear(x, |x| {
        Ok(match activation {
            Activation::Gelu => x.gelu_erf()?,
            Activation::GeluTanh => x.gelu()?,
            Activation::Relu => x.relu()?,
            Activation::Tanh => x.tanh()?,
            Activation::Silu => x.silu()?,
        })
    })
}
