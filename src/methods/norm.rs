//! Norm-based attention (Kobayashi et al. 2020): `M[i][j] = ‖Σ_h A^h_ij f^h(x_j)‖₂`, the size
//! of what input j actually adds to output i, not just the weight it gets.

use std::ops::Range;

use candle_core::{IndexOp, Tensor, D};

use super::wide;
use crate::error::Result;
use crate::model::LayerInternals;

/// `probs`: `[1, H, n, n]` → `M`: `[n, n]`.
pub fn matrix(probs: &Tensor, internals: &LayerInternals) -> Result<Tensor> {
    let (a, f) = mixing_inputs(probs, internals)?;
    let rows = row_blocks(&f)?
        .into_iter()
        .map(|rows| Ok(contributions(&a, &f, rows)?.sqr()?.sum(D::Minus1)?.sqrt()?))
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::cat(&rows, 0)?)
}

/// The attention `[H, n, n]` and head values `[H, n, d]` of one layer, widened.
pub fn mixing_inputs(probs: &Tensor, internals: &LayerInternals) -> Result<(Tensor, Tensor)> {
    Ok((
        wide(&probs.squeeze(0)?)?,
        wide(&internals.head_values.squeeze(0)?)?,
    ))
}

/// `[B, n, d]`: `Σ_h A^h_ij f^h(x_j)` for the rows i in `rows` (B of them) and every j.
pub fn contributions(a: &Tensor, f: &Tensor, rows: Range<usize>) -> Result<Tensor> {
    let heads = a.dim(0)?;
    let mut sum: Option<Tensor> = None;
    for h in 0..heads {
        let weights = a.i((h, rows.clone(), ..))?.unsqueeze(2)?; // [B, n, 1]
        let term = weights.broadcast_mul(&f.i(h)?.unsqueeze(0)?)?; // [B, n, d]
        sum = Some(match sum {
            Some(s) => (s + term)?,
            None => term,
        });
    }
    Ok(sum.expect("at least one head"))
}

/// Blocks of rows whose `[B, n, d]` contributions stay near 8M values.
pub fn row_blocks(f: &Tensor) -> Result<Vec<Range<usize>>> {
    let (_, n, d) = f.dims3()?;
    let block = (8_000_000 / (n * d).max(1)).clamp(1, n.max(1));
    Ok((0..n)
        .step_by(block)
        .map(|start| start..(start + block).min(n))
        .collect())
}
