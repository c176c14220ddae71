//! Gradient-weighted attention (Chefer et al. 2021, their "generic" rule):
//! `M[i][j] = mean_h max(0, ∂s/∂A^h_ij · A^h_ij)`, s the explained logit (the chosen word's
//! or label's), its derivative taken through every later layer.

use candle_core::backprop::GradStore;
use candle_core::{IndexOp, Tensor};

use super::{wide, Run};
use crate::error::{Error, Result};
use crate::model::causal::{CausalLm, KvCache};
use crate::model::{Keep, LayerTrace};

const PROBES: Keep = Keep {
    internals: false,
    probes: true,
    heads: crate::model::Heads::Every,
};

/// `[L, n, n]`: every layer's `M`, for the logit of class `score`.
pub fn matrices(run: &Run, score: u32) -> Result<Tensor> {
    let output = run
        .model
        .forward(run.ids, Some(run.types), run.target, PROBES)?;
    let logits = output.logits.as_ref().ok_or(Error::NeedsMlmHead {
        what: "grad-attention",
        model: "this checkpoint".into(),
    })?;
    let grads = logits.i((0, score as usize))?.backward()?;
    weighted(&output.layers, &grads)
}

/// `[L, n, n]` for a causal decoder fed `ids` (`[1, n]`): every layer's `M` for the logit
/// of token `next` at the last position, the token generated there.
pub fn decoder_matrices(model: &dyn CausalLm, ids: &Tensor, next: u32) -> Result<Tensor> {
    let output = model.step(ids, &mut KvCache::default(), PROBES)?;
    let grads = output.logits.i(next as usize)?.backward()?;
    weighted(&output.layers, &grads)
}

/// `mean_h max(0, ∂s/∂A^h · A^h)` of every layer.
fn weighted(layers: &[LayerTrace], grads: &GradStore) -> Result<Tensor> {
    let layers = layers
        .iter()
        .map(|layer| {
            let probe = layer.probe.as_ref().expect("probes were kept");
            let grad = grads
                .get(probe.as_tensor())
                .cloned()
                .unwrap_or(probe.as_tensor().zeros_like()?);
            let weighted = wide(&grad)?.mul(&wide(&layer.probs)?)?.relu()?;
            Ok(weighted.squeeze(0)?.mean(0)?)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::stack(&layers, 0)?)
}
