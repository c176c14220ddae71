//! A small dense square matrix on the host, the form the flow engine works on.

use candle_core::{DType, Device, Tensor};

use crate::error::Result;

/// A square matrix of f64, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub n: usize,
    pub data: Vec<f64>,
}

impl Matrix {
    pub fn identity(n: usize) -> Self {
        let mut data = vec![0.0; n * n];
        for i in 0..n {
            data[i * n + i] = 1.0;
        }
        Self { n, data }
    }

    /// One matrix per layer from a `[L, n, n]` tensor on any device.
    pub fn from_layers(tensor: &Tensor) -> Result<Vec<Matrix>> {
        let (layers, n, _) = tensor.dims3()?;
        let flat: Vec<f64> = tensor
            .to_device(&Device::Cpu)?
            .to_dtype(DType::F64)?
            .flatten_all()?
            .to_vec1()?;
        Ok((0..layers)
            .map(|l| Matrix {
                n,
                data: flat[l * n * n..(l + 1) * n * n].to_vec(),
            })
            .collect())
    }

    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }

    /// `(1 - alpha)·self + alpha·I` with each row then divided by its sum: the host twin
    /// of [`super::with_residual`], for engines and tests that build graphs directly.
    pub fn with_residual(&self, alpha: f64) -> Matrix {
        let n = self.n;
        let mut out = self.clone();
        for (i, row) in out.data.chunks_mut(n).enumerate() {
            for value in row.iter_mut() {
                *value *= 1.0 - alpha;
            }
            row[i] += alpha;
            let sum: f64 = row.iter().sum();
            if sum > 0.0 {
                row.iter_mut().for_each(|v| *v /= sum);
            }
        }
        out
    }
}
