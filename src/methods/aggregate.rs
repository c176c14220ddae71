//! From mixing matrices to maps (SPEC §8): `layer` is `M_l[t]`; `rollout` and `flow` are §1's
//! on `(1−α)·M_l + α·I` where the residual is not in M, on `M_l` itself where it is; for
//! grad-attention Chefer's additive rule `R_l = R_{l−1} + M_l·R_{l−1}` instead, and flow on
//! `I + M_l` row-normalised.

use candle_core::{IndexOp, Tensor};

use super::{MethodMaps, Mixing};
use crate::attention::{normalise_rows, with_residual, HostLayers};
use crate::error::Result;
use crate::relevance::{flow_with, joint_attention, no_progress, ProgressFn};

/// `matrices`: `[L, n, n]` f64, `M_l` before row normalisation.
pub fn aggregate(
    matrices: &Tensor,
    mixing: Mixing,
    target: usize,
    alpha: f64,
) -> Result<MethodMaps> {
    aggregate_with(matrices, mixing, target, alpha, true, &no_progress)
}

/// [`aggregate`], its flow only with `flow`, telling `progress` how far the flow has got.
pub fn aggregate_with(
    matrices: &Tensor,
    mixing: Mixing,
    target: usize,
    alpha: f64,
    flow: bool,
    progress: &ProgressFn,
) -> Result<MethodMaps> {
    let propagated = Propagated::of(matrices, mixing, alpha)?;
    Ok(MethodMaps {
        layer: propagated.layer(target)?,
        rollout: propagated.rollout(target)?,
        flow: match flow {
            true => Some(propagated.flow_with(target, progress)?),
            false => None,
        },
    })
}

/// One method's matrices made ready for any number of targets: every row of every map.
pub struct Propagated {
    /// `[L, n, n]`: the rows of the `layer` map.
    layer: Tensor,
    /// `[L, n, n]`: the rows of the rollout.
    rollout: Tensor,
    /// The matrices flow runs on.
    capacities: HostLayers,
}

impl Propagated {
    /// `matrices`: `[L, n, n]` f64, `M_l` before row normalisation.
    pub fn of(matrices: &Tensor, mixing: Mixing, alpha: f64) -> Result<Self> {
        let (_, n, _) = matrices.dims3()?;
        if mixing.needs_score() {
            let eye = Tensor::eye(n, matrices.dtype(), matrices.device())?;
            let steps = matrices.broadcast_add(&eye)?;
            return Ok(Self {
                layer: matrices.clone(),
                rollout: normalise_rows(&joint_attention(&steps)?)?,
                capacities: HostLayers::new(&normalise_rows(&steps)?)?,
            });
        }
        // The model's softmax rows as they are; every other matrix normalised.
        let normalised = match mixing {
            Mixing::ATTENTION => matrices.clone(),
            _ => normalise_rows(matrices)?,
        };
        let augmented = match mixing.residual_inside() {
            true => normalised.clone(),
            false => with_residual(&normalised, alpha)?,
        };
        Ok(Self {
            layer: normalised,
            rollout: joint_attention(&augmented)?,
            capacities: HostLayers::new(&augmented)?,
        })
    }

    /// The `layer` map of `target`, `[L][n]`.
    pub fn layer(&self, target: usize) -> Result<Vec<Vec<f64>>> {
        rows(&self.layer, target)
    }

    /// The `rollout` map of `target`, `[L][n]`.
    pub fn rollout(&self, target: usize) -> Result<Vec<Vec<f64>>> {
        rows(&self.rollout, target)
    }

    /// The `flow` map of `target`, `[L][n]`, telling `progress` how far it has got.
    pub fn flow_with(&self, target: usize, progress: &ProgressFn) -> Result<Vec<Vec<f64>>> {
        self.capacities
            .read(|capacities| flow_with(capacities, target, progress))
    }
}

/// Row `target` of every layer of `[L, n, n]`, on the host.
fn rows(t: &Tensor, target: usize) -> Result<Vec<Vec<f64>>> {
    Ok(super::host(&t.i((.., target, ..))?)?.to_vec2()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// M_1 = [[0.5, 0], [0, 0]], M_2 = [[0, 1], [0, 0]], t = 0. Chefer's rule:
    /// R_1 = I + M_1 = [[1.5, 0], [0, 1]], row 0 normalised (1, 0);
    /// R_2 = (I + M_2)·R_1 = [[1, 1], [0, 1]]·R_1 = [[1.5, 1], [0, 1]], row 0 → (0.6, 0.4).
    /// `layer` is M_l[0] as it is.
    #[test]
    fn grad_attention_adds_layers_by_chefers_rule() {
        let m = Tensor::new(
            &[[[0.5, 0.0], [0.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]],
            &Device::Cpu,
        )
        .unwrap();
        let maps = aggregate(&m, Mixing::GRAD_ATTENTION, 0, 0.5).unwrap();
        assert_eq!(maps.layer, vec![vec![0.5, 0.0], vec![0.0, 1.0]]);
        assert_eq!(maps.rollout[0], vec![1.0, 0.0]);
        assert!((maps.rollout[1][0] - 0.6).abs() < 1e-15);
        assert!((maps.rollout[1][1] - 0.4).abs() < 1e-15);
        // Flow on (I + M_l) row-normalised: layer 1 = [[1, 0], [0, 1]] from 0 reaches 0 only.
        assert_eq!(maps.flow.unwrap()[0], vec![1.0, 0.0]);
    }

    /// A method whose M holds the residual is rolled out as it is (rows normalised), one
    /// without it gets α·I first: the same M gives different rollouts.
    #[test]
    fn residual_is_added_only_where_m_lacks_it() {
        let m = Tensor::new(&[[[0.0, 2.0], [1.0, 1.0]]], &Device::Cpu).unwrap();
        let inside = aggregate(&m, "value-zeroing".parse().unwrap(), 0, 0.5).unwrap();
        assert_eq!(inside.layer[0], vec![0.0, 1.0]);
        assert_eq!(inside.rollout[0], vec![0.0, 1.0]);
        let outside = aggregate(&m, "norm".parse().unwrap(), 0, 0.5).unwrap();
        assert_eq!(outside.layer[0], vec![0.0, 1.0]);
        assert_eq!(outside.rollout[0], vec![0.5, 0.5]);
    }
}
