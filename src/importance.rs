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
}

impl Blank {
    /// How the blank token may be spelled, BERT's way first.
    pub fn tokens(self) -> [&'static str; 2] {
        match self {
            Blank::Unk => crate::tokens::UNKNOWN,
            Blank::Mask => ["[MASK]", "<mask>"],
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
    /// `Σ_d (∂p/∂e_j)_d · (e_j)_d`: signed, positive where the token raises p.
    pub gradient_x_input: Vec<f64>,
    /// `p − p(token j blanked)`: positive where blanking the token lowers p.
    pub blank_out: Vec<f64>,
}

/// What to score: the word (or label) and its id among the head's outputs, and the
/// blank-out token.
pub struct ImportanceQuery {
    pub word: String,
    pub id: u32,
    pub blank_token: String,
    pub blank_id: u32,
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
    let p = probability(model, words.as_tensor(), &type_ids, target, query.id)?;
    let gradients = p.backward()?;
    let grad = gradients
        .get(words.as_tensor())
        .ok_or_else(|| candle_core::Error::Msg("no gradient reached the input embeddings".into()))?
        .squeeze(0)?;
    let embeddings = words.as_tensor().squeeze(0)?;
    let gradient_norm = grad.sqr()?.sum(D::Minus1)?.sqrt()?;
    let gradient_x_input = (&grad * &embeddings)?.sum(D::Minus1)?;
    let baseline = scalar(&p)?;
    let blanked = blank_out(model, ids, types, target, query)?;
    let scores = Importance {
        word: query.word.clone(),
        id: query.id,
        probability: baseline,
        blank_token: query.blank_token.clone(),
        gradient_norm: host(&gradient_norm)?,
        gradient_x_input: host(&gradient_x_input)?,
        blank_out: blanked.iter().map(|q| baseline - q).collect(),
    };
    let all = [
        &scores.gradient_norm,
        &scores.gradient_x_input,
        &scores.blank_out,
    ];
    if !baseline.is_finite() || all.iter().any(|v| v.iter().any(|x| !x.is_finite())) {
        return Err(Error::NotFinite {
            what: "an importance score (gradient or blank-out)".into(),
        });
    }
    Ok(scores)
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
    let logits = model
        .forward_words(words, Some(&types), target, Keep::default())?
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

/// p(`id`) at `target` for each text of a batch `ids` (`[b, n]` u32), all with the token
/// types `types`.
pub fn probabilities(
    model: &Model,
    ids: &Tensor,
    types: &[u32],
    target: usize,
    id: u32,
) -> Result<Vec<f64>> {
    let type_ids = Tensor::new(types, model.device())?.unsqueeze(0)?;
    let words = model.embed_words(ids)?;
    host(&probability(model, &words, &type_ids, target, id)?.flatten_all()?)
}

fn host(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?.to_vec1()?)
}

fn scalar(t: &Tensor) -> Result<f64> {
    Ok(t.to_dtype(DType::F64)?.to_scalar()?)
}
