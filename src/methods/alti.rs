//! ALTI (Ferrando et al. 2022), as the authors' code (mt-upc/transformer-contributions)
//! computes it: how much of position i's output after the attention block and its LayerNorm
//! each input j makes up, measured by the Manhattan distance from the whole. With
//! `z_ij = Σ_h A^h_ij f^h(x_j) + [i=j] x_j` and `t_ij = γ ⊙ (z_ij − mean(z_ij)) / σ_i` (the
//! norm's linear part applied to each part; the output bias b_O and β belong to no input),
//! `y_i` is the norm's actual output, `Σ_j t_ij + γ ⊙ (b_O − mean(b_O)) / σ_i + β`, and
//! `M[i][j] = max(0, ‖y_i‖₁ − ‖y_i − t_ij‖₁)`, with no epsilon inside the distance. The
//! residual is inside.
//!
//! A pre-norm layer (the causal decoders) has no norm after the attention block: its output
//! there is the residual stream `z_i = Σ_j z_ij` itself, with the bias carried by the
//! position's own term (`z_ii` holds `x_i + b_O`), so `t_ij = z_ij` and `y_i = z_i`, as
//! Ferrando et al. (2023) decompose decoders. (Its first norm acts on each `x_j` alone, so
//! `f^h` of the normed `x_j` is still token j's part.)

use candle_core::{IndexOp, Tensor, D};

use std::ops::Range;

use super::{mixing_inputs, wide, TracedLayer};
use crate::error::Result;
use crate::linalg::matmul;

/// The norm after a post-norm block, widened: γ, σ_i for every position, and what its output
/// holds besides the inputs' parts, `γ ⊙ (b_O − mean(b_O)) / σ_i + β` (`[n, d]`).
struct PostNorm {
    gamma: Tensor,
    sigma: Tensor,
    rest: Tensor,
}

