//! The attention stack `A[l][h][i][j]`, head fusion, and residual augmentation
//! (Abnar & Zuidema 2020, §2: `Â = (1 - α)·Ā + α·I`), as tensors on the model's device.

mod file;
mod matrix;
mod npy;

use candle_core::{DType, Device, Tensor, D};
use rayon::prelude::*;

pub use file::{checked_attention, read_attention_file, read_fused_attention_file};
pub use matrix::{AsLayer, HostLayers, Layer, Matrix};

use crate::error::{Error, Result};

/// `sums[l][h]`: head h of layer l's sum. Probabilities are bounded, so a head's sum is
/// finite exactly when all its values are: one that is not is an error naming the head.
fn check_finite(sums: &[Vec<f64>]) -> Result<()> {
    for (layer, heads) in sums.iter().enumerate() {
        if let Some(head) = heads.iter().position(|s| !s.is_finite()) {
            return Err(Error::NotFinite {
                what: format!("the attention of layer {} head {head}", layer + 1),
            });
        }
    }
    Ok(())
}

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

/// Every head's attention in one layer: what a head view draws
/// ([`crate::Explainer::layer_heads`], [`crate::explain::generation::CausalExplainer::layer_heads`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct LayerHeads {
    pub tokens: Vec<String>,
    /// `[H][n][n]`: row i is what position i attends.
    pub heads: Vec<Vec<Vec<f64>>>,
}

impl LayerHeads {
    /// The 0-based index of layer `layer` (1 to `layers`), or the error naming the layers.
    pub fn index(layer: usize, layers: usize) -> Result<usize> {
        (layer.checked_sub(1).filter(|&l| l < layers))
            .ok_or(Error::LayerOutOfRange { layer, layers })
    }

    /// One layer's `probs` (`[H, n, n]`, on any device) over `tokens`, on the host.
    pub fn new(tokens: Vec<String>, probs: &Tensor) -> Result<Self> {
        let heads = probs.to_dtype(DType::F64)?.to_vec3::<f64>()?;
        Ok(Self { tokens, heads })
    }
}

/// Every layer's attention probabilities for one sentence.
#[derive(Debug, Clone)]
pub struct AttentionStack {
    /// `[layers, heads, n, n]`, in the float type it came in (f32 from the models), so that
    /// the largest thing held is no larger than it has to be; f32 on Metal, which has no f64.
    /// Every computation on it widens the values as it reads them ([`compute_dtype`]): on the
    /// host value by value ([`read_on_host`]), on a GPU a layer at a time. For a stack whose
    /// heads were fused as it was read ([`read_fused_attention_file`]), `[layers, 1, n, n]`:
    /// the fusion, in f64.
    tensor: Tensor,
    /// For such a stack, how its heads were fused and how many there were.
    fused_on_reading: Option<(HeadFusion, usize)>,
}

impl AttentionStack {
    /// From the model's per-layer tensors, each `[1, heads, n, n]`; NaN or infinite
    /// attention (weights that hold NaN or overflow) is an error naming the layer and head.
    pub fn from_tensors(attentions: &[Tensor]) -> Result<Self> {
        let stack = Self::new(Tensor::cat(attentions, 0)?)?;
        let sums: Vec<Vec<f64>> = stack
            .tensor
            .sum(D::Minus1)?
            .sum(D::Minus1)?
            .to_dtype(DType::F64)?
            .to_vec2()?;
        check_finite(&sums)?;
        Ok(stack)
    }

    /// From the model's per-layer tensors whose heads were already fused by [`fuse_heads`]
    /// as each layer ran, each `[1, 1, n, n]`, with each head's sum, `[1, heads]`: a long
    /// text's stack without every head of every layer, joined without a second copy
    /// ([`join`]). Attention that is not finite is an error naming the layer and head.
    pub fn from_fused_tensors(
        fused: Vec<Tensor>,
        head_sums: &[Tensor],
        fusion: HeadFusion,
    ) -> Result<Self> {
        let sums: Vec<Vec<f64>> = Tensor::cat(head_sums, 0)?.to_dtype(DType::F64)?.to_vec2()?;
        check_finite(&sums)?;
        let mut stack = Self::new(join(fused)?)?;
        stack.fused_on_reading = Some((fusion, sums.first().map_or(1, Vec::len)));
        Ok(stack)
    }

