//! Attention rollout (Abnar & Zuidema 2020, §3): `R_1 = Â_1`, `R_l = Â_l · R_{l-1}`.

use candle_core::Tensor;

use rayon::prelude::*;

use crate::attention::{augment_row, AsLayer, Layer};
use crate::error::Result;
use crate::linalg::matmul;

/// `augmented`: `[L, n, n]` (`Â_l`) → the joint attention `R_l` of every layer, `[L, n, n]`;
/// `R_l[i][j]` is how much of position i at layer l comes from input token j.
pub fn joint_attention(augmented: &Tensor) -> Result<Tensor> {
    let (layers, _, _) = augmented.dims3()?;
    let mut joint = vec![augmented.get(0)?];
    for l in 1..layers {
        let below = &joint[l - 1];
        joint.push(matmul(&augmented.get(l)?, below)?);
    }
    Ok(Tensor::stack(&joint, 0)?)
}

/// `augmented`: `[L, n, n]` → `[L, n]` with `rollout[l][j] = R_l[t][j]`.
///
/// One row at a time, `R_l[t] = Â_l[t] · Â_{l-1} ⋯ Â_1`: about `L²/2` vector–matrix products
/// instead of the `L` matrix products of [`joint_attention`] (at n = 512 and 12 layers, 17 M
/// multiplications instead of 3 G).
pub fn rollout(augmented: &Tensor, target: usize) -> Result<Tensor> {
    let (layers, _, _) = augmented.dims3()?;
    let rows = (0..layers)
        .map(|l| {
            let mut row = augmented.get(l)?.narrow(0, target, 1)?;
            for below in (0..l).rev() {
                row = matmul(&row, &augmented.get(below)?)?;
            }
            Ok(row.squeeze(0)?)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::stack(&rows, 0)?)
}

/// Layers as [`rollout_on_host`] reads them, one at a time from the top down: held
/// ([`AsLayer`]s), or made as each is needed ([`Augmenting`]).
pub trait RolloutLayers {
    fn count(&self) -> usize;
    /// Row `i` of layer `l`.
    fn row(&self, l: usize, i: usize) -> Vec<f64>;
    /// `f` on layer `l`.
    fn with_layer(&self, l: usize, f: &mut dyn FnMut(Layer));
}

impl<L: AsLayer> RolloutLayers for [L] {
    fn count(&self) -> usize {
        self.len()
    }

    fn row(&self, l: usize, i: usize) -> Vec<f64> {
        self[l].as_layer().row(i).to_vec()
    }

    fn with_layer(&self, l: usize, f: &mut dyn FnMut(Layer)) {
        f(self[l].as_layer())
    }
}

/// Fused layers `Ā_l` read as their residual-augmented `Â_l` (the values of
/// [`crate::attention::with_residual`], bit for bit), each made when it is read and freed
/// after: one augmented layer held at a time instead of L (at n = 8,192 and 22 layers,
/// 0.5 GB instead of 11.8).
pub struct Augmenting<'a> {
    fused: &'a [Layer<'a>],
    alpha: f64,
}

impl<'a> Augmenting<'a> {
    pub fn new(fused: &'a [Layer<'a>], alpha: f64) -> Self {
        Self { fused, alpha }
    }
}

impl RolloutLayers for Augmenting<'_> {
    fn count(&self) -> usize {
        self.fused.len()
    }

    fn row(&self, l: usize, i: usize) -> Vec<f64> {
        let mut row = vec![0.0; self.fused[l].n];
        augment_row(&mut row, self.fused[l].row(i), i, self.alpha);
        row
    }

    fn with_layer(&self, l: usize, f: &mut dyn FnMut(Layer)) {
        let fused = self.fused[l];
        let n = fused.n;
        let mut data = vec![0.0; n * n];
        data.par_chunks_exact_mut(n)
            .enumerate()
            .for_each(|(i, into)| augment_row(into, fused.row(i), i, self.alpha));
        f(Layer { n, data: &data })
    }
}

