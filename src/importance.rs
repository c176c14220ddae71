//! Importance scores for a predicted word, to check relevance maps against (Abnar & Zuidema
//! 2020, §4): input gradients and blank-out.

use candle_core::{DType, Tensor, Var, D};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{Keep, Model};

/// The token that blank-out puts in place of each input token in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Blank {
    /// The paper's choice.
    #[default]
    Unk,
    Mask,
    /// config.json's `pad_token_id`: the blank of a decoder's classifier, whose vocabulary
    /// has neither of the others.
    Pad,
}

impl Blank {
    /// How the blank token may be spelled, BERT's way first (none for `Pad`, which is an id).
    pub fn tokens(self) -> &'static [&'static str] {
        match self {
            Blank::Unk => &crate::tokens::UNKNOWN,
            Blank::Mask => &["[MASK]", "<mask>"],
            Blank::Pad => &[],
        }
    }
}

/// How much each input token matters for p(word) at the target (or p(label)), `n` values
/// per score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Importance {
    pub word: String,
    pub id: u32,
    /// p(word) at the target for the unchanged text.
    pub probability: f64,
    pub blank_token: String,
    /// `‖∂p/∂e_j‖₂`, with `e_j` the word embedding of token j.
    pub gradient_norm: Vec<f64>,
    /// `Σ_d (∂p/∂e_j)_d · (e_j)_d`: signed, positive where the token raises p; 0 where the
    /// model answers e and αe alike (ModernBERT, DeBERTa-v3: a norm reads the words alone).
    pub gradient_x_input: Vec<f64>,
    /// `p − p(token j blanked)`: positive where blanking the token lowers p.
    pub blank_out: Vec<f64>,
    /// The paper's code's "grad" and "inputgrad" (samiraabnar/attention_flow), taken at the
    /// word embeddings (its notebooks take them at the block's output, below):
    /// `|Σ_d (∂p/∂e_j)_d|`, the absolute sum of the gradient's components (0 where a
    /// LayerNorm's mean comes first: every post-norm encoder, ModernBERT);
    #[serde(default)]
    pub gradient_sum_abs: Vec<f64>,
    /// `|Σ_d (∂p/∂e_j)_d · (e_j)_d|`, gradient × input without its sign;
    #[serde(default)]
    pub gradient_x_input_abs: Vec<f64>,
    /// `|p − p(token j blanked)|`, the absolute drop.
    #[serde(default)]
    pub blank_out_abs: Vec<f64>,
    /// The paper's "grad" as its code takes it, at the embedding block's output `h_j` (word,
    /// position and token-type embeddings after their LayerNorm: what the first layer reads,
    /// and what the code's `model.distilbert.embeddings(ids)` returns):
    /// `|Σ_d (∂p/∂h_j)_d|`;
    #[serde(default)]
    pub embedding_gradient_sum_abs: Vec<f64>,
    /// and its "inputgrad" there: `|Σ_d (∂p/∂h_j)_d · (h_j)_d|`.
    #[serde(default)]
    pub embedding_gradient_x_input_abs: Vec<f64>,
    /// Integrated gradients (Sundararajan et al. 2017) of p from the baseline that puts the
    /// blank token's word embedding at every position, summed over the embedding: token j's
    /// share of `p − p(baseline)`, signed.
    #[serde(default)]
    pub integrated_gradients: Vec<f64>,
    /// How well those shares add up to the difference they divide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrated_gradients_check: Option<Completeness>,
}

/// Integrated gradients' completeness: the attributions should sum to `p − p(baseline)`;
/// the quadrature's error shrinks as the steps grow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Completeness {
    /// Points of the Gauss–Legendre rule along the path.
    pub steps: usize,
    /// The attributions' sum.
    pub sum: f64,
    /// `p − p(baseline)`.
    pub difference: f64,
    /// `sum − difference` (captum's convergence delta).
    pub delta: f64,
}

impl Completeness {
    /// Whether the attributions sum to the difference within 1% of it.
    pub fn holds(&self) -> bool {
        self.delta.abs() <= 0.01 * self.difference.abs()
    }
}

/// Every importance score by name, in the order reports list them: today's signed and
/// L2 scores, then the paper's absolute ones, integrated gradients, and the paper's
/// gradients at the embedding block's output.
pub const SCORES: [&str; 9] = [
    "gradient_norm",
    "gradient_x_input",
    "blank_out",
    "gradient_sum_abs",
    "gradient_x_input_abs",
    "blank_out_abs",
    "integrated_gradients",
    "embedding_gradient_sum_abs",
    "embedding_gradient_x_input_abs",
];

