//! Attention rollout (Abnar & Zuidema 2020, §3): `R_1 = Â_1`, `R_l = Â_l · R_{l-1}`.

use crate::attention::Matrix;

/// `augmented[l]` is `Â_{l+1}`; returns `[L][n]` with `rollout[l][j] = R_{l+1}[t][j]`.
pub fn rollout(augmented: &[Matrix], target: usize) -> Vec<Vec<f64>> {
    let mut rows = Vec::with_capacity(augmented.len());
    let mut joint: Option<Matrix> = None;
    for a in augmented {
        let next = match &joint {
            None => a.clone(),
            Some(below) => a.matmul(below),
        };
        rows.push(next.row(target).to_vec());
        joint = Some(next);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplies_layers_from_the_bottom_up() {
        let a1 = Matrix {
            n: 2,
            data: vec![0.8, 0.2, 0.4, 0.6],
        };
        let a2 = Matrix {
            n: 2,
            data: vec![0.5, 0.5, 0.1, 0.9],
        };
        let rows = rollout(&[a1, a2], 0);
        assert_eq!(rows[0], vec![0.8, 0.2]);
        // Row 0 of a2·a1 = 0.5·[0.8, 0.2] + 0.5·[0.4, 0.6].
        assert!((rows[1][0] - 0.6).abs() < 1e-15 && (rows[1][1] - 0.4).abs() < 1e-15);
    }
}
