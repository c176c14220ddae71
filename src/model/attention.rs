//! Multi-head self-attention that hands back its softmax probabilities.

use crate::linalg::{broadcast_matmul, matmul, Dense};
use candle_core::{Module, Tensor, Var, D};

use super::config::EncoderConfig;
use super::family::LayerNames;
use super::norm::LayerNorm;
use super::rules;
use super::{Keep, LayerInternals};
use crate::checkpoint::WeightPath;
use crate::error::Result;

/// The attention block of one encoder layer: self-attention, its output projection, the
/// residual connection and LayerNorm.
pub struct Attention {
    query: Dense,
    key: Dense,
    value: Dense,
    output: Dense,
    layer_norm: LayerNorm,
    heads: usize,
    head_size: usize,
    /// A family's own attention logits; `None`: q·kᵀ / √head_size.
    scores: Option<Box<dyn Scores>>,
}

/// The logits a family's attention takes the softmax of, where they are not BERT's scaled
/// dot product (DeBERTa's disentangled attention adds relative-position terms).
pub trait Scores: Send + Sync {
    /// `q`, `k`: `[b, heads, n, head_size]`, the layer's queries and keys → `[b, heads, n,
    /// n]`, row i the logits of what position i attends to.
    fn scores(&self, q: &Tensor, k: &Tensor) -> Result<Tensor>;
}

/// What one attention block computes.
pub struct AttentionOutput {
    /// `[b, n, hidden]`, after the residual connection and LayerNorm.
    pub hidden: Tensor,
    /// `[b, heads, n, n]`: row i is the softmax over the positions that i attends to.
    pub probs: Tensor,
    /// With `keep.probes`: the zeros added to `probs`, whose gradient is ∂s/∂A.
    pub probe: Option<Var>,
    /// With `keep.internals`: what SPEC §8's methods read.
    pub internals: Option<LayerInternals>,
}

/// The softmax of `scores` over its last dimension, with candle's arithmetic (the same
/// bits). Where no gradient will be taken through it, candle-nn's fused kernel: one pass per
/// row, one `[b, heads, n, n]` tensor besides `scores`. Otherwise the steps one at a time,
/// taking `scores` so that each step frees the one before it where nothing keeps it for a
/// gradient: two such tensors at once where candle's `softmax` holds four (at n = 8,192 and
/// 12 heads, 6.4 GB instead of 12.8).
pub(crate) fn softmax(scores: Tensor) -> Result<Tensor> {
    if !scores.track_op() {
        return Ok(candle_nn::ops::softmax_last_dim(&scores.contiguous()?)?);
    }
    let max = scores.max_keepdim(D::Minus1)?;
    let shifted = scores.broadcast_sub(&max)?;
    drop(scores);
    let exp = shifted.exp()?;
    drop(shifted);
    let sums = exp.sum_keepdim(D::Minus1)?;
    Ok(exp.broadcast_div(&sums)?)
}

/// What attention over a set of queries weighs and mixes.
pub(crate) struct Weighted {
    /// `[b, heads, n, n]`.
    pub probs: Tensor,
    pub probe: Option<Var>,
    /// `[b, heads, n, d]`: the values mixed by `probs`.
    pub context: Tensor,
}

/// The softmax of `scores` (LRP's rule for probabilities, with a probe where `keep` asks)
/// and what it mixes of `v` (`[b, heads, n, d]`, the product's rule).
pub(crate) fn weigh(scores: Tensor, v: &Tensor, keep: Keep) -> Result<Weighted> {
    let (probs, probe) = probe(rules::probabilities(softmax(scores)?), keep)?;
    let context = rules::product(matmul(&probs, v)?)?;
    Ok(Weighted {
        probs,
        probe,
        context,
    })
}

