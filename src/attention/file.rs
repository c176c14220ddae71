//! Attention stacks saved by another framework (.npy or .safetensors), checked before use.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use super::npy::{open_npy, read_npy, CHUNK};
use super::{fuse_head, read_on_host, AttentionStack, HeadFusion, HostReader};
use crate::error::{Error, Result};
use crate::input::open_regular;

/// How far a row may sum from 1 before the file is refused: 1e-3, or more where the
/// values' own rounding allows it (a bf16 value carries a relative error up to 2^-8, so
/// a bf16 row can miss 1 by that much although the softmax behind it was exact).
fn row_sum_tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::BF16 => 2.0 * 2f64.powi(-8),
        DType::F16 => 2.0 * 2f64.powi(-11),
        _ => 1e-3,
    }
    .max(1e-3)
}

/// Reads `[L, H, n, n]` or `[L, n, n]` softmax probabilities from a .npy file or a
/// .safetensors file (its one tensor, or the one named `attention` or `attentions`), and
/// checks that every value is finite and non-negative and every row sums to 1.
pub fn read_attention_file(path: &Path, device: &Device) -> Result<AttentionStack> {
    let bad = |message: String| Error::AttentionFile {
        path: path.to_path_buf(),
        message,
    };
    if !path.exists() {
        return Err(bad("there is no such file".into()));
    }
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let tensor = match extension {
        "npy" => read_npy(path).map_err(bad)?,
        "safetensors" => {
            open_regular(path).map_err(|e| bad(e.to_string()))?;
            let mut tensors = candle_core::safetensors::load(path, &Device::Cpu)
                .map_err(|e| bad(e.to_string()))?;
            let named = ["attention", "attentions"]
                .iter()
                .find_map(|name| tensors.remove(*name));
            match named {
                Some(t) => t,
                None if tensors.len() == 1 => tensors.into_values().next().unwrap(),
                None => {
                    let mut names: Vec<_> = tensors.keys().cloned().collect();
                    names.sort();
                    return Err(bad(format!(
                        "it holds {} tensors ({}); save one, or name it \"attention\"",
                        names.len(),
                        names.join(", ")
                    )));
                }
            }
        }
        _ => {
            return Err(bad(
                "the extension is neither .npy nor .safetensors; save the stack with numpy.save or safetensors".into(),
            ))
        }
    };
    let precision = tensor.dtype();
    checked_attention(tensor, precision, device).map_err(|e| match e {
        Error::Attention(message) => bad(message),
        other => other,
    })
}

/// [`read_attention_file`] with each layer's heads fused by `fusion` as they are read, for a
/// stack explained on the host: a C-order .npy file is read a block of rows at a time, each
/// block checked and fused into the layer, so the stack itself is never held (at n = 512 it is
/// most of a run's memory, and writing it to fresh memory most of the time to read it). The
/// fusion is the one [`AttentionStack::fuse`] computes from the whole stack, to the bit, and
/// the stack can be fused only that way. Any other file, or one that fails a check (whose
/// message then comes from reading it whole), is read as [`read_attention_file`] reads it.
pub fn read_fused_attention_file(
    path: &Path,
    device: &Device,
    fusion: HeadFusion,
) -> Result<AttentionStack> {
    let npy = path.extension().is_some_and(|e| e == "npy");
    if npy && device.is_cpu() {
        if let Some(stack) = fuse_npy(path, fusion) {
            return stack;
        }
    }
    read_attention_file(path, device)
}

