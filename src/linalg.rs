//! Matrix products that every candle backend takes, and the dense layer built on them.
//!
//! candle's CPU matmul reads operands of any strides. Its CUDA matmul (cuBLAS's strided
//! batched gemm) takes an operand only when its last two dimensions are row-major or
//! column-major and its batch dimensions step evenly, and refuses the rest at run time: a
//! row of every sequence in a batch (`x.i((.., t, ..))`), a block of rows cut from a wider
//! matrix. CPU tests cannot see that, so every product in the crate goes through [`matmul`]
//! or [`broadcast_matmul`] (clippy.toml forbids candle's own methods and `candle_nn::Linear`).
//! They apply the CUDA backend's rule ([`gemm_ready`]) on every device and copy an operand
//! only when it fails the rule, so the CPU runs exactly the operands a GPU is given.

use candle_core::{Module, Result, Shape, Tensor};

/// `a · b` over the last two dimensions, batched over the others (at most two), on any
/// backend. An operand a GPU would refuse is made contiguous first.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    #[allow(clippy::disallowed_methods)] // the one place candle's product is called
    gemm_operand(a)?.matmul(&gemm_operand(b)?)
}

/// [`matmul`] with the batch dimensions broadcast against each other, as numpy's `@` does.
pub fn broadcast_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (a_dims, b_dims) = (a.dims(), b.dims());
    let (a_batch, b_batch) = match (a_dims.len().checked_sub(2), b_dims.len().checked_sub(2)) {
        (Some(a_batch), Some(b_batch)) => (a_batch, b_batch),
        _ => candle_core::bail!("a matrix product needs matrices, got {a_dims:?} and {b_dims:?}"),
    };
    let batch = Shape::from(&a_dims[..a_batch])
        .broadcast_shape_binary_op(&Shape::from(&b_dims[..b_batch]), "broadcast_matmul")?;
    let widen = |matrix: &[usize]| [batch.dims(), matrix].concat();
    matmul(
        &a.broadcast_as(widen(&a_dims[a_batch..]))?,
        &b.broadcast_as(widen(&b_dims[b_batch..]))?,
    )
}

/// `t` itself where CUDA's gemm takes it, else a contiguous copy; an error where no copy
/// helps (more than two batch dimensions), on every device alike.
fn gemm_operand(t: &Tensor) -> Result<Tensor> {
    let layout = t.layout();
    if gemm_ready(layout.dims(), layout.stride()) {
        return Ok(t.clone());
    }
    let copy = t.contiguous()?;
    if !gemm_ready(copy.dims(), copy.stride()) {
        candle_core::bail!(
            "a matrix product over {:?}: at most two batch dimensions are supported on a GPU",
            t.dims()
        );
    }
    Ok(copy)
}

/// Whether candle's CUDA backend accepts an operand of these dimensions and strides in a
/// matrix product (its `gemm_config`, candle-core 0.11): the last two dimensions `[r, c]`
/// row-major (strides `[c, 1]`) or column-major (`[1, r]`), the stride of a dimension of
/// size 1 not looked at; and at most two batch dimensions, the outer one stepping by the inner one's
/// stride times its size unless either has size 1.
pub fn gemm_ready(dims: &[usize], strides: &[usize]) -> bool {
    let k = dims.len();
    if k < 2 || strides.len() != k {
        return false;
    }
    let (r, c) = (dims[k - 2], dims[k - 1]);
    let (s_r, s_c) = (strides[k - 2], strides[k - 1]);
    let row_major = (s_c == 1 || c == 1) && (s_r == c || r == 1);
    let column_major = (s_c == r || c == 1) && (s_r == 1 || r == 1);
    let batch = match (&dims[..k - 2], &strides[..k - 2]) {
        ([], []) | ([_], [_]) => true,
        ([outer, inner], [s_outer, s_inner]) => {
            *s_outer == s_inner * inner || *outer == 1 || *inner == 1
        }
        _ => false,
    };
    (row_major || column_major) && batch
}

/// A fully connected layer, `x · Wᵀ + b` over the last dimension, with `W` stored `[out, in]`
/// as transformers' `nn.Linear` stores it.
#[derive(Debug, Clone)]
pub struct Dense {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Dense {
    /// `weight`: `[out, in]`; `bias`: `[out]`.
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self { weight, bias }
    }

    /// `[out, in]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The layer of outputs `start..start + len` alone (one part of a fused projection).
    pub fn rows(&self, start: usize, len: usize) -> Result<Self> {
        let part = |t: &Tensor| t.narrow(0, start, len)?.contiguous();
        Ok(Self {
            weight: part(&self.weight)?,
            bias: self.bias.as_ref().map(part).transpose()?,
        })
    }
}

