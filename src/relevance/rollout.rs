//! Attention rollout (Abnar & Zuidema 2020, §3): `R_1 = Â_1`, `R_l = Â_l · R_{l-1}`.

use candle_core::Tensor;

use crate::error::Result;

/// `augmented`: `[L, n, n]` (`Â_l`) → the joint attention `R_l` of every layer, `[L, n, n]`;
/// `R_l[i][j]` is how much of position i at layer l comes from input token j.
pub fn joint_attention(augmented: &Tensor) -> Result<Tensor> {
    let (layers, _, _) = augmented.dims3()?;
    let mut joint = vec![augmented.get(0)?];
    for l in 1..layers {
        let below = &joint[l - 1];
        joint.push(augmented.get(l)?.matmul(below)?);
    }
    Ok(Tensor::stack(&joint, 0)?)
}

/// `augmented`: `[L, n, n]` → `[L, n]` with `rollout[l][j] = R_l[t][j]`.
pub fn rollout(augmented: &Tensor, target: usize) -> Result<Tensor> {
    Ok(joint_attention(augmented)?
        .narrow(1, target, 1)?
        .squeeze(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn multiplies_layers_from_the_bottom_up() {
        let a = Tensor::new(
            &[[[0.8, 0.2], [0.4, 0.6]], [[0.5, 0.5], [0.1, 0.9]]],
            &Device::Cpu,
        )
        .unwrap();
        let rows: Vec<Vec<f64>> = rollout(&a, 0).unwrap().to_vec2().unwrap();
        assert_eq!(rows[0], vec![0.8, 0.2]);
        // Row 0 of a2·a1 = 0.5·[0.8, 0.2] + 0.5·[0.4, 0.6].
        assert!((rows[1][0] - 0.6).abs() < 1e-15 && (rows[1][1] - 0.4).abs() < 1e-15);
        assert_eq!(joint_attention(&a).unwrap().dims(), &[2, 2, 2]);
    }
}