/// A C-order .npy stack of probabilities, its heads fused as they are read; `None` where
/// [`read_attention_file`] is to read it instead.
fn fuse_npy(path: &Path, fusion: HeadFusion) -> Option<Result<AttentionStack>> {
    let npy = open_npy(path).ok()?;
    let (layers, heads, n) = match *npy.c_order_shape()? {
        [layers, n, m] if n == m => (layers, 1, n),
        [layers, heads, n, m] if n == m => (layers, heads, n),
        _ => return None,
    };
    let tolerance = row_sum_tolerance(npy.dtype());
    let rows = (CHUNK / n).max(1);
    let mut fused = vec![0.0; layers * n * n];
    let read = fused
        .par_chunks_mut(n * n)
        .enumerate()
        .try_for_each(|(l, layer)| {
            layer
                .par_chunks_mut(rows * n)
                .enumerate()
                .try_for_each_init(
                    || (vec![0.0; n], Vec::new()),
                    |(row, bytes), (b, into)| {
                        let width = npy.dtype().size_in_bytes() * n;
                        for h in 0..heads {
                            let first = ((l * heads + h) * n + b * rows) * n;
                            npy.read_run(first, into.len(), bytes).ok()?;
                            // Row by row, each widened, checked and fused while in cache.
                            for (fused, stored) in into.chunks_exact_mut(n).zip(bytes.chunks(width))
                            {
                                npy.widen(stored, row);
                                if !is_probability(row, tolerance) {
                                    return None;
                                }
                                fuse_head(fused, row, h, heads, fusion);
                            }
                        }
                        Some(())
                    },
                )
        });
    read?;
    Some(AttentionStack::already_fused(
        layers, heads, n, fused, fusion,
    ))
}

/// An attention stack handed over in memory (the Python package's arrays), checked as
/// [`read_attention_file`] checks a file: `tensor` is `[L, H, n, n]` or `[L, n, n]` softmax
/// probabilities, finite, non-negative, each row summing to 1 within what `precision` (the
/// type the values were stored in) allows. A problem is an [`Error::Attention`].
pub fn checked_attention(
    tensor: Tensor,
    precision: DType,
    device: &Device,
) -> Result<AttentionStack> {
    if !matches!(
        precision,
        DType::F16 | DType::BF16 | DType::F32 | DType::F64
    ) {
        return Err(Error::Attention(format!(
            "it holds {precision:?} values; attention probabilities are floating point"
        )));
    }
    let stack = AttentionStack::new(tensor.to_device(device)?)?;
    check_probabilities(&stack, precision).map_err(Error::Attention)?;
    Ok(stack)
}

/// Finite, non-negative, rows summing to 1: anything else is not softmax attention.
fn check_probabilities(stack: &AttentionStack, dtype: DType) -> std::result::Result<(), String> {
    let check = Check { stack, dtype };
    // A contiguous stack on the CPU is read where it lies (it is most of the memory); any other
    // is copied to the host as f64 first.
    if let Some(checked) = read_on_host(stack.tensor(), check) {
        return checked;
    }
    let values: Vec<f64> = stack
        .tensor()
        .to_device(&Device::Cpu)
        .and_then(|t| t.to_dtype(DType::F64))
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1())
        .map_err(|e| e.to_string())?;
    check_values(&values, stack, dtype)
}

/// [`check_values`] as a [`HostReader`].
struct Check<'a> {
    stack: &'a AttentionStack,
    dtype: DType,
}

impl HostReader for Check<'_> {
    type Output = std::result::Result<(), String>;

    fn read<T: Copy + Into<f64> + Sync>(self, values: &[T]) -> Self::Output {
        check_values(values, self.stack, self.dtype)
    }
}

