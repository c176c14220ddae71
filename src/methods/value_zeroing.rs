//! Value zeroing (Mohebbi et al. 2023): `M[i][j] = 1 − cos(x̃_i^{¬j}, x̃_i)`, how far layer
//! output i moves when input j's value vectors are zeroed in every head (its residual and
//! the attention probabilities stay). All n zeroings of a layer run as one batch (split
//! only to bound memory), each batch with the unchanged layer as its first element, so that
//! an output that zeroing cannot reach (a position that never reads j: later tokens under a
//! causal mask, or outside a sliding window) comes out bit for bit the same and its `M` is
//! exactly 0; the cosine is taken in f64. The residual is inside.

use candle_core::{DType, Tensor, D};

use super::TracedLayer;
use crate::error::Result;

/// The layer's `M` (`[n, n]`, f64) from its input `[1, n, d]`, the layer rerun on a batch
/// of it with each zeroing's mask; batches are sized by its feed-forward width.
pub fn matrix(traced: &TracedLayer) -> Result<Tensor> {
    let (layer, width, input) = (traced.rerun, traced.width, &traced.internals.input);
    let (_, n, d) = input.dims3()?;
    // Batches of about 16M values, and of at least 8 zeroings so that the unchanged
    // element each batch carries costs at most an eighth more.
    let chunk = (16_000_000 / (n * width).max(1)).max(8).min(n.max(1));
    let mut columns = Vec::new();
    for start in (0..n).step_by(chunk) {
        let count = chunk.min(n - start);
        // Batch element 0 zeroes nothing, element 1 + b zeroes token start + b.
        let keep: Vec<f32> = std::iter::once(None)
            .chain((start..start + count).map(Some))
            .flat_map(|zeroed| (0..n).map(move |k| if Some(k) == zeroed { 0.0 } else { 1.0 }))
            .collect();
        let mask =
            Tensor::from_vec(keep, (count + 1, n), input.device())?.to_dtype(input.dtype())?;
        let batch = input.broadcast_as((count + 1, n, d))?.contiguous()?;
        let outputs = layer(&batch, Some(&mask))?.to_dtype(DType::F64)?;
        let unchanged = outputs.get(0)?; // [n(i), d]
        let zeroed = outputs.narrow(0, 1, count)?;
        // cos over d between zeroed[b, i] and unchanged[i] → [count(j), n(i)].
        let dot = zeroed
            .broadcast_mul(&unchanged.unsqueeze(0)?)?
            .sum(D::Minus1)?;
        // √(‖a‖²‖b‖²), not ‖a‖‖b‖: where a = b, √(s·s) = s exactly and 1 − cos is exactly 0.
        let norms = zeroed
            .sqr()?
            .sum(D::Minus1)?
            .broadcast_mul(&unchanged.sqr()?.sum(D::Minus1)?.unsqueeze(0)?)?
            .sqrt()?;
        let cos = dot.broadcast_div(&norms)?;
        // 1 − cos is never negative; rounding can make it −1e-16.
        columns.push(cos.affine(-1.0, 1.0)?.relu()?.t()?);
    }
    Ok(Tensor::cat(&columns, 1)?.contiguous()?)
}