/// [`rollout`] of layers on the host, `[L][n]`. Each layer's row for `target` climbs down
/// the layers below it, and each pass takes every row still climbing one layer down, reading
/// that layer once: `L − 1` passes over memory instead of `L²/2` (and no call into the
/// tensor library, whose every product asks the system for the number of cores).
pub fn rollout_on_host(layers: &(impl RolloutLayers + ?Sized), target: usize) -> Vec<Vec<f64>> {
    let count = layers.count();
    let mut rows: Vec<Vec<f64>> = (0..count).map(|l| layers.row(l, target)).collect();
    // After the pass over layer `below`, `rows[l]` for `l > below` is `Â_l[t]·Â_{l−1}⋯Â_below`.
    for below in (0..count.saturating_sub(1)).rev() {
        let climbing = &mut rows[below + 1..];
        layers.with_layer(below, &mut |layer| {
            let mut products = vec![vec![0.0; layer.n]; climbing.len()];
            for i in 0..layer.n {
                let arcs = layer.row(i);
                for (row, product) in climbing.iter().zip(&mut products) {
                    let weight = row[i];
                    for (p, &a) in product.iter_mut().zip(arcs) {
                        *p += weight * a;
                    }
                }
            }
            climbing.swap_with_slice(&mut products);
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::Matrix;
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
        let joint: Vec<Vec<Vec<f64>>> = joint_attention(&a).unwrap().to_vec3().unwrap();
        for target in 0..2 {
            let rows: Vec<Vec<f64>> = rollout(&a, target).unwrap().to_vec2().unwrap();
            let on_host = rollout_on_host(&Matrix::from_layers(&a).unwrap()[..], target);
            for ((row, host), layer) in rows.iter().zip(&on_host).zip(&joint) {
                for ((v, h), w) in row.iter().zip(host).zip(&layer[target]) {
                    assert!((v - w).abs() < 1e-15 && (h - w).abs() < 1e-15);
                }
            }
        }
    }

    /// Four layers of five positions (so passes carry up to three rows): the rows on the
    /// host equal the joint attention's to rounding.
    #[test]
    fn rollout_on_host_equals_the_joint_attention_of_deeper_stacks() {
        let (layers, n) = (4, 5);
        // Uneven positive weights, rows normalised below.
        let values: Vec<f64> = (0..layers * n * n)
            .map(|i| ((i * 37 + 11) % 97 + 1) as f64)
            .collect();
        let a = Tensor::from_vec(values, (layers, n, n), &Device::Cpu).unwrap();
        let a = crate::attention::normalise_rows(&a).unwrap();
        let joint: Vec<Vec<Vec<f64>>> = joint_attention(&a).unwrap().to_vec3().unwrap();
        let matrices = Matrix::from_layers(&a).unwrap();
        for target in 0..n {
            let rows = rollout_on_host(&matrices[..], target);
            for (row, layer) in rows.iter().zip(&joint) {
                for (v, w) in row.iter().zip(&layer[target]) {
                    assert!((v - w).abs() < 1e-15, "{v} against {w}");
                }
            }
        }
    }

    /// Layers augmented as they are read give the rows of the layers augmented at once, bit
    /// for bit, for every target and a residual other than the default.
    #[test]
    fn augmenting_as_read_equals_augmenting_at_once() {
        let (layers, n) = (3, 6);
        let values: Vec<f64> = (0..layers * n * n)
            .map(|i| ((i * 53 + 7) % 89) as f64)
            .collect();
        let fused = Tensor::from_vec(values, (layers, n, n), &Device::Cpu).unwrap();
        let fused = crate::attention::normalise_rows(&fused).unwrap();
        let alpha = 0.3;
        let at_once =
            Matrix::from_layers(&crate::attention::with_residual(&fused, alpha).unwrap()).unwrap();
        let fused = Matrix::from_layers(&fused).unwrap();
        let fused: Vec<Layer> = fused.iter().map(AsLayer::as_layer).collect();
        let as_read = Augmenting::new(&fused, alpha);
        for target in 0..n {
            assert_eq!(
                rollout_on_host(&as_read, target),
                rollout_on_host(&at_once[..], target)
            );
        }
    }
}