impl Importance {
    /// Every score's values, in the order of [`SCORES`].
    fn values(&self) -> [&Vec<f64>; 9] {
        [
            &self.gradient_norm,
            &self.gradient_x_input,
            &self.blank_out,
            &self.gradient_sum_abs,
            &self.gradient_x_input_abs,
            &self.blank_out_abs,
            &self.integrated_gradients,
            &self.embedding_gradient_sum_abs,
            &self.embedding_gradient_x_input_abs,
        ]
    }

    /// `(name, one value per token)` for every score of [`SCORES`] this report holds (one
    /// written before a score existed lacks it).
    pub fn scores(&self) -> Vec<(&'static str, &[f64])> {
        SCORES
            .into_iter()
            .zip(self.values())
            .filter(|(_, v)| !v.is_empty())
            .map(|(name, v)| (name, v.as_slice()))
            .collect()
    }

    /// Every score restricted to the positions `keep` lists, in its order.
    pub fn pick(&mut self, keep: &[usize]) {
        for scores in self.values_mut() {
            if !scores.is_empty() {
                *scores = keep.iter().map(|&j| scores[j]).collect();
            }
        }
    }

    /// [`Self::values`], to change.
    fn values_mut(&mut self) -> [&mut Vec<f64>; 9] {
        [
            &mut self.gradient_norm,
            &mut self.gradient_x_input,
            &mut self.blank_out,
            &mut self.gradient_sum_abs,
            &mut self.gradient_x_input_abs,
            &mut self.blank_out_abs,
            &mut self.integrated_gradients,
            &mut self.embedding_gradient_sum_abs,
            &mut self.embedding_gradient_x_input_abs,
        ]
    }
}

/// What to score: the word (or label) and its id among the head's outputs, and the
/// blank-out token.
pub struct ImportanceQuery {
    pub word: String,
    pub id: u32,
    pub blank_token: String,
    pub blank_id: u32,
    /// Points of integrated gradients' quadrature.
    pub steps: usize,
}

/// Scores every token of `ids` (one sequence of token types `types`, no padding) for
/// p(`query.id`) at `target`.
pub fn importance(
    model: &Model,
    ids: &[u32],
    types: &[u32],
    target: usize,
    query: &ImportanceQuery,
) -> Result<Importance> {
    let device = model.device();
    let input = Tensor::new(ids, device)?.unsqueeze(0)?;
    let type_ids = Tensor::new(types, device)?.unsqueeze(0)?;
    let words = Var::from_tensor(&model.embed_words(&input)?)?;
    // The gradient at the embedding block's output first (a variable of its own: candle
    // keeps no gradient of an intermediate tensor), then the chain rule back through the
    // block to the word embeddings: ∂p/∂e = (∂h/∂e)ᵀ ∂p/∂h.
    let block = model.embed(words.as_tensor(), Some(&type_ids))?;
    let embedded = Var::from_tensor(&block.detach())?;
    let p = probability_of(model, embedded.as_tensor(), target, query.id)?;
    let missing = || candle_core::Error::Msg("no gradient reached the input embeddings".into());
    let at_block = p
        .backward()?
        .get(embedded.as_tensor())
        .ok_or_else(missing)?
        .detach();
    let through = (&block * &at_block)?.sum_all()?;
    let grad = through
        .backward()?
        .get(words.as_tensor())
        .ok_or_else(missing)?
        .squeeze(0)?;
    let (at_block, block) = (at_block.squeeze(0)?, block.detach().squeeze(0)?);
    let embedding_sum = host(&at_block.sum(D::Minus1)?)?;
    let embedding_x_input = host(&(&at_block * &block)?.sum(D::Minus1)?)?;
    let embeddings = words.as_tensor().squeeze(0)?;
    let gradient_norm = grad.sqr()?.sum(D::Minus1)?.sqrt()?;
    // Where the model answers e and αe alike, the sum is the derivative along e: zero, and
    // what f32 arithmetic leaves of it is rounding, not a ranking.
    let gradient_x_input = match model.scale_free_words() {
        true => vec![0.0; ids.len()],
        false => host(&(&grad * &embeddings)?.sum(D::Minus1)?)?,
    };
    // The same for the derivative along the all-ones direction, where a LayerNorm's mean
    // comes first.
    let gradient_sum = match model.shift_free_words() {
        true => vec![0.0; ids.len()],
        false => host(&grad.sum(D::Minus1)?)?,
    };
    let baseline = scalar(&p)?;
    let blank_out: Vec<f64> = blank_out(model, ids, types, target, query)?
        .iter()
        .map(|q| baseline - q)
        .collect();
    let absolute = |v: &[f64]| v.iter().map(|x| x.abs()).collect();
    let text = Text {
        words: &words.as_tensor().detach(),
        types: &type_ids,
        p: baseline,
    };
    let (integrated_gradients, check) = integrated_gradients(model, &text, target, query)?;
    let scores = Importance {
        word: query.word.clone(),
        id: query.id,
        probability: baseline,
        blank_token: query.blank_token.clone(),
        gradient_norm: host(&gradient_norm)?,
        gradient_sum_abs: absolute(&gradient_sum),
        gradient_x_input_abs: absolute(&gradient_x_input),
        gradient_x_input,
        blank_out_abs: absolute(&blank_out),
        blank_out,
        integrated_gradients,
        integrated_gradients_check: Some(check),
        embedding_gradient_sum_abs: absolute(&embedding_sum),
        embedding_gradient_x_input_abs: absolute(&embedding_x_input),
    };
    let all = scores.scores();
    if !baseline.is_finite() || all.iter().any(|(_, v)| v.iter().any(|x| !x.is_finite())) {
        return Err(Error::NotFinite {
            what: "an importance score (gradient or blank-out)".into(),
        });
    }
    Ok(scores)
}

