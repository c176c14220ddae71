//! Input gradients of p(class) (Abnar & Zuidema 2020, §4): their norm and gradient × input
//! at the word embeddings, signed and absolute, and the paper's code's "grad" and
//! "inputgrad" at the embedding block's output.

use candle_core::{Var, D};

use super::importance::{host, probability_in};
use super::{gradient_at_block, Attributed, Attribution, Score, Subject};
use crate::error::Result;

pub struct Gradients;

impl Attribution for Gradients {
    fn name(&self) -> &'static str {
        "gradients"
    }

    fn scores(&self) -> &'static [Score] {
        &[
            // `‖∂p/∂e_j‖₂`, with `e_j` the word embedding of token j.
            Score {
                name: "gradient_norm",
                label: "|gradient|",
                headline: true,
                signed: false,
            },
            // `Σ_d (∂p/∂e_j)_d · (e_j)_d`: signed, positive where the token raises p; 0 where
            // the model answers e and αe alike (ModernBERT, DeBERTa-v3: a norm reads the
            // words alone).
            Score {
                name: "gradient_x_input",
                label: "grad×input",
                headline: true,
                signed: true,
            },
            // The paper's code's "grad" and "inputgrad" (samiraabnar/attention_flow) taken at
            // the word embeddings: `|Σ_d (∂p/∂e_j)_d|` (0 where a LayerNorm's mean comes
            // first: every post-norm encoder, ModernBERT) and `|Σ_d (∂p/∂e_j)_d · (e_j)_d|`.
            Score {
                name: "gradient_sum_abs",
                label: "|Σ gradient|",
                headline: false,
                signed: false,
            },
            Score {
                name: "gradient_x_input_abs",
                label: "|grad×input|",
                headline: false,
                signed: false,
            },
            // The same as its code takes them, at the embedding block's output `h_j` (word,
            // position and token-type embeddings after their LayerNorm: what the first layer
            // reads, and what the code's `model.distilbert.embeddings(ids)` returns).
            Score {
                name: "embedding_gradient_sum_abs",
                label: "grad",
                headline: false,
                signed: false,
            },
            Score {
                name: "embedding_gradient_x_input_abs",
                label: "inputgrad",
                headline: false,
                signed: false,
            },
        ]
    }

    fn attribute(&self, subject: &Subject) -> Result<Attributed> {
        let model = subject.model;
        let n = subject.words.len();
        let words = Var::from_tensor(&subject.words.input)?;
        let type_ids = &subject.words.types;
        // The gradient at the embedding block's output first (a variable of its own: candle
        // keeps no gradient of an intermediate tensor), then the chain rule back through the
        // block to the word embeddings: ∂p/∂e = (∂h/∂e)ᵀ ∂p/∂h.
        let block = model.embed(words.as_tensor(), type_ids)?;
        let id = subject.query.id;
        let (at_block, _) = gradient_at_block(model, &block, subject.target, |logits| {
            probability_in(logits, id)
        })?;
        let missing = || candle_core::Error::Msg("no gradient reached the input embeddings".into());
        let through = (&block * &at_block)?.sum_all()?;
        let grad = through
            .backward()?
            .get(words.as_tensor())
            .ok_or_else(missing)?
            .squeeze(0)?;
        let (at_block, block) = (at_block.squeeze(0)?, block.detach().squeeze(0)?);
        let embeddings = words.as_tensor().squeeze(0)?;
        let gradient_norm = grad.sqr()?.sum(D::Minus1)?.sqrt()?;
        // Where the model answers e and αe alike, the sum is the derivative along e: zero, and
        // what f32 arithmetic leaves of it is rounding, not a ranking.
        let gradient_x_input = match model.scale_free_words() {
            true => vec![0.0; n],
            false => host(&(&grad * &embeddings)?.sum(D::Minus1)?)?,
        };
        // The same for the derivative along the all-ones direction, where a LayerNorm's mean
        // comes first.
        let gradient_sum = match model.shift_free_words() {
            true => vec![0.0; n],
            false => host(&grad.sum(D::Minus1)?)?,
        };
        // Where the embedding block is the words themselves (a decoder's), its scores are the
        // words', zeros included; where a LayerNorm's mean comes first on every path from the
        // block's output too (a pre-norm vision transformer's), its sum is zero.
        let (embedding_sum, embedding_x_input) = match model.block_is_words() {
            true => (gradient_sum.clone(), gradient_x_input.clone()),
            false => (
                match model.shift_free_block() {
                    true => vec![0.0; n],
                    false => host(&at_block.sum(D::Minus1)?)?,
                },
                host(&(&at_block * &block)?.sum(D::Minus1)?)?,
            ),
        };
        let absolute = |v: &[f64]| v.iter().map(|x| x.abs()).collect();
        Ok(Attributed {
            scores: vec![
                host(&gradient_norm)?,
                gradient_x_input.clone(),
                absolute(&gradient_sum),
                absolute(&gradient_x_input),
                absolute(&embedding_sum),
                absolute(&embedding_x_input),
            ],
            check: None,
        })
    }
}
