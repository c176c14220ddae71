//! Raw attention: what the target attends to in each layer, heads fused.

use crate::attention::Matrix;

/// `fused[l]` is `Ā_{l+1}`; returns `[L][n]` with `raw[l][j] = Ā_{l+1}[t][j]`.
pub fn raw(fused: &[Matrix], target: usize) -> Vec<Vec<f64>> {
    fused.iter().map(|a| a.row(target).to_vec()).collect()
}