/// The layer's `M`: `[n, n]`.
pub fn matrix(layer: &TracedLayer) -> Result<Tensor> {
    let internals = layer.internals;
    let (a, f) = mixing_inputs(layer.probs, internals)?;
    let n = a.dim(1)?;
    let input = wide(&internals.input.squeeze(0)?)?;
    let bias = match &internals.output_bias {
        Some(b) => wide(b)?,
        None => input.i(0)?.zeros_like()?,
    };
    let norm = match (
        &internals.norm_weight,
        &internals.norm_scale,
        &internals.norm_bias,
    ) {
        (Some(gamma), Some(sigma), Some(beta)) => {
            let (gamma, sigma) = (wide(gamma)?, wide(&sigma.squeeze(0)?)?);
            let centred = bias.broadcast_sub(&bias.mean_keepdim(D::Minus1)?)?;
            let rest = centred
                .broadcast_mul(&gamma)?
                .unsqueeze(0)?
                .broadcast_div(&sigma.unsqueeze(1)?)?
                .broadcast_add(&wide(beta)?)?;
            Some(PostNorm { gamma, sigma, rest })
        }
        _ => None,
    };
    // What z_jj holds besides the heads' part: x_j, and in a pre-norm layer b_O too.
    let own = match norm {
        Some(_) => input,
        None => input.broadcast_add(&bias)?,
    };
    let eye = Tensor::eye(n, f.dtype(), f.device())?;
    let mut rows = Vec::new();
    for block in row_blocks(&f)? {
        let diagonal = eye.i(block.clone())?.unsqueeze(2)?; // [B, n, 1]
        let z = contributions(&a, &f, block.clone())?
            .add(&diagonal.broadcast_mul(&own.unsqueeze(0)?)?)?;
        let (t, y) = match &norm {
            Some(norm) => {
                let centred = z.broadcast_sub(&z.mean_keepdim(D::Minus1)?)?;
                let scale = norm.sigma.i(block.clone())?.reshape(((), 1, 1))?;
                let t = centred.broadcast_div(&scale)?.broadcast_mul(&norm.gamma)?; // [B, n, d]
                let y = t.sum_keepdim(1)?.add(&norm.rest.i(block)?.unsqueeze(1)?)?;
                (t, y)
            }
            None => {
                let y = z.sum_keepdim(1)?;
                (z, y)
            }
        };
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
    use crate::model::LayerInternals;
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
        let m = alti_of(Some(([0.5, 1.25], [0.0, 0.0], [0.0, 0.0])));
        assert_close(&m, [[3.0, 0.0], [0.6, 2.4]]);
    }

    /// The first layer with an output bias b_O = (1, 0) and β = (0.5, −0.5): they belong to
    /// no t_ij, and y_i is the norm's output.
    /// Row 0: z_0 = (1, 0) + b_O = (2, 0), σ_0 = 1; t_00 = γ ⊙ ((1, 0) − 0.5) = (0.5, −1),
    /// t_01 = 0; y_0 = γ ⊙ (z_0 − 1) + β = (1.5, −2.5), ‖y_0‖₁ = 4:
    /// M[0] = (4 − ‖(1, −1.5)‖₁, 4 − 4) = (1.5, 0).
    /// Row 1: z_10 = (0.5, 0), z_11 = (3, 1), z_1 = (4.5, 1), σ_1 = 1.75;
    /// t_10 = γ ⊙ (0.25, −0.25) / 1.75 = (1/7, −2/7), t_11 = γ ⊙ (1, −1) / 1.75 = (4/7, −8/7);
    /// y_1 = γ ⊙ (1, −1) + β = (1.5, −2.5): M[1] = (4 − 25/7, 4 − 16/7) = (3/7, 12/7).
    #[test]
    fn biases_belong_to_no_input() {
        let m = alti_of(Some(([1.0, 1.75], [0.5, -0.5], [1.0, 0.0])));
        assert_close(&m, [[1.5, 0.0], [3.0 / 7.0, 12.0 / 7.0]]);
    }

    /// The same layer without a norm after it (pre-norm): t_ij = z_ij.
    /// Row 0: z_00 = (1, 0), z_01 = 0, y_0 = (1, 0): M[0] = (1 − 0, 1 − 1) = (1, 0).
    /// Row 1: z_10 = (0.5, 0), z_11 = (3, 1), y_1 = (3.5, 1), ‖y_1‖₁ = 4.5:
    /// M[1] = (4.5 − ‖(3, 1)‖₁, 4.5 − ‖(0.5, 0)‖₁) = (0.5, 4).
    #[test]
    fn pre_norm_layers_take_the_parts_as_they_are() {
        assert_eq!(alti_of(None), [[1.0, 0.0], [0.5, 4.0]]);
    }

    /// The layer every case above shares: one head, d = 2, A = [[1, 0], [0.5, 0.5]],
    /// f(x_0) = (1, 0), f(x_1) = (0, 2), x_0 = (0, 0), x_1 = (3, 0); with `norm`
    /// (σ_i, β, b_O) a LayerNorm after it with γ = (1, 2), else none. Its ALTI matrix.
    fn alti_of(norm: Option<([f64; 2], [f64; 2], [f64; 2])>) -> Vec<Vec<f64>> {
        let cpu = &Device::Cpu;
        let d = |v: &[f64]| Tensor::new(v, cpu).unwrap();
        let (norm_weight, norm_scale, norm_bias, output_bias) = match norm {
            Some((scale, beta, bias)) => (
                Some(d(&[1.0, 2.0])),
                Some(Tensor::new(&[scale], cpu).unwrap()),
                Some(d(&beta)),
                Some(d(&bias)),
            ),
            None => (None, None, None, None),
        };
        let internals = LayerInternals {
            input: Tensor::new(&[[[0.0, 0.0], [3.0, 0.0]]], cpu).unwrap(),
            head_values: Tensor::new(&[[[[1.0, 0.0], [0.0, 2.0]]]], cpu).unwrap(),
            norm_weight,
            norm_scale,
            norm_bias,
            output_bias,
            row_scale: None,
        };
        let probs = Tensor::new(&[[[[1.0, 0.0], [0.5, 0.5]]]], cpu).unwrap();
        let rerun = |_: &Tensor, _: Option<&Tensor>| unreachable!("ALTI reruns no layer");
        let layer = TracedLayer {
            probs: &probs,
            internals: &internals,
            rerun: &rerun,
            width: 0,
        };
        matrix(&layer).unwrap().to_vec2().unwrap()
    }

    fn assert_close(m: &[Vec<f64>], want: [[f64; 2]; 2]) {
        for (row, want) in m.iter().zip(want) {
            for (a, b) in row.iter().zip(want) {
                assert!((a - b).abs() < 1e-12, "{m:?}");
            }
        }
    }
}
