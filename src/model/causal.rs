//! The causal-LM seam: one trait that every decoder family implements (a step over new ids
//! with a key/value cache, keeping attention), and what a decoder family is ([`Decoder`]:
//! the registry `DECODERS` in families/mod.rs picks one by config.json's `model_type`).
//! Generation and the causal explainer know only this trait.

use std::path::Path;

use candle_core::Tensor;
use serde::{Deserialize, Deserializer};

use super::attention::{head_values, line_by_line, weigh, Weighted};
use super::{rules, Keep, LayerInternals, LayerTrace};
use crate::checkpoint::Weights;
use crate::error::Result;
use crate::linalg::{matmul, Dense};

/// One family of causal (decoder) checkpoints: its `model_type`s, and its model built from
/// config.json and the weights.
pub struct Decoder {
    pub model_types: &'static [&'static str],
    pub load: fn(config: &Path, weights: &Weights) -> Result<Box<dyn CausalLm>>,
    /// A rotary decoder's description, which its classifier's body is built from too
    /// (`None`: GPT-2).
    pub spec: Option<fn(config: &Path) -> Result<super::decoder::Spec>>,
}

/// The keys and values of the positions seen so far, one entry per layer.
#[derive(Default)]
pub struct KvCache {
    /// Per layer: keys and values, each `[1, kv_heads, seen, head_size]`.
    pub(crate) layers: Vec<Option<(Tensor, Tensor)>>,
}