impl Module for Dense {
    /// `x`: `[..., in]` → `[..., out]`, as one `[rows, in] · [in, out]` product (a strided
    /// `x` copied first: one copy costs less than a batched product over its strides).
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut dims = x.dims().to_vec();
        let Some(&width) = dims.last() else {
            candle_core::bail!("a dense layer needs at least one dimension");
        };
        let rows = x.elem_count() / width.max(1);
        let flat = x.contiguous()?.reshape((rows, width))?;
        *dims.last_mut().expect("not empty") = self.weight.dim(0)?;
        let product = matmul(&flat, &self.weight.t()?)?.reshape(dims)?;
        match &self.bias {
            Some(bias) => product.broadcast_add(bias),
            None => Ok(product),
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, IndexOp};

    use super::*;

    fn counting(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
    }

    /// The product computed entry by entry from the values, whatever the layout.
    fn by_hand(a: &Tensor, b: &Tensor) -> Vec<Vec<f32>> {
        let (a, b) = (a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap());
        a.iter()
            .map(|row| {
                (0..b[0].len())
                    .map(|j| row.iter().zip(&b).map(|(x, b_row)| x * b_row[j]).sum())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_layout_that_broke_evaluate_on_cuda_is_refused_then_copied() {
        // The H100 run's error: lhs [10, 32] with strides [320, 1] from offset 224, one
        // position of a batch of ten sequences; rhs a Linear's transposed weight.
        let batch = counting(&[10, 10, 32]);
        let row = batch.i((.., 7, ..)).unwrap();
        assert_eq!(row.dims(), &[10, 32]);
        assert_eq!(row.stride(), &[320, 1]);
        assert_eq!(row.layout().start_offset(), 224);
        assert!(!gemm_ready(row.dims(), row.stride()));
        let weight = counting(&[32, 32]);
        let w_t = weight.t().unwrap();
        assert_eq!(w_t.stride(), &[1, 32]);
        assert!(
            gemm_ready(w_t.dims(), w_t.stride()),
            "a transposed view needs no copy"
        );
        let product = matmul(&row, &w_t).unwrap();
        assert_eq!(product.to_vec2::<f32>().unwrap(), by_hand(&row, &w_t));
    }

    #[test]
    fn the_rule_follows_cublas_layouts() {
        // Row-major, column-major; a dimension of size 1 may have any stride.
        assert!(gemm_ready(&[4, 3], &[3, 1]));
        assert!(gemm_ready(&[4, 3], &[1, 4]));
        assert!(gemm_ready(&[1, 3], &[99, 1]));
        assert!(gemm_ready(&[4, 1], &[1, 7]));
        // A column cut from a wider matrix steps by its width: refused.
        assert!(!gemm_ready(&[4, 1], &[5, 7]));
        // A block of a wider matrix, either way round.
        assert!(!gemm_ready(&[4, 3], &[8, 1]));
        assert!(!gemm_ready(&[4, 3], &[1, 8]));
        // Batches: even steps, broadcast (stride 0), size-1 dimensions; not three.
        assert!(gemm_ready(&[2, 4, 3], &[12, 3, 1]));
        assert!(gemm_ready(&[2, 4, 3], &[0, 3, 1]));
        assert!(gemm_ready(&[2, 5, 4, 3], &[60, 12, 3, 1]));
        assert!(gemm_ready(&[2, 5, 4, 3], &[0, 0, 1, 4]));
        assert!(!gemm_ready(&[2, 5, 4, 3], &[12, 24, 3, 1]));
        assert!(gemm_ready(&[1, 5, 4, 3], &[7, 24, 3, 1]));
        assert!(!gemm_ready(&[2, 2, 2, 4, 3], &[48, 24, 12, 3, 1]));
    }

    #[test]
    fn strided_views_give_the_contiguous_product() {
        // A head-split, transposed and sliced batch, as attention and the heads make them.
        let x = counting(&[2, 6, 4, 5]).transpose(1, 2).unwrap(); // [2, 4, 6, 5]
        let y = counting(&[2, 4, 7, 5])
            .narrow(2, 1, 5)
            .unwrap()
            .t()
            .unwrap(); // [2, 4, 5, 5]
        let got = matmul(&x, &y).unwrap();
        #[allow(clippy::disallowed_methods)]
        let want = x
            .contiguous()
            .unwrap()
            .matmul(&y.contiguous().unwrap())
            .unwrap();
        assert_eq!(
            got.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            want.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
        let three = counting(&[2, 2, 2, 3, 3]);
        assert!(
            matmul(&three, &three).is_err(),
            "more than two batch dimensions"
        );
    }

    #[test]
    fn dense_is_x_times_w_transposed_plus_b() {
        let x = counting(&[3, 4, 5]);
        let (w, b) = (
            counting(&[2, 5]),
            Tensor::new(&[0.5f32, -1.0], &Device::Cpu).unwrap(),
        );
        let dense = Dense::new(w.clone(), Some(b));
        let y = dense.forward(&x.i((.., 2, ..)).unwrap()).unwrap();
        let mut want = by_hand(&x.i((.., 2, ..)).unwrap(), &w.t().unwrap());
        for row in &mut want {
            row[0] += 0.5;
            row[1] -= 1.0;
        }
        assert_eq!(y.to_vec2::<f32>().unwrap(), want);
        assert_eq!(dense.forward(&x).unwrap().dims(), &[3, 4, 2]);
    }
}