    /// From one `[layers, heads, n, n]` tensor; `[layers, n, n]` counts as one head.
    pub fn new(tensor: Tensor) -> Result<Self> {
        let dims = tensor.dims().to_vec();
        let square = dims.len() >= 2 && dims[dims.len() - 1] == dims[dims.len() - 2];
        if !matches!(dims.len(), 3 | 4) || !square || dims.contains(&0) {
            return Err(Error::Attention(format!(
                "expected shape [layers, heads, n, n] or [layers, n, n], got {dims:?}"
            )));
        }
        let tensor = match dims.len() {
            3 => tensor.unsqueeze(1)?,
            _ => tensor,
        };
        let dtype = match (tensor.dtype(), compute_dtype(tensor.device())) {
            (DType::F16 | DType::BF16 | DType::F32 | DType::F64, DType::F64) => tensor.dtype(),
            (_, compute) => compute,
        };
        Ok(Self {
            tensor: tensor.to_dtype(dtype)?.contiguous()?,
            fused_on_reading: None,
        })
    }

    /// A stack of `heads` heads per layer already fused by `fusion` on the host (before any
    /// renormalising): `fused` is row-major `[layers][n][n]`, in f64.
    fn already_fused(
        layers: usize,
        heads: usize,
        n: usize,
        fused: Vec<f64>,
        fusion: HeadFusion,
    ) -> Result<Self> {
        Ok(Self {
            tensor: Tensor::from_vec(fused, (layers, 1, n, n), &Device::Cpu)?,
            fused_on_reading: Some((fusion, heads)),
        })
    }

    /// From a flat row-major `[layers][heads][n][n]` buffer on the host.
    pub fn from_vec(layers: usize, heads: usize, n: usize, data: Vec<f64>) -> Result<Self> {
        if data.len() != layers * heads * n * n {
            return Err(Error::Attention(format!(
                "{layers} layers, {heads} heads and {n} tokens need {} values, not {}",
                layers * heads * n * n,
                data.len()
            )));
        }
        Self::new(Tensor::from_vec(data, (layers, heads, n, n), &Device::Cpu)?)
    }

    pub fn layers(&self) -> usize {
        self.tensor.dims()[0]
    }

