//! From mixing matrices to maps (SPEC §8): `layer` is `M_l[t]`; `rollout` and `flow` are §1's
//! on `(1−α)·M_l + α·I` where the residual is not in M, on `M_l` itself where it is; for
//! grad-attention Chefer's additive rule `R_l = R_{l−1} + M_l·R_{l−1}` instead, and flow on
//! `I + M_l` row-normalised.

use candle_core::{IndexOp, Tensor};

use super::{MethodMaps, Mixing};
use crate::attention::{normalise_rows, with_residual, Matrix};
use crate::error::Result;
use crate::relevance::{flow, joint_attention};

/// `matrices`: `[L, n, n]` f64, `M_l` before row normalisation.
pub fn aggregate(
    matrices: &Tensor,
    mixing: Mixing,
    target: usize,
    alpha: f64,
) -> Result<MethodMaps> {
    let (_, n, _) = matrices.dims3()?;
    let rows = |t: &Tensor| -> Result<Vec<Vec<f64>>> {
        Ok(super::host(&t.i((.., target, ..))?)?.to_vec2()?)
    };
    if mixing == Mixing::GradAttention {
        let eye = Tensor::eye(n, matrices.dtype(), matrices.device())?;
        let steps = matrices.broadcast_add(&eye)?;
        let joint = joint_attention(&steps)?;
        return Ok(MethodMaps {
            layer: rows(matrices)?,
            rollout: rows(&normalise_rows(&joint)?)?,
            flow: flow(&Matrix::from_layers(&normalise_rows(&steps)?)?, target),
        });
    }
    // The model's softmax rows as they are; every other matrix normalised.
    let normalised = match mixing {
        Mixing::Attention => matrices.clone(),
        _ => normalise_rows(matrices)?,
    };
    let augmented = match mixing.residual_inside() {
        true => normalised.clone(),
        false => with_residual(&normalised, alpha)?,
    };
    Ok(MethodMaps {
        layer: rows(&normalised)?,
        rollout: rows(&joint_attention(&augmented)?)?,
        flow: flow(&Matrix::from_layers(&augmented)?, target),
    })
}
