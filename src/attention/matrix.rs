//! Dense square matrices on the host, the form the flow engine works on: owned
//! ([`Matrix`]) or borrowed ([`Layer`]), such as the layers of a stack held in a tensor's
//! own host memory, read there without a copy.

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

/// A square matrix of f64, row-major, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Layer<'a> {
    pub n: usize,
    pub data: &'a [f64],
}

impl<'a> Layer<'a> {
    /// The layers of a `[layers, n, n]` stack held row-major in `values`.
    pub fn split(values: &'a [f64], n: usize) -> Vec<Layer<'a>> {
        values
            .chunks_exact(n * n)
            .map(|data| Layer { n, data })
            .collect()
    }

    pub fn row(&self, i: usize) -> &'a [f64] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }
}

/// Square matrices that lend their values as a [`Layer`]: what the flow engine takes.
pub trait AsLayer: Sync {
    fn as_layer(&self) -> Layer<'_>;
}

impl AsLayer for Matrix {
    fn as_layer(&self) -> Layer<'_> {
        Layer {
            n: self.n,
            data: &self.data,
        }
    }
}

impl AsLayer for Layer<'_> {
    fn as_layer(&self) -> Layer<'_> {
        *self
    }
}

/// A `[layers, n, n]` tensor's layers as the flow engine reads them on the host: where the
/// tensor holds them there as f64, its own values, read in place (at n = 512 a copy is 2 MiB
/// of fresh memory per layer); elsewhere, or of another type, a copy.
pub struct HostLayers {
    tensor: Tensor,
    n: usize,
    copied: Option<Vec<Matrix>>,
}

impl HostLayers {
    pub fn new(tensor: &Tensor) -> Result<Self> {
        let (_, n, _) = tensor.dims3()?;
        let copied = match in_place(tensor, |_| ()) {
            Some(()) => None,
            None => Some(Matrix::from_layers(tensor)?),
        };
        Ok(Self {
            tensor: tensor.clone(),
            n,
            copied,
        })
    }

    /// `f` on the layers.
    pub fn read<T>(&self, f: impl FnOnce(&[Layer]) -> T) -> T {
        match &self.copied {
            Some(matrices) => f(&matrices.iter().map(AsLayer::as_layer).collect::<Vec<_>>()),
            None => in_place(&self.tensor, |values| f(&Layer::split(values, self.n)))
                .expect("a tensor's storage keeps its device and type"),
        }
    }
}

/// `f` on the values of a contiguous f64 tensor in host memory, row-major, where they lie;
/// `None` for a tensor elsewhere or of another type.
fn in_place<T>(tensor: &Tensor, f: impl FnOnce(&[f64]) -> T) -> Option<T> {
    use candle_core::{CpuStorage, Storage};
    let (storage, layout) = tensor.storage_and_layout();
    match (&*storage, layout.contiguous_offsets()) {
        (Storage::Cpu(CpuStorage::F64(values)), Some((start, end))) => Some(f(&values[start..end])),
        _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_layers_read_in_place_and_copied_give_the_split_values() {
        let values: Vec<f64> = (0..18).map(|v| v as f64 / 8.0).collect();
        let f64_stack = Tensor::from_vec(values, (2, 3, 3), &Device::Cpu).unwrap();
        let f32_stack = f64_stack.to_dtype(DType::F32).unwrap();
        let expected = Matrix::from_layers(&f64_stack).unwrap();
        for (stack, in_place) in [(&f64_stack, true), (&f32_stack, false)] {
            let layers = HostLayers::new(stack).unwrap();
            assert_eq!(layers.copied.is_none(), in_place);
            layers.read(|read| {
                assert_eq!(read.len(), 2);
                for (layer, matrix) in read.iter().zip(&expected) {
                    assert_eq!((layer.n, layer.data), (matrix.n, &matrix.data[..]));
                    assert_eq!(layer.row(1), matrix.row(1));
                    assert_eq!(layer.get(2, 0), matrix.get(2, 0));
                }
            });
        }
        // A stack transposed in place is not contiguous: copied, in its logical order.
        let transposed = f64_stack.transpose(1, 2).unwrap();
        let layers = HostLayers::new(&transposed).unwrap();
        assert!(layers.copied.is_some());
        layers.read(|read| assert_eq!(read[0].get(0, 1), expected[0].get(1, 0)));
    }
}