/// `attend` over `q`, `k`, `v` (`[b, heads, n, d]`), line by line where `lengths` says the
/// lines were padded on the right to n: line i's attention computed on its own
/// `lengths[i]` positions alone, with the shapes (so the kernels and the order of every
/// sum) of the line alone, and its probabilities and context padded back to n with zeros.
/// The dense layers around it take the whole batch at once.
pub(crate) fn line_by_line(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    lengths: Option<&[usize]>,
    attend: impl Fn(&Tensor, &Tensor, &Tensor) -> Result<Weighted>,
) -> Result<Weighted> {
    let n = q.dim(2)?;
    let Some(lengths) = lengths.filter(|lengths| lengths.iter().any(|&len| len != n)) else {
        return attend(q, k, v);
    };
    let (mut probs, mut context) = (Vec::new(), Vec::new());
    for (i, &len) in lengths.iter().enumerate() {
        let own = |t: &Tensor| -> Result<Tensor> {
            Ok(t.narrow(0, i, 1)?.narrow(2, 0, len)?.contiguous()?)
        };
        let line = attend(&own(q)?, &own(k)?, &own(v)?)?;
        let pad = n - len;
        probs.push(
            line.probs
                .pad_with_zeros(2, 0, pad)?
                .pad_with_zeros(3, 0, pad)?,
        );
        context.push(line.context.pad_with_zeros(2, 0, pad)?);
    }
    Ok(Weighted {
        probs: Tensor::cat(&probs, 0)?,
        probe: None,
        context: Tensor::cat(&context, 0)?,
    })
}

/// `t`: `[b, n, heads · d]` → each head's part, `[b, heads, n, d]`, contiguous.
pub(crate) fn split_heads(t: &Tensor, heads: usize) -> Result<Tensor> {
    let (b, n, width) = t.dims3()?;
    Ok(t.reshape((b, n, heads, width / heads))?
        .transpose(1, 2)?
        .contiguous()?)
}

/// Pre-norm self-attention's core: `softmax(q·kᵀ / √d + mask)` over `q`, `k`, `v`
/// (`[b, heads, n, d]`), line by line where `lengths` says ([`line_by_line`]); `mask(n)`
/// gives an `[n, n]` addition for a line of n tokens, or none. The context comes back
/// with the heads side by side, `[b, n, heads · d]`.
pub(crate) fn scaled_attention(
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    mask: impl Fn(usize) -> Result<Option<Tensor>>,
    keep: Keep,
    lengths: Option<&[usize]>,
) -> Result<Weighted> {
    let (b, heads, n, d) = q.dims4()?;
    let attend = |q: &Tensor, k: &Tensor, v: &Tensor| -> Result<Weighted> {
        let scores = (rules::product(matmul(q, &k.t()?.contiguous()?)?)? / (d as f64).sqrt())?;
        let scores = match mask(q.dim(2)?)? {
            Some(mask) => scores.broadcast_add(&mask)?,
            None => scores,
        };
        weigh(scores, v, keep)
    };
    let weighted = line_by_line(q, k, v, lengths, attend)?;
    Ok(Weighted {
        context: weighted
            .context
            .transpose(1, 2)?
            .reshape((b, n, heads * d))?,
        ..weighted
    })
}

/// With `keep.probes`, adds a zero variable to `probs` so that backprop reaches them
/// (candle keeps the gradients of variables only).
pub fn probe(probs: Tensor, keep: Keep) -> Result<(Tensor, Option<Var>)> {
    if !keep.probes {
        return Ok((probs, None));
    }
    let zeros = Var::zeros(probs.shape(), probs.dtype(), probs.device())?;
    Ok(((probs + zeros.as_tensor())?, Some(zeros)))
}

impl Attention {
    /// `vb` is the layer; `names` say where its attention tensors are.
    pub fn load(vb: &WeightPath, names: &LayerNames, config: &EncoderConfig) -> Result<Self> {
        let hidden = config.hidden_size;
        let linear = |name: &str| load_linear(&vb.pp(name), hidden, hidden);
        Ok(Self {
            query: linear(names.query)?,
            key: linear(names.key)?,
            value: linear(names.value)?,
            output: linear(names.attention_output)?,
            layer_norm: LayerNorm::load(
                &vb.pp(names.attention_norm),
                hidden,
                config.layer_norm_eps,
            )?,
            heads: config.num_attention_heads,
            head_size: config.head_size(),
            scores: None,
        })
    }