/// [`check_probabilities`] on the stack's values, row-major `[L][H][n][n]`.
fn check_values<T: Copy + Into<f64> + Sync>(
    values: &[T],
    stack: &AttentionStack,
    dtype: DType,
) -> std::result::Result<(), String> {
    let (heads, n) = (stack.heads(), stack.len());
    let tolerance = row_sum_tolerance(dtype);
    // The common case in one pass; a stack that fails it is read again below to say where
    // and why (the sums are the same, so both passes agree).
    let fine = values.par_chunks(n * n).all(|matrix| {
        matrix
            .chunks_exact(n)
            .all(|row| is_probability(row, tolerance))
    });
    if fine {
        return Ok(());
    }
    let locate = |index: usize| {
        let row = index / n;
        format!(
            "layer {} head {} row {}",
            row / (heads * n) + 1,
            row / n % heads,
            row % n
        )
    };
    let value = |index: usize| -> f64 { values[index].into() };
    if let Some(index) = (0..values.len()).find(|&i| !value(i).is_finite()) {
        return Err(format!(
            "{} holds {}; attention must be finite",
            locate(index),
            value(index)
        ));
    }
    if let Some(index) = (0..values.len()).find(|&i| value(i) < 0.0) {
        return Err(format!(
            "{} holds the negative value {}; attention probabilities are non-negative",
            locate(index),
            value(index)
        ));
    }
    let sums = values.chunks_exact(n).map(|row| row_sum(row).0);
    if let Some((row, sum)) = sums
        .enumerate()
        .find(|(_, sum)| (sum - 1.0).abs() > tolerance)
    {
        let rounded = matches!(dtype, DType::BF16 | DType::F16) && (sum - 1.0).abs() < 0.05;
        let advice = match rounded {
            true => "the values look rounded more than their type explains: save them as float32",
            false => "save the softmax probabilities, not the scores",
        };
        return Err(format!(
            "{} sums to {sum:.6} rather than 1 (tolerance {tolerance} for {dtype:?}); {advice}",
            locate(row * n),
        ));
    }
    Ok(())
}

/// Whether `row` is finite, non-negative and sums to 1 within `tolerance`.
fn is_probability<T: Copy + Into<f64>>(row: &[T], tolerance: f64) -> bool {
    // NaN or an infinity makes the sum NaN or infinite.
    let (sum, lowest) = row_sum(row);
    sum.is_finite() && lowest >= 0.0 && (sum - 1.0).abs() <= tolerance
}

