//! ALTI (Ferrando et al. 2022): how much of position i's output after the attention block and
//! its LayerNorm each input j makes up, measured by the Manhattan distance from the whole:
//! with `z_ij = Σ_h A^h_ij f^h(x_j) + [i=j](x_j + b_O)` and `t_ij = γ ⊙ (z_ij − mean(z_ij)) / σ_i`
//! (the norm applied to each part, bias left out), `y_i = Σ_j t_ij` and
//! `M[i][j] = max(0, ‖y_i‖₁ − ‖y_i − t_ij‖₁)`. The residual is inside.
//!
//! A pre-norm layer (the causal decoders) has no norm after the attention block: its output
//! there is the residual stream `z_i = Σ_j z_ij` itself, so `t_ij = z_ij` and `y_i = z_i`, as
//! Ferrando et al. (2023) decompose decoders. (Its first norm acts on each `x_j` alone, so
//! `f^h` of the normed `x_j` is still token j's part.)

use candle_core::{IndexOp, Tensor, D};

use std::ops::Range;

use super::{mixing_inputs, wide};
use crate::error::Result;
use crate::linalg::matmul;
use crate::model::LayerInternals;

/// `probs`: `[1, H, n, n]` → `M`: `[n, n]`.
pub fn matrix(probs: &Tensor, internals: &LayerInternals) -> Result<Tensor> {
    let (a, f) = mixing_inputs(probs, internals)?;
    let n = a.dim(1)?;
    // γ and σ of the norm after the block; none in a pre-norm layer.
    let norm = match (&internals.norm_weight, &internals.norm_scale) {
        (Some(gamma), Some(sigma)) => Some((wide(gamma)?, wide(&sigma.squeeze(0)?)?)),
        _ => None,
    };
    // x_j + b_O, which only z_jj holds.
    let residual = match &internals.output_bias {
        Some(b) => wide(&internals.input.squeeze(0)?)?.broadcast_add(&wide(b)?)?,
        None => wide(&internals.input.squeeze(0)?)?,
    };
    let eye = Tensor::eye(n, f.dtype(), f.device())?;
    let mut rows = Vec::new();
    for block in row_blocks(&f)? {
        let diagonal = eye.i(block.clone())?.unsqueeze(2)?; // [B, n, 1]
        let z = contributions(&a, &f, block.clone())?
            .add(&diagonal.broadcast_mul(&residual.unsqueeze(0)?)?)?;
        let t = match &norm {
            Some((gamma, sigma)) => {
                let centred = z.broadcast_sub(&z.mean_keepdim(D::Minus1)?)?;
                let scale = sigma.i(block)?.reshape(((), 1, 1))?;
                centred.broadcast_div(&scale)?.broadcast_mul(gamma)? // [B, n, d]
            }
            None => z,
        };
        let y = t.sum_keepdim(1)?; // [B, 1, d]
        let whole = y.abs()?.sum(D::Minus1)?; // [B, 1]
        let without = y.broadcast_sub(&t)?.abs()?.sum(D::Minus1)?; // [B, n]
        rows.push(whole.broadcast_sub(&without)?.relu()?);
    }
    Ok(Tensor::cat(&rows, 0)?)
}

/// `[B, n, d]`: `Σ_h A^h_ij f^h(x_j)` for the rows i in `rows` (B of them) and every j, as
/// one batched product over j: `(A^h_ij)_h` (`[B, H]`) times `(f^h(x_j))_h` (`[H, d]`).
fn contributions(a: &Tensor, f: &Tensor, rows: Range<usize>) -> Result<Tensor> {
    let weights = a.i((.., rows, ..))?.permute((2, 1, 0))?.contiguous()?; // [n(j), B, H]
    let values = f.transpose(0, 1)?.contiguous()?; // [n(j), H, d]
    Ok(matmul(&weights, &values)?.transpose(0, 1)?.contiguous()?)
}