    /// The same block with a family's own attention logits.
    pub fn with_scores(self, scores: Box<dyn Scores>) -> Self {
        Self {
            scores: Some(scores),
            ..self
        }
    }

    /// `x`: `[b, n, hidden]`. `value_mask`: `[b, n]`, multiplies each position's value
    /// vector (value zeroing). `lengths`: each line's tokens where the lines were padded on
    /// the right ([`line_by_line`]); `None`: every line fills all n positions.
    pub fn forward(
        &self,
        x: &Tensor,
        keep: Keep,
        value_mask: Option<&Tensor>,
        lengths: Option<&[usize]>,
    ) -> Result<AttentionOutput> {
        let (batch, n, hidden) = x.dims3()?;
        let split = |t: Tensor| -> Result<Tensor> {
            Ok(t.reshape((batch, n, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let q = split(self.query.forward(x)?)?;
        let k = split(self.key.forward(x)?)?;
        let v = match value_mask {
            Some(mask) => self.value.forward(x)?.broadcast_mul(&mask.unsqueeze(2)?)?,
            None => self.value.forward(x)?,
        };
        let v = split(v)?;
        let attend = |q: &Tensor, k: &Tensor, v: &Tensor| -> Result<Weighted> {
            let scores = match &self.scores {
                Some(own) => own.scores(q, k)?,
                None => {
                    let scale = 1.0 / (self.head_size as f64).sqrt();
                    (rules::product(matmul(q, &k.t()?)?)? * scale)?
                }
            };
            weigh(scores, v, keep)
        };
        let Weighted {
            probs,
            probe,
            context,
        } = line_by_line(&q, &k, &v, lengths, attend)?;
        let context = context.transpose(1, 2)?.reshape((batch, n, hidden))?;
        let projected = self.output.forward(&context)?;
        let summed = (projected + x)?;
        let hidden = self.layer_norm.forward(&summed)?;
        let internals = match keep.internals {
            true => Some(LayerInternals {
                input: x.clone(),
                head_values: head_values(&v, self.output.weight())?,
                norm_weight: Some(self.layer_norm.weight().clone()),
                norm_scale: Some(self.layer_norm.scale(&summed)?),
                norm_bias: Some(self.layer_norm.bias().clone()),
                output_bias: self.output.bias().cloned(),
                row_scale: None,
            }),
            false => None,
        };
        Ok(AttentionOutput {
            hidden,
            probs,
            probe,
            internals,
        })
    }
}

/// Each head's value vectors through its slice of the output projection:
/// `v`: `[b, heads, n, head_size]`, `w_o`: `[hidden, heads·head_size]` (a `Linear`'s
/// `[out, in]`) → `[b, heads, n, hidden]`, f^h(x_j) = v^h_j (W_O^h)ᵀ without the bias.
pub fn head_values(v: &Tensor, w_o: &Tensor) -> Result<Tensor> {
    let (_, heads, _, head_size) = v.dims4()?;
    let hidden = w_o.dim(0)?;
    // [hidden, heads, head_size] → [heads, head_size, hidden]
    let slices = w_o
        .reshape((hidden, heads, head_size))?
        .permute((1, 2, 0))?
        .contiguous()?;
    Ok(broadcast_matmul(v, &slices.unsqueeze(0)?)?)
}

/// A `Linear` from `dense.weight` `[out, in]` and `dense.bias` `[out]`.
pub fn load_linear(vb: &WeightPath, input: usize, output: usize) -> Result<Dense> {
    load_linear_with(vb, input, output, true)
}

/// The same, with a bias only where `bias` says so.
pub fn load_linear_with(vb: &WeightPath, input: usize, output: usize, bias: bool) -> Result<Dense> {
    let shift = match bias {
        true => Some(vb.get("bias", &[output])?),
        false => None,
    };
    Ok(Dense::new(vb.get("weight", &[output, input])?, shift))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    /// The fused softmax (no gradient to take) and the steps one at a time (a variable
    /// upstream) give the same bits, rows of any length, the tail past a multiple of the
    /// vector width included.
    #[test]
    fn the_fused_softmax_gives_the_same_bits() {
        let values: Vec<f32> = (0..2 * 3 * 37)
            .map(|i| ((i as f64 * 1.37).sin() * 9.0) as f32)
            .collect();
        let scores = Tensor::from_vec(values, (2, 3, 37), &Device::Cpu).unwrap();
        let fused = softmax(scores.clone()).unwrap();
        let tracked = Var::from_tensor(&scores).unwrap();
        assert!(tracked.as_tensor().track_op() && !scores.track_op());
        let stepwise = softmax(tracked.as_tensor().clone()).unwrap();
        let (fused, stepwise): (Vec<f32>, Vec<f32>) = (
            fused.flatten_all().unwrap().to_vec1().unwrap(),
            stepwise.flatten_all().unwrap().to_vec1().unwrap(),
        );
        assert!(fused
            .iter()
            .zip(&stepwise)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    /// The internals decompose the block exactly as SPEC §8 writes it:
    /// z_i = Σ_j Σ_h A^h_ij f^h(x_j) + b_O + x_i, and the block's output is
    /// γ ⊙ (z_i − mean(z_i)) / σ_i + β.
    #[test]
    fn internals_rebuild_the_block_output() {
        let device = Device::Cpu;
        let (hidden, heads, n) = (8, 2, 5);
        let random = |shape: &[usize], seed: f64| -> Tensor {
            let count: usize = shape.iter().product();
            let values: Vec<f32> = (0..count)
                .map(|i| ((i as f64 * 0.7 + seed).sin() * 0.9) as f32)
                .collect();
            Tensor::from_vec(values, shape, &device).unwrap()
        };
        let linear = |seed: f64| {
            Dense::new(
                random(&[hidden, hidden], seed),
                Some(random(&[hidden], seed + 0.5)),
            )
        };
        let beta = random(&[hidden], 9.0);
        let attention = Attention {
            query: linear(1.0),
            key: linear(2.0),
            value: linear(3.0),
            output: linear(4.0),
            layer_norm: LayerNorm::new(random(&[hidden], 5.0), beta.clone(), 1e-12),
            heads,
            head_size: hidden / heads,
            scores: None,
        };
        let x = random(&[1, n, hidden], 6.0);
        let keep = Keep {
            internals: true,
            ..Keep::default()
        };
        let out = attention.forward(&x, keep, None, None).unwrap();
        let internals = out.internals.unwrap();
        assert_eq!(internals.head_values.dims(), &[1, heads, n, hidden]);
        // Σ_h Σ_j A^h_ij f^h(x_j): [1, heads, n, n] @ [1, heads, n, hidden], summed over heads.
        let mixed = matmul(&out.probs, &internals.head_values)
            .unwrap()
            .sum(1)
            .unwrap();
        let b_o = attention.output.bias().unwrap();
        let z = mixed.broadcast_add(b_o).unwrap().add(&x).unwrap();
        let centred = z
            .broadcast_sub(&z.mean_keepdim(D::Minus1).unwrap())
            .unwrap();
        let sigma = internals.norm_scale.unwrap().unsqueeze(D::Minus1).unwrap();
        let rebuilt = centred
            .broadcast_div(&sigma)
            .unwrap()
            .broadcast_mul(&internals.norm_weight.unwrap())
            .unwrap()
            .broadcast_add(&beta)
            .unwrap();
        let difference = (rebuilt - &out.hidden)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_scalar::<f64>()
            .unwrap();
        assert!(difference < 1e-5, "{difference}");
        let plain = attention.forward(&x, Keep::default(), None, None).unwrap();
        assert!(plain.internals.is_none() && plain.probe.is_none());
    }
}