/// Integrated gradients of p(`query.id`) at `target` along the straight path from the
/// blank token's word embedding at every position to the text's, with the Gauss–Legendre
/// rule of `query.steps` points (as captum's default): per token, the attributions summed
/// over the embedding, and their completeness. The points go through the model a few at a
/// time (fewer the longer the text: each keeps every layer's activations for the backward
/// pass), so memory stays that of a small batch whatever the steps.
fn integrated_gradients(
    model: &Model,
    text: &Text,
    target: usize,
    query: &ImportanceQuery,
) -> Result<(Vec<f64>, Completeness)> {
    let n = text.words.dim(1)?.max(1);
    let points_at_a_time = (PAIRS_PER_BATCH / 4 / (n * n)).clamp(1, 10);
    let device = model.device();
    let blanks = vec![query.blank_id; n];
    let baseline = model.embed_words(&Tensor::new(blanks.as_slice(), device)?.unsqueeze(0)?)?;
    let path = (text.words - &baseline)?;
    let (nodes, weights) = gauss_legendre(query.steps);
    let dtype = text.words.dtype();
    let mut total = path.zeros_like()?;
    for (alphas, weights) in nodes
        .chunks(points_at_a_time)
        .zip(weights.chunks(points_at_a_time))
    {
        let k = alphas.len();
        let alphas = Tensor::new(alphas, device)?
            .to_dtype(dtype)?
            .reshape((k, 1, 1))?;
        let points = Var::from_tensor(&baseline.broadcast_add(&path.broadcast_mul(&alphas)?)?)?;
        let p = probability(model, points.as_tensor(), text.types, target, query.id)?;
        let weights = Tensor::new(weights, device)?.to_dtype(dtype)?;
        let weighted = p.reshape(k)?.mul(&weights)?.sum_all()?;
        let gradients = weighted.backward()?;
        let grad = gradients.get(points.as_tensor()).ok_or_else(|| {
            candle_core::Error::Msg("no gradient reached the path's embeddings".into())
        })?;
        total = (total + grad.sum_keepdim(0)?)?;
    }
    let attributions = host(&(total * &path)?.sum(D::Minus1)?.squeeze(0)?)?;
    let blank = scalar(&probability(
        model, &baseline, text.types, target, query.id,
    )?)?;
    let sum: f64 = attributions.iter().sum();
    let difference = text.p - blank;
    let check = Completeness {
        steps: query.steps,
        sum,
        difference,
        delta: sum - difference,
    };
    Ok((attributions, check))
}

/// The text whose tokens [`integrated_gradients`] scores, as [`importance`] already has it.
struct Text<'a> {
    /// Its word embeddings, `[1, n, width]`, and token types, `[1, n]`.
    words: &'a Tensor,
    types: &'a Tensor,
    /// p(`query.id`) at the target.
    p: f64,
}

/// Gauss–Legendre quadrature on [0, 1] with `n` points: the nodes and their weights, which
/// sum to 1 (numpy's `leggauss` moved to [0, 1], as captum uses it). Each node is a root of
/// the Legendre polynomial P_n, found by Newton's method from the usual first guess.
pub fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    // P_n(x) and P_n'(x) by the three-term recurrence.
    let legendre = |x: f64| -> (f64, f64) {
        let (mut p, mut below) = (1.0, 0.0);
        for k in 0..n {
            let next = ((2 * k + 1) as f64 * x * p - k as f64 * below) / (k + 1) as f64;
            below = p;
            p = next;
        }
        (p, n as f64 * (x * p - below) / (x * x - 1.0))
    };
    (0..n)
        .map(|i| {
            let mut x = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
            for _ in 0..100 {
                let (p, dp) = legendre(x);
                let step = p / dp;
                x -= step;
                if step.abs() < 1e-16 {
                    break;
                }
            }
            let (_, dp) = legendre(x);
            ((1.0 + x) / 2.0, 1.0 / ((1.0 - x * x) * dp * dp))
        })
        .unzip()
}