/// Blocks of rows whose `[B, n, d]` contributions stay near 8M values.
fn row_blocks(f: &Tensor) -> Result<Vec<Range<usize>>> {
    let (_, n, d) = f.dims3()?;
    let block = (8_000_000 / (n * d).max(1)).clamp(1, n.max(1));
    Ok((0..n)
        .step_by(block)
        .map(|start| start..(start + block).min(n))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// One head, d = 2, A = [[1, 0], [0.5, 0.5]], f(x_0) = (1, 0), f(x_1) = (0, 2),
    /// x_0 = (0, 0), x_1 = (3, 0), b_O = 0, γ = (1, 2).
    /// Row 0: z_00 = (1, 0), z_01 = 0, σ_0 = 0.5; t_00 = ((1,0) − 0.5)/0.5 ⊙ γ = (1, −2),
    /// t_01 = 0, y_0 = (1, −2): M[0] = (3 − 0, 3 − 3) = (3, 0).
    /// Row 1: z_10 = (0.5, 0), z_11 = (0, 1) + (3, 0) = (3, 1), z_1 = (3.5, 1), σ_1 = 1.25;
    /// t_10 = ((0.5,0) − 0.25)/1.25 ⊙ γ = (0.2, −0.4), t_11 = ((3,1) − 2)/1.25 ⊙ γ = (0.8, −1.6),
    /// y_1 = (1, −2), ‖y_1‖₁ = 3: M[1] = (3 − ‖(0.8, −1.6)‖₁, 3 − ‖(0.2, −0.4)‖₁) = (0.6, 2.4).
    #[test]
    fn two_tokens_by_hand() {
        let d = |v: &[f64]| Tensor::new(v, &Device::Cpu).unwrap();
        let internals = LayerInternals {
            input: Tensor::new(&[[[0.0, 0.0], [3.0, 0.0]]], &Device::Cpu).unwrap(),
            head_values: Tensor::new(&[[[[1.0, 0.0], [0.0, 2.0]]]], &Device::Cpu).unwrap(),
            norm_weight: Some(d(&[1.0, 2.0])),
            norm_scale: Some(Tensor::new(&[[0.5, 1.25]], &Device::Cpu).unwrap()),
            output_bias: Some(d(&[0.0, 0.0])),
        };
        let probs = Tensor::new(&[[[[1.0, 0.0], [0.5, 0.5]]]], &Device::Cpu).unwrap();
        let m: Vec<Vec<f64>> = matrix(&probs, &internals).unwrap().to_vec2().unwrap();
        let want = [[3.0, 0.0], [0.6, 2.4]];
        for (row, want) in m.iter().zip(want) {
            for (a, b) in row.iter().zip(want) {
                assert!((a - b).abs() < 1e-12, "{m:?}");
            }
        }
    }

    /// The same layer without a norm after it (pre-norm): t_ij = z_ij.
    /// Row 0: z_00 = (1, 0), z_01 = 0, y_0 = (1, 0): M[0] = (1 − 0, 1 − 1) = (1, 0).
    /// Row 1: z_10 = (0.5, 0), z_11 = (3, 1), y_1 = (3.5, 1), ‖y_1‖₁ = 4.5:
    /// M[1] = (4.5 − ‖(3, 1)‖₁, 4.5 − ‖(0.5, 0)‖₁) = (0.5, 4).
    #[test]
    fn pre_norm_layers_take_the_parts_as_they_are() {
        let internals = LayerInternals {
            input: Tensor::new(&[[[0.0, 0.0], [3.0, 0.0]]], &Device::Cpu).unwrap(),
            head_values: Tensor::new(&[[[[1.0, 0.0], [0.0, 2.0]]]], &Device::Cpu).unwrap(),
            norm_weight: None,
            norm_scale: None,
            output_bias: None,
        };
        let probs = Tensor::new(&[[[[1.0, 0.0], [0.5, 0.5]]]], &Device::Cpu).unwrap();
        let m: Vec<Vec<f64>> = matrix(&probs, &internals).unwrap().to_vec2().unwrap();
        assert_eq!(m, [[1.0, 0.0], [0.5, 4.0]]);
    }
}