/// A row's sum in f64 and its lowest value (at most 0), over eight interleaved lanes: a
/// single running sum waits on each addition in turn, and lanes compile to vector
/// instructions. The lowest value misses a NaN, which the sum does not.
fn row_sum<T: Copy + Into<f64>>(row: &[T]) -> (f64, f64) {
    const LANES: usize = 8;
    let (mut sums, mut lows) = ([0.0f64; LANES], [0.0f64; LANES]);
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for lane in 0..LANES {
            let v: f64 = chunk[lane].into();
            sums[lane] += v;
            lows[lane] = if v < lows[lane] { v } else { lows[lane] };
        }
    }
    for &v in chunks.remainder() {
        let v: f64 = v.into();
        sums[0] += v;
        lows[0] = if v < lows[0] { v } else { lows[0] };
    }
    let sum = sums.iter().sum();
    let low = lows
        .iter()
        .fold(0.0, |low: f64, &v| if v < low { v } else { low });
    (sum, low)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn save_npy(dir: &Path, t: &Tensor) -> std::path::PathBuf {
        let path = dir.join("attention.npy");
        t.write_npy(&path).unwrap();
        path
    }

    fn uniform(layers: usize, heads: usize, n: usize) -> Tensor {
        Tensor::full(1.0 / n as f32, (layers, heads, n, n), &Device::Cpu).unwrap()
    }

    #[test]
    fn reads_npy_and_safetensors() {
        let dir = tempfile::tempdir().unwrap();
        let stack = read_attention_file(&save_npy(dir.path(), &uniform(2, 3, 4)), &Device::Cpu);
        let stack = stack.unwrap();
        assert_eq!((stack.layers(), stack.heads(), stack.len()), (2, 3, 4));

        let path = dir.path().join("a.safetensors");
        let three = uniform(2, 1, 4).squeeze(1).unwrap();
        candle_core::safetensors::save(&std::collections::HashMap::from([("x", three)]), &path)
            .unwrap();
        let stack = read_attention_file(&path, &Device::Cpu).unwrap();
        assert_eq!((stack.layers(), stack.heads(), stack.len()), (2, 1, 4));
    }

    /// Softmax rows of seeded pseudo-random scores, `[layers, heads, n, n]`, as `dtype`.
    fn softmax_stack(layers: usize, heads: usize, n: usize, dtype: DType) -> Tensor {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let scores: Vec<f32> = (0..layers * heads * n * n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 40) as f32 / (1u64 << 24) as f32 * 8.0
            })
            .collect();
        let scores = Tensor::from_vec(scores, (layers, heads, n, n), &Device::Cpu).unwrap();
        let probabilities = candle_nn::ops::softmax_last_dim(&scores).unwrap();
        probabilities.to_dtype(dtype).unwrap()
    }

    fn bits(t: &Tensor) -> Vec<u64> {
        let values: Vec<f64> = t.flatten_all().unwrap().to_vec1().unwrap();
        values.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn fusing_while_reading_gives_the_whole_stacks_fusion() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = &Device::Cpu;
        // n = 300: a layer is read in two blocks of rows; [layers, n, n] counts as one head.
        let stacks = [
            softmax_stack(2, 3, 300, DType::F32),
            softmax_stack(3, 2, 20, DType::F16),
            softmax_stack(2, 1, 9, DType::F64).squeeze(1).unwrap(),
        ];
        for stack in &stacks {
            let path = save_npy(dir.path(), stack);
            let whole = read_attention_file(&path, cpu).unwrap();
            for fusion in [HeadFusion::Mean, HeadFusion::Max, HeadFusion::Min] {
                let fused = read_fused_attention_file(&path, cpu, fusion).unwrap();
                assert_eq!(
                    fused.tensor().dim(1).unwrap(),
                    1,
                    "not fused as it was read"
                );
                let shape = |s: &AttentionStack| (s.layers(), s.heads(), s.len());
                assert_eq!(shape(&fused), shape(&whole));
                let (want, got) = (whole.fuse(fusion).unwrap(), fused.fuse(fusion).unwrap());
                assert_eq!(bits(&got), bits(&want), "{:?} {fusion:?}", stack.dims());
                let other = match fusion {
                    HeadFusion::Mean => HeadFusion::Max,
                    _ => HeadFusion::Mean,
                };
                assert!(fused.fuse(other).is_err());
            }
        }
        // A stack that fails the check is refused with the same message either way.
        let mut values = vec![0.25f32; 2 * 3 * 16];
        values[70] = -0.25;
        let bad = Tensor::from_vec(values, (2, 3, 4, 4), cpu).unwrap();
        let path = save_npy(dir.path(), &bad);
        let whole = read_attention_file(&path, cpu).unwrap_err().to_string();
        let fused = read_fused_attention_file(&path, cpu, HeadFusion::Mean).unwrap_err();
        assert_eq!(fused.to_string(), whole);
        assert!(
            whole.contains("layer 2 head 1 row 1 holds the negative value"),
            "{whole}"
        );
    }

    #[test]
    fn refuses_what_is_not_attention() {
        let dir = tempfile::tempdir().unwrap();
        let check = |t: Tensor, needle: &str| {
            let err = read_attention_file(&save_npy(dir.path(), &t), &Device::Cpu).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        };
        check(
            Tensor::zeros((2, 3), DType::F32, &Device::Cpu).unwrap(),
            "[2, 3]",
        );
        check(
            Tensor::zeros((2, 1, 3, 4), DType::F32, &Device::Cpu).unwrap(),
            "[2, 1, 3, 4]",
        );
        check(
            (uniform(1, 2, 3) * 2.0).unwrap(),
            "layer 1 head 0 row 0 sums to 2.000000 rather than 1 (tolerance 0.001 for F32); save the softmax",
        );
        let mut values = vec![1.0f32 / 3.0; 2 * 9];
        values[13] = f32::NAN;
        check(
            Tensor::from_vec(values, (2, 3, 3), &Device::Cpu).unwrap(),
            "layer 2 head 0 row 1 holds NaN",
        );
        let err = read_attention_file(&dir.path().join("a.txt"), &Device::Cpu).unwrap_err();
        assert!(err.to_string().contains("no such file"), "{err}");
    }
}
