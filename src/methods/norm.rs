//! Norm-based attention (Kobayashi et al. 2020): `M[i][j] = ‖Σ_h A^h_ij f^h(x_j)‖₂`, the size
//! of what input j actually adds to output i, not just the weight it gets.

use candle_core::{Tensor, D};

use super::{mixing_inputs, TracedLayer};
use crate::error::Result;
use crate::linalg::matmul;

/// The layer's `M`: `[n, n]`.
///
/// Without building the n × n × d vectors: with `a_ij = (A^h_ij)_h` and the Gram matrix
/// `G_j = (⟨f^h(x_j), f^h'(x_j)⟩)_{h,h'}`, `‖Σ_h A^h_ij f^h(x_j)‖² = a_ijᵀ G_j a_ij`, which
/// costs n²H² instead of n²Hd.
pub fn matrix(layer: &TracedLayer) -> Result<Tensor> {
    let (a, f) = mixing_inputs(layer.probs, layer.internals)?;
    let by_column = a.permute((2, 1, 0))?.contiguous()?; // [n(j), n(i), H]
    let per_token = f.transpose(0, 1)?.contiguous()?; // [n(j), H, d]
    let gram = matmul(&per_token, &per_token.t()?)?; // [n(j), H, H]
    let squared = matmul(&by_column, &gram)?.mul(&by_column)?.sum(D::Minus1)?; // [n(j), n(i)]
                                                                               // Rounding can leave −1e-17 where the exact value is 0.
    Ok(squared.relu()?.sqrt()?.t()?.contiguous()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LayerInternals;
    use candle_core::Device;

    fn internals(head_values: Tensor) -> LayerInternals {
        let zeros = Tensor::zeros((1, 2, 2), candle_core::DType::F64, &Device::Cpu).unwrap();
        LayerInternals {
            input: zeros,
            head_values,
            norm_weight: None,
            norm_scale: None,
            norm_bias: None,
            output_bias: None,
            row_scale: None,
        }
    }

    fn matrix_of(probs: &[[[f64; 2]; 2]], values: &[[[f64; 2]; 2]]) -> Vec<Vec<f64>> {
        let tensor = |a: &[[[f64; 2]; 2]]| {
            let flat: Vec<f64> = a.iter().flatten().flatten().copied().collect();
            Tensor::from_vec(flat, (1, a.len(), 2, 2), &Device::Cpu).unwrap()
        };
        let (probs, values) = (tensor(probs), tensor(values));
        let rerun = |_: &Tensor, _: Option<&Tensor>| unreachable!("norm reruns no layer");
        let internals = &internals(values);
        let layer = TracedLayer {
            probs: &probs,
            internals,
            rerun: &rerun,
            width: 0,
        };
        matrix(&layer).unwrap().to_vec2().unwrap()
    }

    /// One head, f(x_0) = (3, 4) of norm 5, f(x_1) = (0, 2) of norm 2: each entry is the
    /// weight times the norm, 0.75·5 = 3.75, 0.25·2 = 0.5, 0.5·5 = 2.5, 0.5·2 = 1.
    #[test]
    fn one_head_scales_each_value_norm_by_its_weight() {
        let m = matrix_of(&[[[0.75, 0.25], [0.5, 0.5]]], &[[[3.0, 4.0], [0.0, 2.0]]]);
        assert_eq!(m, vec![vec![3.75, 0.5], vec![2.5, 1.0]]);
    }

    /// Two heads whose value vectors for token 0 point opposite ways: the norm of their
    /// weighted sum, ‖0.5·(1, 0) + 0.5·(−1, 0)‖ = 0, not the sum of their norms.
    #[test]
    fn heads_are_summed_before_the_norm() {
        let half = [[0.5, 0.5], [0.5, 0.5]];
        let m = matrix_of(
            &[half, half],
            &[[[1.0, 0.0], [0.0, 2.0]], [[-1.0, 0.0], [0.0, 2.0]]],
        );
        assert_eq!(m[0][0], 0.0);
        // Token 1: ‖0.5·(0, 2) + 0.5·(0, 2)‖ = 2.
        assert_eq!(m[1][1], 2.0);
    }
}
