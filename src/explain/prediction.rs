//! What the head predicts: candidate words, top words or labels, and the explained class.

use candle_core::Tensor;

use super::{EvaluateOptions, Explainer};
use crate::error::{Error, Result};
use crate::faithfulness::{blank_if_needed, Blank, ImportanceQuery};
use crate::model::Predicts;
use crate::report::{LabelProbability, Prediction, WordProbability};

/// What an image's blank is called in a report: a patch whose pixel values are all 0, the
/// processor's `image_mean` where it normalises.
pub const MEAN_PIXEL: &str = "mean pixel";

impl Explainer {
    /// What the head's output `probs` means: vocabulary words or labels.
    pub(super) fn describe(
        &self,
        probs: &[f32],
        candidates: &[(String, u32)],
        top_k: usize,
    ) -> Prediction {
        let p = |id: u32| probs[id as usize] as f64;
        let mut order: Vec<u32> = (0..probs.len() as u32).collect();
        order.sort_by(|&a, &b| {
            probs[b as usize]
                .total_cmp(&probs[a as usize])
                .then(a.cmp(&b))
        });
        let word = |word: String, id: u32| WordProbability {
            word,
            id,
            probability: p(id),
        };
        match self.task().predicts {
            Predicts::Words => Prediction::Words {
                candidates: candidates
                    .iter()
                    .map(|(w, id)| word(w.clone(), *id))
                    .collect(),
                top: order
                    .into_iter()
                    .take(top_k)
                    .map(|id| word(self.reader.token(id), id))
                    .collect(),
            },
            _ => Prediction::Labels {
                labels: order
                    .into_iter()
                    .map(|id| LabelProbability {
                        label: self.label_name(id),
                        id,
                        probability: p(id),
                    })
                    .collect(),
            },
        }
    }

    pub(super) fn label_name(&self, id: u32) -> String {
        self.model.label(id as usize, &self.config)
    }

    /// The word or label to score (the given one, else the top prediction) and the blank.
    pub(super) fn importance_query(
        &self,
        evaluate: &EvaluateOptions,
        probs: &[f32],
    ) -> Result<ImportanceQuery> {
        let (word, id) = self.explained(Some(evaluate), probs)?;
        // Blank-out, integrated gradients and ERASER put the blank in; LRP alone needs none.
        // An image's blank is a patch of the mean pixel ([`Explainer::scorable`]).
        let (blank_token, blank_id) = match self.reads_images() {
            true => (MEAN_PIXEL.to_string(), 0),
            false => blank_if_needed(self.blank(evaluate.blank), evaluate.only)?,
        };
        Ok(ImportanceQuery {
            word,
            id,
            blank_token,
            blank_id,
            steps: evaluate.ig_steps,
            only: evaluate.only,
        })
    }

    /// The blank token and its id.
    fn blank(&self, blank: Blank) -> Result<(String, u32)> {
        match blank {
            Blank::Pad => {
                let id = self.config.pad_token_id.ok_or(Error::NoPadToken)?;
                let id = u32::try_from(id)
                    .ok()
                    .filter(|&id| (id as usize) < self.config.vocab_size)
                    .ok_or(Error::NoPadToken)?;
                Ok((self.reader.token(id), id))
            }
            _ => blank
                .tokens()
                .iter()
                .find_map(|t| Some((t.to_string(), self.reader.text().ok()?.token_id(t)?)))
                .ok_or(Error::NoBlankToken(blank.tokens()[0])),
        }
    }

    /// The explained class, by name and id: `--importance-word` or `--label` when given,
    /// else the most probable one.
    pub(super) fn explained(
        &self,
        evaluate: Option<&EvaluateOptions>,
        probs: &[f32],
    ) -> Result<(String, u32)> {
        let top = (0..probs.len() as u32)
            .max_by(|&a, &b| {
                probs[a as usize]
                    .total_cmp(&probs[b as usize])
                    .then(b.cmp(&a))
            })
            .unwrap_or(0);
        let word = evaluate.and_then(|e| e.word.as_ref());
        let label = evaluate.and_then(|e| e.label.as_ref());
        let words = self.task().predicts == Predicts::Words;
        Ok(match (words, word, label) {
            (true, Some(word), _) => (word.clone(), self.reader.text()?.single_piece(word)?),
            (true, None, _) => (self.reader.token(top), top),
            (_, _, Some(label)) => {
                let id = self.label_id(label, probs.len())?;
                (self.label_name(id), id)
            }
            (_, _, None) => (self.label_name(top), top),
        })
    }

    /// `--label NAME|ID`: a label's name, else its id.
    pub(super) fn label_id(&self, given: &str, labels: usize) -> Result<u32> {
        let by_name = (0..labels as u32).find(|&id| self.label_name(id) == given);
        let by_id = given
            .parse::<u32>()
            .ok()
            .filter(|&id| (id as usize) < labels);
        by_name.or(by_id).ok_or_else(|| Error::UnknownLabel {
            given: given.to_string(),
            labels: (0..labels as u32)
                .map(|id| format!("{id}: {}", self.label_name(id)))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    pub(super) fn candidate_ids(&self, words: &[String]) -> Result<Vec<(String, u32)>> {
        words
            .iter()
            .map(|word| {
                if word.trim().is_empty() {
                    return Err(Error::EmptyCandidate {
                        given: words.join(","),
                    });
                }
                Ok((word.clone(), self.reader.text()?.single_piece(word.trim())?))
            })
            .collect()
    }
}

/// `logits`: `[classes]` → their softmax on the host, checked to be finite.
pub(super) fn probabilities(logits: &Tensor) -> Result<Vec<f32>> {
    let probs: Vec<f32> = candle_nn::ops::softmax(logits, 0)?.to_vec1()?;
    if probs.iter().any(|p| !p.is_finite()) {
        return Err(Error::NotFinite {
            what: "the prediction head's output".into(),
        });
    }
    Ok(probs)
}
