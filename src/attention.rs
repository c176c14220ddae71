//! The attention stack `A[l][h][i][j]` on the host, head fusion, and residual augmentation
//! (Abnar & Zuidema 2020, §2: `Â = (1 - α)·Ā + α·I`).

use candle_core::{DType, Tensor};

use crate::error::{Error, Result};

/// How the heads of one layer are fused into one matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeadFusion {
    /// The paper's choice.
    #[default]
    Mean,
    /// Per entry, then each row renormalised to sum to 1.
    Max,
    /// Per entry, then each row renormalised to sum to 1.
    Min,
}

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

    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }

    /// `self · other`.
    pub fn matmul(&self, other: &Matrix) -> Matrix {
        let n = self.n;
        let mut data = vec![0.0; n * n];
        for i in 0..n {
            let out = &mut data[i * n..(i + 1) * n];
            for (k, &a) in self.row(i).iter().enumerate() {
                for (o, &b) in out.iter_mut().zip(other.row(k)) {
                    *o += a * b;
                }
            }
        }
        Matrix { n, data }
    }

    /// `(1 - alpha)·self + alpha·I`, the residual connection as attention to oneself, with
    /// each row then divided by its sum. For row-stochastic input that division changes
    /// nothing; for f32 softmax rows that miss 1 by rounding it makes α = 0.5 give exactly
    /// the paper's `(Ā + I) / rowsum`.
    pub fn with_residual(&self, alpha: f64) -> Matrix {
        let n = self.n;
        let mut out = self.clone();
        for (i, row) in out.data.chunks_mut(n).enumerate() {
            for value in row.iter_mut() {
                *value *= 1.0 - alpha;
            }
            row[i] += alpha;
        }
        out.normalise_rows();
        out
    }

    /// Divides each row by its sum (rows summing to zero stay zero).
    pub fn normalise_rows(&mut self) {
        for row in self.data.chunks_mut(self.n) {
            let sum: f64 = row.iter().sum();
            if sum > 0.0 {
                row.iter_mut().for_each(|v| *v /= sum);
            }
        }
    }
}

/// Every layer's attention probabilities for one sentence, `[layers][heads][n][n]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionStack {
    pub layers: usize,
    pub heads: usize,
    pub n: usize,
    data: Vec<f64>,
}

impl AttentionStack {
    /// From the model's per-layer tensors, each `[1, heads, n, n]`.
    pub fn from_tensors(attentions: &[Tensor]) -> Result<Self> {
        let stacked = Tensor::cat(attentions, 0)?;
        let (layers, heads, n, _) = stacked.dims4()?;
        let data = stacked
            .to_dtype(DType::F64)?
            .flatten_all()?
            .to_vec1::<f64>()?;
        Self::new(layers, heads, n, data)
    }

    /// From a flat row-major `[layers][heads][n][n]` buffer.
    pub fn new(layers: usize, heads: usize, n: usize, data: Vec<f64>) -> Result<Self> {
        if data.len() != layers * heads * n * n {
            return Err(Error::Attention(format!(
                "an attention stack of {layers} layers, {heads} heads and {n} tokens needs {} values, not {}",
                layers * heads * n * n,
                data.len()
            )));
        }
        Ok(Self {
            layers,
            heads,
            n,
            data,
        })
    }

    /// The `[n][n]` matrix of layer `l` (0-based), head `h`.
    pub fn head(&self, l: usize, h: usize) -> &[f64] {
        let size = self.n * self.n;
        let start = (l * self.heads + h) * size;
        &self.data[start..start + size]
    }

    /// `Ā_l` for every layer.
    pub fn fuse(&self, fusion: HeadFusion) -> Vec<Matrix> {
        (0..self.layers)
            .map(|l| self.fuse_layer(l, fusion))
            .collect()
    }

    fn fuse_layer(&self, l: usize, fusion: HeadFusion) -> Matrix {
        let n = self.n;
        let heads: Vec<&[f64]> = (0..self.heads).map(|h| self.head(l, h)).collect();
        let pick = |index: usize| -> f64 {
            let values = heads.iter().map(|head| head[index]);
            match fusion {
                HeadFusion::Mean => values.sum::<f64>() / self.heads as f64,
                HeadFusion::Max => values.fold(f64::NEG_INFINITY, f64::max),
                HeadFusion::Min => values.fold(f64::INFINITY, f64::min),
            }
        };
        let mut fused = Matrix {
            n,
            data: (0..n * n).map(pick).collect(),
        };
        if fusion != HeadFusion::Mean {
            fused.normalise_rows();
        }
        fused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_heads() -> AttentionStack {
        // One layer, two heads, two tokens.
        let data = vec![0.5, 0.5, 1.0, 0.0, 0.9, 0.1, 0.2, 0.8];
        AttentionStack::new(1, 2, 2, data).unwrap()
    }

    #[test]
    fn mean_fusion_averages_heads() {
        let fused = &two_heads().fuse(HeadFusion::Mean)[0];
        assert_eq!(fused.data, vec![0.7, 0.3, 0.6, 0.4]);
    }

    #[test]
    fn max_and_min_fusion_renormalise_rows() {
        let max = &two_heads().fuse(HeadFusion::Max)[0];
        let expected = [0.9 / 1.4, 0.5 / 1.4, 1.0 / 1.8, 0.8 / 1.8];
        for (got, want) in max.data.iter().zip(expected) {
            assert!((got - want).abs() < 1e-15);
        }
        let min = &two_heads().fuse(HeadFusion::Min)[0];
        let expected = [0.5 / 0.6, 0.1 / 0.6, 0.2 / 0.2, 0.0];
        for (got, want) in min.data.iter().zip(expected) {
            assert!((got - want).abs() < 1e-15);
        }
    }

    #[test]
    fn residual_matches_the_papers_renormalised_sum() {
        let a = Matrix {
            n: 2,
            data: vec![0.7, 0.3, 0.6, 0.4],
        };
        // (A + I) / rowsum, as in the paper's code.
        let expected = [1.7 / 2.0, 0.3 / 2.0, 0.6 / 2.0, 1.4 / 2.0];
        for (got, want) in a.with_residual(0.5).data.iter().zip(expected) {
            assert!((got - want).abs() < 1e-15);
        }
    }

    #[test]
    fn reads_model_tensors_in_layer_head_order() {
        let device = candle_core::Device::Cpu;
        let layer = |v: f32| Tensor::full(v, (1, 3, 2, 2), &device).unwrap();
        let stack = AttentionStack::from_tensors(&[layer(0.25), layer(0.5)]).unwrap();
        assert_eq!((stack.layers, stack.heads, stack.n), (2, 3, 2));
        assert_eq!(stack.head(1, 2), &[0.5; 4]);
        assert!(AttentionStack::new(1, 1, 2, vec![0.0; 3]).is_err());
    }
}