impl KvCache {
    /// How many positions the cache holds.
    pub fn len(&self) -> usize {
        match self.layers.first() {
            Some(Some((k, _))) => k.dims()[2],
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one forward step yields.
pub struct StepOutput {
    /// `[vocab]`: the next-token logits at the last fed position.
    pub logits: Tensor,
    /// One trace per layer, first layer first. Its probabilities are `[1, heads, q, seen + q]`
    /// (grouped-query heads expanded to the query heads' count): the attention rows of the
    /// `q` fed positions over every position so far (zero where the mask hides); with
    /// `keep.internals` its head values cover all `seen + q` positions and its input the `q`
    /// fed ones. Causal families are pre-norm: no norm after attention.
    pub layers: Vec<LayerTrace>,
}

impl StepOutput {
    /// One `[1, heads, q, seen + q]` tensor per layer.
    pub fn attentions(&self) -> Vec<Tensor> {
        self.layers.iter().map(|l| l.probs.clone()).collect()
    }
}

/// The sizes generation and the explainer check input against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CausalDims {
    pub vocab_size: usize,
    /// The context: prompt plus generated tokens must fit.
    pub max_positions: usize,
    pub layers: usize,
    /// Query heads (the count attention is reported with).
    pub heads: usize,
    /// The feed-forward block's width.
    pub intermediate: usize,
}

/// A decoder with its language-model head, of any causal family.
pub trait CausalLm: Send + Sync {
    /// The family's main `model_type` ("gpt2", "llama", "qwen2", "mistral").
    fn model_type(&self) -> &'static str;

    fn dims(&self) -> CausalDims;

    /// The ids that end generation (Llama 3 configs list several).
    fn eos(&self) -> &[u32];

    /// `ids`: `[1, q]` u32, the positions after those in `cache`, which this call extends.
    fn step(&self, ids: &Tensor, cache: &mut KvCache, keep: Keep) -> Result<StepOutput>;

    /// Several lines' steps in one pass: line i's `feeds[i]` (≥ 1 ids) after the positions
    /// in `caches[i]`, which it extends. Their rows go through each dense layer together,
    /// one after another; each line's attention runs on its own cache. → one output per
    /// line, the one [`CausalLm::step`] gives the line alone with nothing kept, within
    /// float32 rounding (the products of its rows take other kernels beside other rows).
    fn step_lines(&self, feeds: &[&[u32]], caches: &mut [KvCache]) -> Result<Vec<StepOutput>>;

    /// Whether a step from `seen` cached positions with `q` new ones must run every position
    /// again instead: Phi-3's LongRoPE, once the text passes its original context, rotates
    /// every position with its long factors, and transformers then drops the cache (its
    /// `prepare_inputs_for_generation`), so the keys in it were rotated with the short ones.
    fn recomputes(&self, _seen: usize, _q: usize) -> bool {
        false
    }

    /// `ids`: `[b, n]` u32 → their word embeddings `[b, n, width]` as the model's lookup
    /// returns them (× √hidden for Gemma), what gradients are taken with respect to.
    fn embed_words(&self, ids: &Tensor) -> Result<Tensor>;

    /// Word embeddings of positions `0..n` (`[b, n, width]`) → the next-token logits after
    /// each sequence, `[b, vocab]`: every position at once, without a cache, so that
    /// gradients reach the words.
    fn next_logits(&self, words: &Tensor) -> Result<Tensor>;

    /// Whether moving a word embedding along the all-ones direction leaves every logit as it
    /// is (GPT-2's: every path from the words enters a LayerNorm, which takes the mean
    /// out), so that the gradient's components sum to zero there by construction.
    fn shift_free_words(&self) -> bool {
        false
    }

    /// Layer `layer` (0-based) alone on its input `x` (`[b, n, hidden]`, positions `0..n`,
    /// no cache), each position's value vectors multiplied by `value_mask` (`[b, n]`) → its
    /// output `[b, n, hidden]` (value zeroing).
    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor>;
}

/// Where one line's rows are in a step over several lines ([`CausalLm::step_lines`]): its
/// `q` new positions are rows `start..start + q` of the step's `[1, rows]` input, after the
/// `seen` in its cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fed {
    pub start: usize,
    pub q: usize,
    pub seen: usize,
}

/// The cache one layer's causal attention step reads and extends.
pub(crate) enum Cached<'a> {
    /// The layer's cache of every line of the batch alike, after the positions `seen` in it
    /// (`None`: nothing seen yet, or no cache kept).
    Alike(&'a mut Option<(Tensor, Tensor)>, usize),
    /// Lines one after another along the positions of a batch of one, each with its cache.
    Lines(Vec<(&'a mut Option<(Tensor, Tensor)>, Fed)>),
}

impl<'a> Cached<'a> {
    /// Every layer's cache of lines `fed`, one [`KvCache`] a line (made ready by [`pack`]).
    pub fn lines(caches: &'a mut [KvCache], fed: &[Fed]) -> Vec<Self> {
        let layers = caches.first().map_or(0, |cache| cache.layers.len());
        let mut each: Vec<Vec<_>> = (0..layers).map(|_| Vec::new()).collect();
        for (cache, fed) in caches.iter_mut().zip(fed) {
            for (layer, kv) in each.iter_mut().zip(cache.layers.iter_mut()) {
                layer.push((kv, *fed));
            }
        }
        each.into_iter().map(Cached::Lines).collect()
    }
}

/// The position of each row of a step over lines `fed`, first row first.
pub(crate) fn positions(fed: &[Fed]) -> Vec<u32> {
    (fed.iter())
        .flat_map(|f| (f.seen..f.seen + f.q).map(|p| p as u32))
        .collect()
}

/// Several lines' ids as one step's `[1, rows]` input, one line after another, and where
/// each line is; each cache made ready for `layers` layers.
pub(crate) fn pack(
    feeds: &[&[u32]],
    caches: &mut [KvCache],
    layers: usize,
    device: &candle_core::Device,
) -> Result<(Tensor, Vec<Fed>)> {
    let mut fed = Vec::with_capacity(feeds.len());
    let mut start = 0;
    for (feed, cache) in feeds.iter().zip(caches.iter_mut()) {
        cache.layers.resize(layers, None);
        fed.push(Fed {
            start,
            q: feed.len(),
            seen: cache.len(),
        });
        start += feed.len();
    }
    let ids = Tensor::new(feeds.concat(), device)?.unsqueeze(0)?;
    Ok((ids, fed))
}

/// `x`: `[1, rows, hidden]` → each line's last row, `[lines, hidden]`.
pub(crate) fn last_rows(x: &Tensor, fed: &[Fed]) -> Result<Tensor> {
    let rows: Vec<u32> = fed.iter().map(|f| (f.start + f.q - 1) as u32).collect();
    let rows = Tensor::new(rows, x.device())?;
    Ok(x.squeeze(0)?.index_select(&rows, 0)?)
}

/// One output per line of a step over lines `fed`: its row of `logits` (`[lines, vocab]`)
/// and, of each layer's probabilities (`[1, heads, rows, widest]`), its rows over its
/// positions.
pub(crate) fn unpack(
    logits: &Tensor,
    traces: &[LayerTrace],
    fed: &[Fed],
) -> Result<Vec<StepOutput>> {
    fed.iter()
        .enumerate()
        .map(|(i, f)| {
            let layers = traces
                .iter()
                .map(|trace| {
                    Ok(LayerTrace {
                        probs: trace
                            .probs
                            .narrow(2, f.start, f.q)?
                            .narrow(3, 0, f.seen + f.q)?,
                        probe: None,
                        internals: None,
                        head_sums: None,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(StepOutput {
                logits: logits.get(i)?,
                layers,
            })
        })
        .collect()
}

/// Where one causal attention step sits and what it keeps.
#[derive(Clone, Copy)]
pub(crate) struct Step<'a> {
    /// The sliding window, when the layer has one.
    pub window: Option<usize>,
    /// What the scores are multiplied by.
    pub scale: f64,
    /// Gemma 2's soft cap: scores become c·tanh(s / c) before the mask.
    pub softcap: Option<f64>,
    pub keep: Keep,
    /// `[b, q]`: each new position's value vectors multiplied by this (value zeroing).
    pub value_mask: Option<&'a Tensor>,
    /// Each line's tokens, where lines of different lengths were padded on the right (no
    /// cache): each line's attention on its own tokens alone
    /// ([`crate::model::attention::line_by_line`]).
    pub lengths: Option<&'a [usize]>,
}

/// What one causal attention step yields.
pub(crate) struct Attended {
    /// `[b, q, heads · d]`.
    pub context: Tensor,
    /// `[b, heads, q, seen + q]`; over several lines, `[1, heads, rows, widest seen + q]`,
    /// each line's rows zero past its own positions.
    pub probs: Tensor,
    /// With `keep.probes`: the zeros added to `probs`.
    pub probe: Option<candle_core::Var>,
    /// `[b, heads, seen + q, d]`: the values read (over several lines, which keep nothing:
    /// the rows' own).
    pub value: Tensor,
}

/// One causal attention step over a layer's cache: appends `key` and `value`
/// (`[b, kv_heads, q, d]`, the values multiplied by `step.value_mask` if any) to the cache,
/// maps the cached keys and values to the query heads with `expand` (grouped-query
/// attention; the identity otherwise), and attends from `query` (`[b, heads, q, d]`), each
/// position to itself and the ones before it (within the window when there is one). Over
/// several lines ([`Cached::Lines`], which keep nothing), each line's rows do so with its
/// own cache, as the line alone would.
pub(crate) fn cached_attention(
    query: &Tensor,
    (key, value): (Tensor, Tensor),
    cache: Cached,
    step: Step,
    expand: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Attended> {
    let lines = match cache {
        Cached::Alike(kv, seen) => return attend(query, (key, value), kv, seen, step, &expand),
        Cached::Lines(lines) => lines,
    };
    let widest = lines.iter().map(|(_, f)| f.seen + f.q).max().unwrap_or(0);
    let (mut contexts, mut probs) = (Vec::new(), Vec::new());
    for (kv, fed) in lines {
        let rows = |t: &Tensor| t.narrow(2, fed.start, fed.q);
        let line = (rows(&key)?, rows(&value)?);
        let one = attend(&rows(query)?, line, kv, fed.seen, step, &expand)?;
        contexts.push(one.context);
        probs.push(one.probs.pad_with_zeros(3, 0, widest - fed.seen - fed.q)?);
    }
    Ok(Attended {
        context: Tensor::cat(&contexts, 1)?,
        probs: Tensor::cat(&probs, 2)?,
        probe: None,
        value,
    })
}

/// [`cached_attention`] of lines that share their cache's length, `seen`.
fn attend(
    query: &Tensor,
    (key, value): (Tensor, Tensor),
    kv: &mut Option<(Tensor, Tensor)>,
    seen: usize,
    step: Step,
    expand: &impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Attended> {
    let (batch, heads, q, d) = query.dims4()?;
    let value = match step.value_mask {
        Some(mask) => value.broadcast_mul(&mask.unsqueeze(1)?.unsqueeze(3)?)?,
        None => value,
    };
    let (key, value) = match kv.as_ref() {
        Some((past_k, past_v)) => (
            Tensor::cat(&[past_k, &key], 2)?,
            Tensor::cat(&[past_v, &value], 2)?,
        ),
        None => (key, value),
    };
    *kv = Some((key.clone(), value.clone()));
    let (key, value) = (expand(&key)?, expand(&value)?);
    let attend = |query: &Tensor, key: &Tensor, value: &Tensor| -> Result<Weighted> {
        let scores = (rules::product(matmul(query, &key.t()?.contiguous()?)?)? * step.scale)?;
        let scores = soft_cap(scores, step.softcap)?;
        let mask = causal_mask(query.dim(2)?, seen, step.window, query.device())?;
        let scores = match mask {
            Some(mask) => scores.broadcast_add(&mask.to_dtype(scores.dtype())?)?,
            None => scores,
        };
        weigh(scores, value, step.keep)
    };
    let Weighted {
        probs,
        probe,
        context,
    } = line_by_line(query, &key, &value, step.lengths, attend)?;
    let context = context.transpose(1, 2)?.reshape((batch, q, heads * d))?;
    Ok(Attended {
        context,
        probs,
        probe,
        value,
    })
}

/// `c · tanh(x / c)` with a cap (an elementwise nonlinearity of [`rules`]), `x` itself
/// without.
pub(crate) fn soft_cap(x: Tensor, cap: Option<f64>) -> Result<Tensor> {
    match cap {
        Some(c) => rules::nonlinear(&x, |x| Ok(((x / c)?.tanh()? * c)?)),
        None => Ok(x),
    }
}

/// A norm between the attention block and the residual (Gemma 2 and 3): RMSNorm's weight
/// `[hidden]` and its `1 / rms` of each fed position's attention output, `[b, q]`.
pub(crate) struct AfterAttention {
    pub weight: Tensor,
    pub inverse_rms: Tensor,
}

/// What SPEC §8's methods read of a pre-norm decoder layer, when `keep` asks for it: its
/// input `x`, each head's values through its slice of `output` (the attention's output
/// projection) and that projection's bias. A norm `after` the attention block is linear
/// once its rms is fixed, so it goes into the parts: its weight into the head values, its
/// 1 / rms into each row's scale.
pub(crate) fn decoder_internals(
    keep: Keep,
    x: &Tensor,
    value: &Tensor,
    output: &Dense,
    after: Option<AfterAttention>,
) -> Result<Option<LayerInternals>> {
    if !keep.internals {
        return Ok(None);
    }
    let values = head_values(value, output.weight())?;
    let (head_values, row_scale) = match after {
        Some(norm) => (values.broadcast_mul(&norm.weight)?, Some(norm.inverse_rms)),
        None => (values, None),
    };
    Ok(Some(LayerInternals {
        input: x.clone(),
        head_values,
        norm_weight: None,
        norm_scale: None,
        norm_bias: None,
        output_bias: output.bias().cloned(),
        row_scale,
    }))
}

/// `[q, seen + q]`: 0 where row `seen + i` may look, −∞ where it may not: the future, and
/// with a window w the positions w or more back (transformers' sliding-window overlay);
/// `None` when nothing is hidden.
pub(crate) fn causal_mask(
    q: usize,
    seen: usize,
    window: Option<usize>,
    device: &candle_core::Device,
) -> Result<Option<Tensor>> {
    let width = seen + q;
    let hidden = |i: usize, j: usize| j > seen + i || window.is_some_and(|w| seen + i - j >= w);
    let values: Vec<f32> = (0..q)
        .flat_map(|i| (0..width).map(move |j| (i, j)))
        .map(|(i, j)| if hidden(i, j) { f32::NEG_INFINITY } else { 0.0 })
        .collect();
    if values.iter().all(|v| *v == 0.0) {
        return Ok(None);
    }
    Ok(Some(Tensor::from_vec(values, (q, width), device)?))
}

/// config.json's `eos_token_id`: absent, null, one id or a list of them.
pub(crate) fn eos_ids<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Eos {
        One(u32),
        Many(Vec<u32>),
    }
    Ok(match Option::<Eos>::deserialize(d)? {
        None => Vec::new(),
        Some(Eos::One(id)) => vec![id],
        Some(Eos::Many(ids)) => ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Config {
        #[serde(default, deserialize_with = "eos_ids")]
        eos_token_id: Vec<u32>,
    }

    #[test]
    fn eos_is_none_one_or_many() {
        let eos = |text: &str| serde_json::from_str::<Config>(text).unwrap().eos_token_id;
        assert_eq!(eos("{}"), Vec::<u32>::new());
        assert_eq!(eos(r#"{"eos_token_id": null}"#), Vec::<u32>::new());
        assert_eq!(eos(r#"{"eos_token_id": 7}"#), [7]);
        assert_eq!(eos(r#"{"eos_token_id": [1, 2]}"#), [1, 2]);
    }

    #[test]
    fn the_window_hides_positions_w_or_more_back() {
        let device = candle_core::Device::Cpu;
        let rows: Vec<Vec<f32>> = causal_mask(3, 0, Some(2), &device)
            .unwrap()
            .unwrap()
            .to_vec2()
            .unwrap();
        let inf = f32::NEG_INFINITY;
        assert_eq!(rows[2], [inf, 0.0, 0.0]);
        assert_eq!(rows[0], [0.0, inf, inf]);
        let step: Vec<Vec<f32>> = causal_mask(1, 4, Some(2), &device)
            .unwrap()
            .unwrap()
            .to_vec2()
            .unwrap();
        assert_eq!(step[0], [inf, inf, inf, 0.0, 0.0]);
        assert!(causal_mask(1, 4, None, &device).unwrap().is_none());
    }
}
