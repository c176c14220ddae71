//! Generating text token by token (greedy or seeded sampling), keeping the attention of
//! every step as one causal attention stack.

use candle_core::{DType, Device, Tensor};

use crate::attention::AttentionStack;
use crate::error::{Error, Result};
use crate::model::causal::{CausalLm, KvCache};
use crate::model::Keep;

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decoding {
    /// The most probable token (the first one on ties), as transformers' greedy search.
    Greedy,
    /// Drawn from `softmax(logits / temperature)` with a generator seeded by `seed`.
    Sample { seed: u64, temperature: f64 },
}

/// The generated tokens and the attention that produced them.
pub struct Generation {
    /// The new tokens, at most the number asked for.
    pub ids: Vec<u32>,
    /// `[layers, heads, N, N]` over the N = m + g − 1 positions that were fed to the model
    /// (m prompt tokens, g generated; the last generated token is never fed back). Row i is
    /// the attention position i paid when it was processed; entries j > i are 0.
    pub attention: AttentionStack,
    /// Whether generation stopped early at the end-of-text token (which is included).
    pub stopped_at_eos: bool,
}

/// Generates up to `count` (≥ 1) tokens after `prompt` (≥ 1 tokens, with
/// `prompt.len() + count ≤` the model's positions), stopping after one of the model's
/// end-of-text ids if it comes.
pub fn generate(
    model: &dyn CausalLm,
    prompt: &[u32],
    count: usize,
    decoding: Decoding,
    device: &Device,
) -> Result<Generation> {
    let mut cache = KvCache::default();
    let mut rng = SplitMix64(match decoding {
        Decoding::Sample { seed, .. } => seed,
        Decoding::Greedy => 0,
    });
    let mut feed = prompt.to_vec();
    let mut steps: Vec<Vec<Tensor>> = Vec::new();
    let mut ids = Vec::with_capacity(count);
    loop {
        // Where the model runs every position again (Phi-3 past its original context), the
        // attention of every position comes from that run.
        if model.recomputes(cache.len(), feed.len()) {
            cache = KvCache::default();
            feed = [prompt, &ids].concat();
            steps.clear();
        }
        let input = Tensor::new(feed.as_slice(), device)?.unsqueeze(0)?;
        let step = model.step(&input, &mut cache, Keep::default())?;
        steps.push(step.attentions());
        let logits: Vec<f32> = step.logits.to_dtype(DType::F32)?.to_vec1()?;
        if logits.iter().any(|l| !l.is_finite()) {
            return Err(Error::NotFinite {
                what: "the language-model head's output".into(),
            });
        }
        let next = match decoding {
            Decoding::Greedy => argmax(&logits),
            Decoding::Sample { temperature, .. } => sample(&logits, temperature, rng.next_unit()),
        };
        ids.push(next);
        let stopped_at_eos = model.eos().contains(&next);
        if stopped_at_eos || ids.len() == count {
            let attention = assemble(&steps, prompt.len() + ids.len() - 1)?;
            return Ok(Generation {
                ids,
                attention,
                stopped_at_eos,
            });
        }
        feed = vec![next];
    }
}

/// Per step, per layer `[1, heads, q, seen + q]` → one `[layers, heads, n, n]` stack.
fn assemble(steps: &[Vec<Tensor>], n: usize) -> Result<AttentionStack> {
    let layers = steps[0].len();
    let per_layer = (0..layers)
        .map(|l| {
            let rows = steps
                .iter()
                .map(|step| {
                    let width = step[l].dims()[3];
                    Ok(step[l].pad_with_zeros(3, 0, n - width)?)
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Tensor::cat(&rows, 2)?)
        })
        .collect::<Result<Vec<_>>>()?;
    AttentionStack::from_tensors(&per_layer)
}

/// The index of the largest logit, the first on ties.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &value) in logits.iter().enumerate() {
        if value > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The token whose cumulative probability first exceeds `unit` ∈ [0, 1), with
/// `p_i ∝ exp((logit_i − max) / temperature)` computed in f64.
pub fn sample(logits: &[f32], temperature: f64, unit: f64) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| ((l as f64 - max) / temperature).exp())
        .collect();
    let mut left = unit * weights.iter().sum::<f64>();
    for (i, w) in weights.iter().enumerate() {
        if left < *w {
            return i as u32;
        }
        left -= w;
    }
    // Rounding can leave a sliver past the last weight: take the last likely token.
    weights.iter().rposition(|&w| w > 0.0).unwrap_or(0) as u32
}

/// Steele, Lea & Flood's SplitMix64: small, fast, and the same stream on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_ties() {
        assert_eq!(argmax(&[0.1, 0.7, 0.7, -1.0]), 1);
    }

    #[test]
    fn sampling_follows_the_cumulative_distribution() {
        // exp(0) : exp(ln 3) = 1 : 3, so [0, 0.25) → 0 and [0.25, 1) → 1.
        let logits = [0.0, 3f32.ln()];
        assert_eq!(sample(&logits, 1.0, 0.2), 0);
        assert_eq!(sample(&logits, 1.0, 0.3), 1);
        // A low temperature sharpens towards the argmax.
        assert_eq!(sample(&logits, 0.01, 0.2), 1);
        assert_eq!(sample(&[f32::NEG_INFINITY, 0.0], 1.0, 0.999_999), 1);
    }

    #[test]
    fn splitmix_is_seeded_and_uniform() {
        let draws = |seed| {
            let mut rng = SplitMix64(seed);
            (0..4).map(|_| rng.next_unit()).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        assert!(draws(1).iter().all(|u| (0.0..1.0).contains(u)));
        // The published first output of SplitMix64 seeded with 0.
        assert_eq!(SplitMix64(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }
}
