//! Importance scores for the explained class, to check relevance maps against (Abnar &
//! Zuidema 2020, §4): what a report holds of them, and [`importance`], which runs the
//! attributions asked for.

use std::collections::BTreeMap;

use candle_core::{DType, Device, Tensor, D};
use serde::{Deserialize, Serialize};

use super::Predictor;
use super::{Check, ATTRIBUTIONS};
use crate::error::{Error, Result};

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

/// How much each input token matters for the explained class (the word at the target, or
/// the label), `n` values per score; which scores a report holds depends on what was asked
/// for (`--evaluate`: every attribution's; `--lrp`: LRP's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Importance {
    pub word: String,
    pub id: u32,
    /// p(word) at the target for the unchanged text.
    pub probability: f64,
    pub blank_token: String,
    /// Each score's n values by its name ([`super::scores`] says what each is), as keys of
    /// `importance` itself in the JSON.
    #[serde(flatten)]
    pub values: BTreeMap<String, Vec<f64>>,
    /// How well integrated gradients' shares add up to the difference they divide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrated_gradients_check: Option<Completeness>,
    /// What LRP's relevances add up to, beside the logit they divide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lrp_check: Option<LrpCheck>,
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

/// LRP's conservation: the explained logit, and what each rule set's relevances at the word
/// embeddings add up to. The rest went to the biases (and, for AttnLRP, the softmax's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LrpCheck {
    pub logit: f64,
    /// Each score's sum, by its name.
    pub sum: BTreeMap<String, f64>,
}

impl Importance {
    /// `(name, one value per token)` for every score this report holds, in the order of
    /// [`super::scores`].
    pub fn scores(&self) -> Vec<(&'static str, &[f64])> {
        super::scores()
            .filter_map(|s| Some((s.name, self.values.get(s.name)?.as_slice())))
            .collect()
    }

    /// The values of the score called `name`, where the report has it.
    pub fn score(&self, name: &str) -> Option<&[f64]> {
        self.values.get(name).map(Vec::as_slice)
    }

    /// Every score restricted to the positions `keep` lists, in its order.
    pub fn pick(&mut self, keep: &[usize]) {
        for scores in self.values.values_mut() {
            *scores = keep.iter().map(|&j| scores[j]).collect();
        }
    }
}

/// What to score: the word (or label) and its id among the head's outputs, the blank-out
/// token, and which attributions.
pub struct ImportanceQuery {
    pub word: String,
    pub id: u32,
    pub blank_token: String,
    pub blank_id: u32,
    /// Points of integrated gradients' quadrature.
    pub steps: usize,
    /// The one attribution asked for by its [`Attribution::name`]; `None`: every one.
    pub only: Option<&'static str>,
}

/// The blank as `found`, or where it was not found, none (an empty token, id 0) when the
/// one attribution asked for (`only`: LRP) puts no blank in: blank-out, integrated gradients
/// and ERASER do.
pub fn blank_if_needed(found: Result<(String, u32)>, only: Option<&str>) -> Result<(String, u32)> {
    match (found, only) {
        (Ok(found), _) => Ok(found),
        (Err(_), Some(_)) => Ok((String::new(), 0)),
        (Err(e), None) => Err(e),
    }
}

/// An input as the attributions see it: its word embeddings, what blanking a position puts
/// in their place, and its token types. Blank-out, integrated gradients and ERASER blank
/// positions here, after the lookup (a row replaced by the blank's row is the lookup of the
/// blank token, bit for bit), so a text and an image are blanked alike.
pub struct Words {
    /// `[1, n, width]`: what the embedding lookup returned (a text's word embeddings; an
    /// image's tokens before positions, [`crate::model::vision`]).
    pub input: Tensor,
    /// `[1, 1, width]`: the blank's embedding (the blank token's; for an image the embedding
    /// of a patch of the mean pixel).
    pub blank: Tensor,
    /// `[1, n]` u32.
    pub types: Tensor,
}

impl Words {
    /// A text's: `ids` (and the blank, `blank_id`) through `lookup` (`[b, n]` u32 →
    /// `[b, n, width]`), with the token types `types`.
    pub fn look_up(
        lookup: impl Fn(&Tensor) -> Result<Tensor>,
        ids: &[u32],
        types: &[u32],
        blank_id: u32,
        device: &Device,
    ) -> Result<Self> {
        Ok(Self {
            input: lookup(&Tensor::new(ids, device)?.unsqueeze(0)?)?,
            blank: lookup(&Tensor::new(&[[blank_id]], device)?)?,
            types: Tensor::new(types, device)?.unsqueeze(0)?,
        })
    }