    pub fn heads(&self) -> usize {
        self.fused_on_reading
            .map_or(self.tensor.dims()[1], |(_, heads)| heads)
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.tensor.dims()[2]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stack itself, `[layers, heads, n, n]` (one head, the fusion, if the heads were
    /// fused as it was read).
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// `Ā_l` for every layer: `[layers, n, n]`, in [`compute_dtype`].
    pub fn fuse(&self, fusion: HeadFusion) -> Result<Tensor> {
        let (layers, n) = (self.layers(), self.len());
        let reader = FuseHeads {
            fusion,
            heads: self.heads(),
            size: n * n,
        };
        let fused = match self.fused_on_reading {
            Some((done, _)) if done == fusion => self
                .tensor
                .squeeze(1)?
                .to_dtype(compute_dtype(self.tensor.device()))?,
            Some((done, _)) => {
                return Err(Error::Attention(format!(
                    "its heads were fused by {done:?} as it was read; read it again to fuse them by {fusion:?}"
                )))
            }
            None => match read_on_host(&self.tensor, reader) {
                // On the host, one pass over the stack, widening each value as it is read.
                Some(values) => Tensor::from_vec(values, (layers, n, n), &Device::Cpu)?,
                None => self.fuse_on_device(fusion)?,
            },
        };
        Ok(match fusion {
            HeadFusion::Mean => fused,
            HeadFusion::Max => normalise_rows(&fused)?,
            HeadFusion::Min => {
                let sums: Vec<Vec<f64>> = fused.sum(D::Minus1)?.to_dtype(DType::F64)?.to_vec2()?;
                for (layer, rows) in sums.iter().enumerate() {
                    if let Some(row) = rows.iter().position(|s| *s <= 0.0) {
                        return Err(Error::EmptyFusedRow {
                            layer: layer + 1,
                            row,
                        });
                    }
                }
                normalise_rows(&fused)?
            }
        })
    }

    /// [`Self::fuse`]'s mean, max or min with tensor operations, before the rows are
    /// renormalised.
    fn fuse_on_device(&self, fusion: HeadFusion) -> Result<Tensor> {
        let dtype = compute_dtype(self.tensor.device());
        // Head by head, each an elementwise operation on contiguous memory (a reduction over
        // the heads' dimension strides across the whole layer and is several times slower).
        let layers = (0..self.layers())
            .map(|l| {
                let heads = self.tensor.get(l)?.to_dtype(dtype)?;
                let mut fused = heads.get(0)?;
                for h in 1..self.heads() {
                    let head = heads.get(h)?;
                    fused = match fusion {
                        HeadFusion::Mean => (fused + head)?,
                        HeadFusion::Max => fused.maximum(&head)?,
                        HeadFusion::Min => fused.minimum(&head)?,
                    };
                }
                Ok(match fusion {
                    HeadFusion::Mean => (fused / self.heads() as f64)?,
                    HeadFusion::Max | HeadFusion::Min => fused,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::stack(&layers, 0)?)
    }
}

/// Something computed from a tensor's values read where they lie, each widened to f64 as it
/// is read: the stack is most of a run's memory, and a copy of it costs more than the
/// arithmetic.
pub(crate) trait HostReader {
    type Output;
    fn read<T: Copy + Into<f64> + Sync>(self, values: &[T]) -> Self::Output;
}

/// `reader` on the values of a contiguous tensor in host memory, row-major; `None` for a
/// tensor elsewhere (or of an integer type), which the caller computes with tensor
/// operations instead.
pub(crate) fn read_on_host<R: HostReader>(tensor: &Tensor, reader: R) -> Option<R::Output> {
    use candle_core::{CpuStorage, Storage};
    let (storage, layout) = tensor.storage_and_layout();
    let (Storage::Cpu(cpu), Some((start, end))) = (&*storage, layout.contiguous_offsets()) else {
        return None;
    };
    match cpu {
        CpuStorage::F64(values) => Some(reader.read(&values[start..end])),
        CpuStorage::F32(values) => Some(reader.read(&values[start..end])),
        CpuStorage::F16(values) => Some(reader.read(&values[start..end])),
        CpuStorage::BF16(values) => Some(reader.read(&values[start..end])),
        _ => None,
    }
}

/// The heads of each layer of a `[layers, heads, n, n]` stack fused elementwise, in f64 and
/// in the order of [`AttentionStack::fuse_on_device`]'s operations (the mean as
/// `(((h₀ + h₁) + h₂) + …)·(1/H)`, as candle divides by a scalar), so both give the same bits.
struct FuseHeads {
    fusion: HeadFusion,
    heads: usize,
    /// `n²`.
    size: usize,
}

impl HostReader for FuseHeads {
    type Output = Vec<f64>;

    fn read<T: Copy + Into<f64> + Sync>(self, values: &[T]) -> Vec<f64> {
        let mut fused = vec![0.0; values.len() / self.heads];
        // Each layer in parts on threads of their own (a long text's one layer is hundreds
        // of megabytes); each entry's arithmetic is the same either way.
        const PART: usize = 1 << 16;
        for (into, layer) in fused
            .chunks_exact_mut(self.size)
            .zip(values.chunks_exact(self.heads * self.size))
        {
            into.par_chunks_mut(PART).enumerate().for_each(|(k, into)| {
                for h in 0..self.heads {
                    let start = h * self.size + k * PART;
                    let head = &layer[start..start + into.len()];
                    fuse_head(into, head, h, self.heads, self.fusion);
                }
            });
        }
        fused
    }
}

/// The heads of `probs`, `[b, heads, n, n]`, fused entry by entry by `fusion` (before any
/// renormalising), `[b, 1, n, n]` in [`compute_dtype`]: on the host read where they lie with
/// [`FuseHeads`]'s arithmetic (so [`AttentionStack::fuse`] of the whole stack gives the same
/// bits, and no widened copy of every head is made), elsewhere with tensor operations.
pub fn fuse_heads(probs: &Tensor, fusion: HeadFusion) -> Result<Tensor> {
    let (b, heads, n, _) = probs.dims4()?;
    let reader = FuseHeads {
        fusion,
        heads,
        size: n * n,
    };
    if let Some(values) = read_on_host(probs, reader) {
        return Ok(Tensor::from_vec(values, (b, 1, n, n), &Device::Cpu)?);
    }
    let wide = &probs.to_dtype(compute_dtype(probs.device()))?;
    Ok(match fusion {
        HeadFusion::Mean => wide.mean_keepdim(1)?,
        HeadFusion::Max => wide.max_keepdim(1)?,
        HeadFusion::Min => wide.min_keepdim(1)?,
    })
}

/// Layers' tensors appended to one buffer, each widened to f64 as it is read.
struct Append<'a>(&'a mut Vec<f64>);

impl HostReader for Append<'_> {
    type Output = ();

    fn read<T: Copy + Into<f64> + Sync>(self, values: &[T]) {
        self.0.extend(values.iter().map(|&v| v.into()));
    }
}

/// `layers` (each `[1, …]`, the same shape) joined along a new first dimension. On the host
/// each is appended to one buffer and freed as it is read, so the join never holds two
/// copies of the stack (at n = 8,192 one is 11.8 GB); elsewhere a concatenation.
fn join(layers: Vec<Tensor>) -> Result<Tensor> {
    let Some(first) = layers.first() else {
        return Err(Error::Attention("no layers".into()));
    };
    if !first.device().is_cpu() {
        return Ok(Tensor::cat(&layers, 0)?);
    }
    let mut dims = first.dims().to_vec();
    dims[0] = layers.len();
    let mut values = Vec::with_capacity(dims.iter().product());
    for layer in layers {
        if layer.dims()[1..] != dims[1..] {
            return Err(Error::Attention(format!(
                "layers of shapes {:?} and {:?}",
                &dims[1..],
                &layer.dims()[1..]
            )));
        }
        let joined = read_on_host(&layer.contiguous()?, Append(&mut values));
        joined.ok_or_else(|| Error::Attention("a layer of integers".into()))?;
    }
    Ok(Tensor::from_vec(values, dims, &Device::Cpu)?)
}

/// Fuses head `h` of `heads` (any part of it) into `into`, the same part of the fusion so
/// far; the heads come in order. The arithmetic of [`FuseHeads`], wherever the heads are read.
fn fuse_head<T: Copy + Into<f64>>(
    into: &mut [f64],
    head: &[T],
    h: usize,
    heads: usize,
    fusion: HeadFusion,
) {
    match (h, fusion) {
        (0, _) => combine(into, head, |_, b| b),
        (_, HeadFusion::Mean) => combine(into, head, |a, b| a + b),
        (_, HeadFusion::Max) => combine(into, head, f64::max),
        (_, HeadFusion::Min) => combine(into, head, f64::min),
    }
    if fusion == HeadFusion::Mean && h + 1 == heads {
        let scale = 1.0 / heads as f64;
        into.iter_mut().for_each(|a| *a *= scale);
    }
}

/// `into[i] = op(into[i], head[i])` for every `i`.
fn combine<T: Copy + Into<f64>>(into: &mut [f64], head: &[T], op: impl Fn(f64, f64) -> f64) {
    for (a, &b) in into.iter_mut().zip(head) {
        *a = op(*a, b.into());
    }
}

/// f64 wherever the device has it, so that results match the reference to far below
/// f32 rounding.
pub(crate) fn compute_dtype(device: &Device) -> DType {
    if device.is_metal() {
        DType::F32
    } else {
        DType::F64
    }
}

/// `fused`: `[layers, n, n]` → `(1 - α)·Ā + α·I` with each row divided by its sum,
/// `[layers, n, n]`. For row-stochastic input the division changes nothing; for f32
/// softmax rows that miss 1 by rounding it makes α = 0.5 give exactly the paper's
/// `(Ā + I) / rowsum`.
pub fn with_residual(fused: &Tensor, alpha: f64) -> Result<Tensor> {
    let (layers, n, _) = fused.dims3()?;
    if fused.dtype() == DType::F64 {
        if let Some(values) = read_on_host(fused, Residual { alpha, n }) {
            return Ok(Tensor::from_vec(values, (layers, n, n), &Device::Cpu)?);
        }
    }
    residual_on_device(fused, alpha)
}

/// [`with_residual`] with tensor operations, on any device.
fn residual_on_device(fused: &Tensor, alpha: f64) -> Result<Tensor> {
    let n = fused.dim(1)?;
    let eye = (Tensor::eye(n, fused.dtype(), fused.device())? * alpha)?;
    normalise_rows(&(fused * (1.0 - alpha))?.broadcast_add(&eye)?)
}

/// [`with_residual`] on the host, with the tensor operations' arithmetic in their order
/// (each row scaled, `α` added on the diagonal, then divided by its sum taken left to
/// right), so both give the same bits.
struct Residual {
    alpha: f64,
    n: usize,
}

impl HostReader for Residual {
    type Output = Vec<f64>;

    fn read<T: Copy + Into<f64> + Sync>(self, values: &[T]) -> Vec<f64> {
        let n = self.n;
        let mut augmented = vec![0.0; values.len()];
        let rows = values.par_chunks_exact(n);
        augmented
            .par_chunks_exact_mut(n)
            .zip(rows)
            .enumerate()
            .for_each(|(r, (into, row))| augment_row(into, row, r % n, self.alpha));
        augmented
    }
}

/// Row `i` of one layer of [`with_residual`] into `into`, from the same row of the fused
/// layer: [`Residual`]'s arithmetic, for a layer made one row (or one layer) at a time.
pub(crate) fn augment_row<T: Copy + Into<f64>>(into: &mut [f64], row: &[T], i: usize, alpha: f64) {
    combine(into, row, |_, v| v * (1.0 - alpha));
    into[i] += alpha;
    let sum: f64 = into.iter().fold(0.0, |sum, &v| sum + v);
    if sum != 0.0 {
        into.iter_mut().for_each(|v| *v /= sum);
    }
}

/// Divides each row (last dimension) by its sum; rows summing to zero stay zero.
pub(crate) fn normalise_rows(t: &Tensor) -> Result<Tensor> {
    let sums = t.sum_keepdim(D::Minus1)?;
    // A zero row stays zero: divide it by 1 instead of 0.
    let safe = sums.eq(0.0)?.where_cond(&sums.ones_like()?, &sums)?;
    Ok(t.broadcast_div(&safe)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_heads() -> AttentionStack {
        // One layer, two heads, two tokens.
        let data = vec![0.5, 0.5, 1.0, 0.0, 0.9, 0.1, 0.2, 0.8];
        AttentionStack::from_vec(1, 2, 2, data).unwrap()
    }

    fn host(t: &Tensor) -> Vec<f64> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    fn assert_close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-15, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn mean_fusion_averages_heads() {
        let fused = two_heads().fuse(HeadFusion::Mean).unwrap();
        assert_eq!(fused.dims(), &[1, 2, 2]);
        assert_close(&host(&fused), &[0.7, 0.3, 0.6, 0.4]);
    }

    #[test]
    fn max_and_min_fusion_renormalise_rows() {
        let max = two_heads().fuse(HeadFusion::Max).unwrap();
        assert_close(&host(&max), &[0.9 / 1.4, 0.5 / 1.4, 1.0 / 1.8, 0.8 / 1.8]);
        let min = two_heads().fuse(HeadFusion::Min).unwrap();
        assert_close(&host(&min), &[0.5 / 0.6, 0.1 / 0.6, 1.0, 0.0]);
    }

    #[test]
    fn min_fusion_of_disjoint_heads_is_an_error() {
        let data = vec![0.5, 0.5, 1.0, 0.0, 0.9, 0.1, 0.0, 1.0];
        let stack = AttentionStack::from_vec(1, 2, 2, data).unwrap();
        let err = stack.fuse(HeadFusion::Min).unwrap_err();
        assert!(
            matches!(err, Error::EmptyFusedRow { layer: 1, row: 1 }),
            "{err}"
        );
    }

    #[test]
    fn non_finite_model_attention_names_layer_and_head() {
        let device = Device::Cpu;
        let good = Tensor::full(0.5f32, (1, 2, 2, 2), &device).unwrap();
        let bad = Tensor::from_vec(
            vec![0.5f32, 0.5, 0.5, 0.5, 0.5, 0.5, f32::NAN, 0.5],
            (1, 2, 2, 2),
            &device,
        )
        .unwrap();
        let err = AttentionStack::from_tensors(&[good, bad]).unwrap_err();
        assert!(
            err.to_string().contains("layer 2 head 1 is not finite"),
            "{err}"
        );
    }

    #[test]
    fn host_loops_give_the_tensor_operations_bits() {
        // Uneven values in f32 and f64, so every rounding shows.
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let values: Vec<f64> = (0..2 * 3 * 5 * 5).map(|_| next()).collect();
        let f64_stack = AttentionStack::from_vec(2, 3, 5, values).unwrap();
        let f32_tensor = f64_stack.tensor().to_dtype(DType::F32).unwrap();
        let f32_stack = AttentionStack::new(f32_tensor).unwrap();
        for stack in [&f64_stack, &f32_stack] {
            for fusion in [HeadFusion::Mean, HeadFusion::Max, HeadFusion::Min] {
                let on_host = host(&stack.fuse(fusion).unwrap());
                let by_ops = match fusion {
                    HeadFusion::Mean => stack.fuse_on_device(fusion).unwrap(),
                    _ => normalise_rows(&stack.fuse_on_device(fusion).unwrap()).unwrap(),
                };
                assert_eq!(on_host, host(&by_ops), "{fusion:?}");
            }
            let fused = stack.fuse(HeadFusion::Mean).unwrap();
            for alpha in [0.0, 0.5, 0.3] {
                let on_host = host(&with_residual(&fused, alpha).unwrap());
                assert_eq!(on_host, host(&residual_on_device(&fused, alpha).unwrap()));
            }
        }
    }

    #[test]
    fn residual_matches_the_papers_renormalised_sum() {
        let a = Tensor::new(&[[[0.7, 0.3], [0.6, 0.4]]], &Device::Cpu).unwrap();
        let expected = [1.7 / 2.0, 0.3 / 2.0, 0.6 / 2.0, 1.4 / 2.0];
        let augmented = with_residual(&a, 0.5).unwrap();
        assert_eq!(augmented.dims(), &[1, 2, 2]);
        assert_close(&host(&augmented), &expected);
        let matrix = Matrix {
            n: 2,
            data: vec![0.7, 0.3, 0.6, 0.4],
        };
        assert_close(&matrix.with_residual(0.5).data, &expected);
    }

    #[test]
    fn reads_model_tensors_in_layer_head_order() {
        let device = Device::Cpu;
        let layer = |v: f32| Tensor::full(v, (1, 3, 2, 2), &device).unwrap();
        let stack = AttentionStack::from_tensors(&[layer(0.25), layer(0.5)]).unwrap();
        assert_eq!((stack.layers(), stack.heads(), stack.len()), (2, 3, 2));
        // Held as it came, fused in f64.
        assert_eq!(stack.tensor().dtype(), DType::F32);
        assert_eq!(stack.fuse(HeadFusion::Mean).unwrap().dtype(), DType::F64);
        assert!(AttentionStack::from_vec(1, 1, 2, vec![0.0; 3]).is_err());
        let three = Tensor::zeros((2, 3, 3), DType::F32, &device).unwrap();
        assert_eq!(AttentionStack::new(three).unwrap().heads(), 1);
        let ragged = Tensor::zeros((2, 3, 4), DType::F32, &device).unwrap();
        assert!(AttentionStack::new(ragged).is_err());
    }
}
