//! ALTI (Ferrando et al. 2022): how much of position i's output after the attention block and
//! its LayerNorm each input j makes up, measured by the Manhattan distance from the whole:
//! with `z_ij = Σ_h A^h_ij f^h(x_j) + [i=j](x_j + b_O)` and `t_ij = γ ⊙ (z_ij − mean(z_ij)) / σ_i`
//! (the norm applied to each part, bias left out), `y_i = Σ_j t_ij` and
//! `M[i][j] = max(0, ‖y_i‖₁ − ‖y_i − t_ij‖₁)`. The residual is inside.

use candle_core::{IndexOp, Tensor, D};

use super::norm::{contributions, mixing_inputs, row_blocks};
use super::wide;
use crate::error::{Error, Result};
use crate::model::LayerInternals;

/// `probs`: `[1, H, n, n]` → `M`: `[n, n]`.
pub fn matrix(probs: &Tensor, internals: &LayerInternals) -> Result<Tensor> {
    let (Some(gamma), Some(sigma)) = (&internals.norm_weight, &internals.norm_scale) else {
        return Err(Error::MixingNotDefined {
            mixing: "alti",
            why: "its layers have no norm after the attention block (a pre-norm model)",
        });
    };
    let (a, f) = mixing_inputs(probs, internals)?;
    let n = a.dim(1)?;
    let gamma = wide(gamma)?;
    let sigma = wide(&sigma.squeeze(0)?)?; // [n]
                                           // x_j + b_O, which only z_jj holds.
    let residual = match &internals.output_bias {
        Some(b) => wide(&internals.input.squeeze(0)?)?.broadcast_add(&wide(b)?)?,
        None => wide(&internals.input.squeeze(0)?)?,
    };
    let eye = Tensor::eye(n, gamma.dtype(), gamma.device())?;
    let mut rows = Vec::new();
    for block in row_blocks(&f)? {
        let diagonal = eye.i(block.clone())?.unsqueeze(2)?; // [B, n, 1]
        let z = contributions(&a, &f, block.clone())?
            .add(&diagonal.broadcast_mul(&residual.unsqueeze(0)?)?)?;
        let centred = z.broadcast_sub(&z.mean_keepdim(D::Minus1)?)?;
        let scale = sigma.i(block)?.reshape(((), 1, 1))?;
        let t = centred.broadcast_div(&scale)?.broadcast_mul(&gamma)?; // [B, n, d]
        let y = t.sum_keepdim(1)?; // [B, 1, d]
        let whole = y.abs()?.sum(D::Minus1)?; // [B, 1]
        let without = y.broadcast_sub(&t)?.abs()?.sum(D::Minus1)?; // [B, n]
        rows.push(whole.broadcast_sub(&without)?.relu()?);
    }
    Ok(Tensor::cat(&rows, 0)?)
}