/// `words`: `[b, n, width]`, `types`: `[1, n]` → p(`id`) at `target` for each sequence,
/// `[b]` (a scalar `[]` when b = 1, ready for `backward`).
fn probability(
    model: &Model,
    words: &Tensor,
    types: &Tensor,
    target: usize,
    id: u32,
) -> Result<Tensor> {
    let types = types
        .broadcast_as(words.dims()[..2].to_vec())?
        .contiguous()?;
    probability_of(model, &model.embed(words, Some(&types))?, target, id)
}

/// [`probability`] from the embedding block's output `[b, n, hidden]`.
fn probability_of(model: &Model, embedded: &Tensor, target: usize, id: u32) -> Result<Tensor> {
    let logits = model
        .forward_embedded(embedded, target, Keep::default())?
        .logits
        .ok_or(Error::NeedsMlmHead {
            what: "importance scores",
            model: "this checkpoint".into(),
        })?;
    let probs = candle_nn::ops::softmax(&logits, D::Minus1)?;
    Ok(probs.narrow(1, id as usize, 1)?.squeeze(1)?.squeeze(0)?)
}

/// p(`query.id`) with each token in turn replaced by the blank, all n texts in one batch.
fn blank_out(
    model: &Model,
    ids: &[u32],
    types: &[u32],
    target: usize,
    query: &ImportanceQuery,
) -> Result<Vec<f64>> {
    let n = ids.len();
    let mut batch = Vec::with_capacity(n * n);
    for j in 0..n {
        batch.extend(
            ids.iter()
                .enumerate()
                .map(|(i, &id)| if i == j { query.blank_id } else { id }),
        );
    }
    let input = Tensor::from_vec(batch, (n, n), model.device())?;
    probabilities(model, &input, types, target, query.id)
}

/// How many token pairs (texts × n × n) one batch of blanked texts may hold: every layer's
/// attention of a batch is texts × heads × n × n values, so blanking each of 475 tokens in one
/// batch held gigabytes.
const PAIRS_PER_BATCH: usize = 1 << 20;

/// p(`id`) at `target` for each text of a batch `ids` (`[b, n]` u32), all with the token
/// types `types`; the texts go through the model a few at a time, so memory stays bounded
/// whatever b and n.
pub fn probabilities(
    model: &Model,
    ids: &Tensor,
    types: &[u32],
    target: usize,
    id: u32,
) -> Result<Vec<f64>> {
    let (texts, n) = ids.dims2()?;
    let chunk = (PAIRS_PER_BATCH / (n * n).max(1)).max(1);
    let type_ids = Tensor::new(types, model.device())?.unsqueeze(0)?;
    let mut out = Vec::with_capacity(texts);
    for start in (0..texts).step_by(chunk) {
        let words = model.embed_words(&ids.narrow(0, start, chunk.min(texts - start))?)?;
        out.extend(host(
            &probability(model, &words, &type_ids, target, id)?.flatten_all()?,
        )?);
    }
    Ok(out)
}

fn host(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?.to_vec1()?)
}

fn scalar(t: &Tensor) -> Result<f64> {
    Ok(t.to_dtype(DType::F64)?.to_scalar()?)
}

#[cfg(test)]
mod tests {
    use super::gauss_legendre;

    #[test]
    fn gauss_legendre_integrates_polynomials_of_degree_below_2n_exactly() {
        for n in [1, 3, 50] {
            let (nodes, weights) = gauss_legendre(n);
            assert!(nodes.iter().all(|x| (0.0..=1.0).contains(x)));
            for k in 0..2 * n.min(10) {
                let integral: f64 = nodes
                    .iter()
                    .zip(&weights)
                    .map(|(x, w)| w * x.powi(k as i32))
                    .sum();
                assert!(
                    (integral - 1.0 / (k + 1) as f64).abs() < 1e-13,
                    "n {n}, x^{k}: {integral}"
                );
            }
        }
        // numpy.polynomial.legendre.leggauss(2) moved to [0, 1]: (1 ± 1/√3) / 2, weights 1/2.
        let (nodes, weights) = gauss_legendre(2);
        let low = (1.0 - 1.0 / 3f64.sqrt()) / 2.0;
        assert!((nodes[1] - low).abs() < 1e-15 && (weights[0] - 0.5).abs() < 1e-15);
    }
}
