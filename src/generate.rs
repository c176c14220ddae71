//! Generating text token by token (greedy or seeded sampling), keeping the attention of
//! every step as one causal attention stack.

use std::mem::take;

use candle_core::{DType, Tensor};

use crate::attention::AttentionStack;
use crate::error::{Error, Result};
use crate::model::causal::{CausalLm, KvCache, StepOutput};

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
) -> Result<Generation> {
    let asked = Prompt {
        ids: prompt,
        count,
        decoding,
    };
    generate_many(model, &[asked])?
        .pop()
        .expect("one generation per prompt")
}

/// What to generate from one prompt.
#[derive(Debug, Clone, Copy)]
pub struct Prompt<'a> {
    /// The prompt's ids (≥ 1, with `ids.len() + count ≤` the model's positions).
    pub ids: &'a [u32],
    /// How many tokens to generate (≥ 1), fewer if an end-of-text id comes.
    pub count: usize,
    pub decoding: Decoding,
}

/// [`generate`] from several prompts at once: each step feeds every unfinished prompt's
/// new tokens through the model together ([`CausalLm::step_lines`]), each prompt's
/// attention on its own cache. A prompt alone feeds one row a step after its first, which
/// candle's CPU product multiplies with gemv, where the rows of several prompts take its
/// general kernel: each generation is its prompt's alone within float32 rounding, the
/// same tokens (tests/batching.rs). One result per prompt (a prompt whose logits are not
/// finite gets its error, the others go on); an error of the model's step itself is every
/// prompt's, returned as the whole call's.
pub fn generate_many(model: &dyn CausalLm, prompts: &[Prompt]) -> Result<Vec<Result<Generation>>> {
    let mut lines: Vec<Line> = prompts.iter().map(Line::new).collect();
    let mut caches: Vec<KvCache> = prompts.iter().map(|_| KvCache::default()).collect();
    loop {
        let running: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].done.is_none())
            .collect();
        if running.is_empty() {
            break;
        }
        // Where the model runs every position again (Phi-3 past its original context), the
        // attention of every position comes from that run.
        for &i in &running {
            if model.recomputes(caches[i].len(), lines[i].feed.len()) {
                caches[i] = KvCache::default();
                lines[i].restart();
            }
        }
        let feeds: Vec<&[u32]> = running.iter().map(|&i| lines[i].feed.as_slice()).collect();
        let mut stepped: Vec<KvCache> = running.iter().map(|&i| take(&mut caches[i])).collect();
        let outputs = model.step_lines(&feeds, &mut stepped)?;
        for ((&i, cache), output) in running.iter().zip(stepped).zip(outputs) {
            caches[i] = cache;
            lines[i].advance(&output, model.eos());
        }
    }
    Ok(lines
        .into_iter()
        .map(|line| line.done.expect("every line has finished"))
        .collect())
}

/// One prompt's generation under way.
struct Line<'a> {
    prompt: Prompt<'a>,
    rng: SplitMix64,
    /// The ids of the next step.
    feed: Vec<u32>,
    ids: Vec<u32>,
    /// Each step's attention, per layer `[1, heads, q, seen + q]`.
    steps: Vec<Vec<Tensor>>,
    done: Option<Result<Generation>>,
}

impl<'a> Line<'a> {
    fn new(prompt: &Prompt<'a>) -> Self {
        Self {
            prompt: *prompt,
            rng: SplitMix64(match prompt.decoding {
                Decoding::Sample { seed, .. } => seed,
                Decoding::Greedy => 0,
            }),
            feed: prompt.ids.to_vec(),
            ids: Vec::with_capacity(prompt.count),
            steps: Vec::new(),
            done: None,
        }
    }

    /// From the first position again: the prompt and every token generated so far.
    fn restart(&mut self) {
        self.feed = [self.prompt.ids, &self.ids].concat();
        self.steps.clear();
    }

    /// A step's output: its attention kept, the next token chosen, and the line done when it
    /// is an end-of-text id (of `eos`) or the last asked for.
    fn advance(&mut self, step: &StepOutput, eos: &[u32]) {
        self.steps.push(step.attentions());
        let next = match self.next(&step.logits) {
            Ok(next) => next,
            Err(e) => {
                self.done = Some(Err(e));
                return;
            }
        };
        self.ids.push(next);
        let stopped_at_eos = eos.contains(&next);
        if stopped_at_eos || self.ids.len() == self.prompt.count {
            let n = self.prompt.ids.len() + self.ids.len() - 1;
            self.done = Some(assemble(&self.steps, n).map(|attention| Generation {
                ids: take(&mut self.ids),
                attention,
                stopped_at_eos,
            }));
            self.steps.clear();
        }
        self.feed = vec![next];
    }

    /// The next token from a step's logits (`[vocab]`).
    fn next(&mut self, logits: &Tensor) -> Result<u32> {
        let logits: Vec<f32> = logits.to_dtype(DType::F32)?.to_vec1()?;
        if logits.iter().any(|l| !l.is_finite()) {
            return Err(Error::NotFinite {
                what: "the language-model head's output".into(),
            });
        }
        Ok(match self.prompt.decoding {
            Decoding::Greedy => argmax(&logits),
            Decoding::Sample { temperature, .. } => {
                sample(&logits, temperature, self.rng.next_unit())
            }
        })
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
