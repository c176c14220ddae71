//! Value zeroing (Mohebbi et al. 2023): `M[i][j] = 1 − cos(x̃_i^{¬j}, x̃_i)`, how far layer
//! output i moves when input j's value vectors are zeroed in every head (its residual and
//! the attention probabilities stay). All n zeroings of a layer run as one batch (split
//! only to bound memory); the cosine is taken in f64. The residual is inside.

use candle_core::{DType, Tensor, D};

use crate::error::Result;

/// A layer's `M` (`[n, n]`, f64) from its input `[1, n, d]`: `layer` runs it on a batch of
/// inputs `[b, n, d]`, each position's value vectors multiplied by a mask `[b, n]`; `width`
/// is its feed-forward width (batches are sized by it).
pub fn matrix(
    layer: impl Fn(&Tensor, Option<&Tensor>) -> Result<Tensor>,
    width: usize,
    input: &Tensor,
) -> Result<Tensor> {
    let (_, n, d) = input.dims3()?;
    let unchanged = layer(input, None)?.squeeze(0)?;
    let unchanged = unchanged.to_dtype(DType::F64)?; // [n(i), d]
    let chunk = (16_000_000 / (n * width).max(1)).clamp(1, n.max(1));
    let mut columns = Vec::new();
    for start in (0..n).step_by(chunk) {
        let count = chunk.min(n - start);
        // Batch element b zeroes token start + b.
        let keep: Vec<f32> = (start..start + count)
            .flat_map(|j| (0..n).map(move |k| if k == j { 0.0 } else { 1.0 }))
            .collect();
        let mask = Tensor::from_vec(keep, (count, n), input.device())?.to_dtype(input.dtype())?;
        let batch = input.broadcast_as((count, n, d))?.contiguous()?;
        let zeroed = layer(&batch, Some(&mask))?.to_dtype(DType::F64)?;
        // cos over d between zeroed[b, i] and unchanged[i] → [count(j), n(i)].
        let dot = zeroed
            .broadcast_mul(&unchanged.unsqueeze(0)?)?
            .sum(D::Minus1)?;
        let norms = zeroed
            .sqr()?
            .sum(D::Minus1)?
            .sqrt()?
            .broadcast_mul(&unchanged.sqr()?.sum(D::Minus1)?.sqrt()?.unsqueeze(0)?)?;
        let cos = dot.broadcast_div(&norms)?;
        // 1 − cos is never negative; rounding can make it −1e-16 where nothing changed.
        columns.push(cos.affine(-1.0, 1.0)?.relu()?.t()?);
    }
    Ok(Tensor::cat(&columns, 1)?.contiguous()?)
}