    /// How many positions the input has.
    pub fn len(&self) -> usize {
        self.input.dim(1).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn device(&self) -> &Device {
        self.input.device()
    }

    /// `[b, n, width]`: the input once per row of `mask` (`[b, n]` u8), with the blank
    /// where the row holds 1.
    fn blanked(&self, mask: &Tensor) -> Result<Tensor> {
        let (b, n) = mask.dims2()?;
        let shape = (b, n, self.input.dim(2)?);
        let mask = mask.unsqueeze(2)?.broadcast_as(shape)?;
        let blank = self.blank.broadcast_as(shape)?;
        Ok(mask.where_cond(&blank, &self.input.broadcast_as(shape)?)?)
    }
}

/// What an attribution scores: an input, and the prediction it explains.
pub struct Subject<'a> {
    pub model: &'a dyn Predictor,
    pub words: &'a Words,
    /// Where the head reads (a masked word's position; a classifier ignores it).
    pub target: usize,
    pub query: &'a ImportanceQuery,
    /// p(`query.id`) at the target for the input as it is.
    pub probability: f64,
}

/// Scores every position of `words` for p(`query.id`) at `target`, by every attribution
/// `query` asks for.
pub fn importance(
    model: &dyn Predictor,
    words: &Words,
    target: usize,
    query: &ImportanceQuery,
) -> Result<Importance> {
    let p = probability(model, &words.input, &words.types, target, query.id)?;
    let probability = scalar(&p)?;
    let subject = Subject {
        model,
        words,
        target,
        query,
        probability,
    };
    let mut scores = Importance {
        word: query.word.clone(),
        id: query.id,
        probability,
        blank_token: query.blank_token.clone(),
        values: BTreeMap::new(),
        integrated_gradients_check: None,
        lrp_check: None,
    };
    let asked =
        (ATTRIBUTIONS.into_iter()).filter(|a| query.only.is_none_or(|only| only == a.name()));
    for attribution in asked {
        let attributed = attribution.attribute(&subject)?;
        for (score, values) in attribution.scores().iter().zip(attributed.scores) {
            scores.values.insert(score.name.to_string(), values);
        }
        match attributed.check {
            Some(Check::Completeness(check)) => scores.integrated_gradients_check = Some(check),
            Some(Check::Lrp(check)) => scores.lrp_check = Some(check),
            None => {}
        }
    }
    let all = scores.scores();
    let lrp = scores.lrp_check.iter();
    let checks = lrp.flat_map(|c| std::iter::once(c.logit).chain(c.sum.values().copied()));
    let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
    if !probability.is_finite()
        || !all.iter().all(|(_, v)| finite(v))
        || !checks.into_iter().all(f64::is_finite)
    {
        return Err(Error::NotFinite {
            what: "an importance score (gradient, blank-out or relevance)".into(),
        });
    }
    Ok(scores)
}

/// `words`: `[b, n, width]`, `types`: `[1, n]` → p(`id`) at `target` for each sequence,
/// `[b]` (a scalar `[]` when b = 1, ready for `backward`).
pub(super) fn probability(
    model: &dyn Predictor,
    words: &Tensor,
    types: &Tensor,
    target: usize,
    id: u32,
) -> Result<Tensor> {
    let types = types
        .broadcast_as(words.dims()[..2].to_vec())?
        .contiguous()?;
    probability_of(model, &model.embed(words, &types)?, target, id)
}

/// [`probability`] from the embedding block's output `[b, n, hidden]`.
pub(super) fn probability_of(
    model: &dyn Predictor,
    embedded: &Tensor,
    target: usize,
    id: u32,
) -> Result<Tensor> {
    probability_in(&model.logits(embedded, target)?, id)
}

/// p(`id`) from logits `[b, classes]`: `[b]` (a scalar `[]` when b = 1).
pub(super) fn probability_in(logits: &Tensor, id: u32) -> Result<Tensor> {
    let probs = candle_nn::ops::softmax(logits, D::Minus1)?;
    Ok(probs.narrow(1, id as usize, 1)?.squeeze(1)?.squeeze(0)?)
}

/// How many token pairs (inputs × n × n) one batch of blanked inputs may hold: every layer's
/// attention of a batch is inputs × heads × n × n values, so blanking each of 475 tokens in
/// one batch held gigabytes.
pub(super) const PAIRS_PER_BATCH: usize = 1 << 20;

/// p(`id`) at `target` for the input with each of `blanked`'s sets of positions (n flags
/// each, `true`: blanked) given the blank's embedding; the inputs go through the model a few
/// at a time, so memory stays bounded whatever their number and n.
pub fn probabilities(
    model: &dyn Predictor,
    words: &Words,
    blanked: &[Vec<bool>],
    target: usize,
    id: u32,
) -> Result<Vec<f64>> {
    let n = words.len();
    let chunk = (PAIRS_PER_BATCH / (n * n).max(1)).max(1);
    let mut out = Vec::with_capacity(blanked.len());
    for part in blanked.chunks(chunk) {
        let flags: Vec<u8> = part.iter().flatten().map(|&b| u8::from(b)).collect();
        let mask = Tensor::from_vec(flags, (part.len(), n), words.device())?;
        let batch = words.blanked(&mask)?;
        out.extend(host(
            &probability(model, &batch, &words.types, target, id)?.flatten_all()?,
        )?);
    }
    Ok(out)
}

pub(super) fn host(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?.to_vec1()?)
}

pub(super) fn scalar(t: &Tensor) -> Result<f64> {
    Ok(t.to_dtype(DType::F64)?.to_scalar()?)
}
