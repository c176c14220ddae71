//! A small dense square matrix on the host, the form the flow engine works on.

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use super::HostReader;
use crate::error::Result;

/// A square matrix of f64, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub n: usize,
    pub data: Vec<f64>,
}

impl Matrix {
    /// One matrix per layer from a `[L, n, n]` tensor on any device.
    pub fn from_layers(tensor: &Tensor) -> Result<Vec<Matrix>> {
        let (_, n, _) = tensor.dims3()?;
        if let Some(matrices) = super::read_on_host(tensor, Split(n)) {
            return Ok(matrices);
        }
        // Elsewhere (a GPU), copied to the host as f64 first.
        let flat: Vec<f64> = tensor
            .to_device(&Device::Cpu)?
            .to_dtype(DType::F64)?
            .flatten_all()?
            .to_vec1()?;
        Ok(Split(n).read(&flat))
    }

    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }

    /// [`super::with_residual`] on one matrix on the host, for engines, benches and tests
    /// that build graphs directly.
    pub fn with_residual(&self, alpha: f64) -> Matrix {
        let augment = || -> Result<Matrix> {
            let t = Tensor::from_vec(self.data.clone(), (1, self.n, self.n), &Device::Cpu)?;
            Ok(Matrix::from_layers(&super::with_residual(&t, alpha)?)?.remove(0))
        };
        augment().expect("elementwise CPU ops on a square matrix cannot fail")
    }
}

/// A `[layers, n, n]` tensor's values as matrices.
struct Split(usize);

impl HostReader for Split {
    type Output = Vec<Matrix>;

    fn read<T: Copy + Into<f64> + Sync>(self, values: &[T]) -> Vec<Matrix> {
        let n = self.0;
        // Layers on threads of their own: at n = 512 each is 2 MiB of fresh memory to fill.
        values
            .par_chunks_exact(n * n)
            .map(|layer| Matrix {
                n,
                data: layer.iter().map(|&v| v.into()).collect(),
            })
            .collect()
    }
}
