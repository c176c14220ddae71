//! Raw attention: what the target attends to in each layer, heads fused.

use candle_core::{IndexOp, Tensor};

use crate::error::Result;

/// `fused`: `[L, n, n]` (`Ā_l`) → `[L, n]` with `raw[l][j] = Ā_l[t][j]`.
pub fn raw(fused: &Tensor, target: usize) -> Result<Tensor> {
    Ok(fused.i((.., target, ..))?)
}
