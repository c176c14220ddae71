//! Faithfulness (Abnar & Zuidema 2020, §4; SPEC §8): how much each input token matters for
//! the explained prediction, by several attributions ([`importance`]); how well each
//! relevance map agrees with them ([`correlations`]); and ERASER's comprehensiveness and
//! sufficiency of the maps ([`eraser`]).
//!
//! An attribution is one file here and one line in [`ATTRIBUTIONS`]: it scores every token
//! of a [`Subject`] under one or more names, which the report, the correlations, the batch
//! summary and every renderer then carry without knowing it.

mod blank_out;
pub mod correlations;
pub mod eraser;
mod gradients;
mod importance;
mod integrated_gradients;
mod lrp;

pub use importance::{
    blank_if_needed, importance, probabilities, Blank, Completeness, Importance, ImportanceQuery,
    LrpCheck, Subject, Words,
};
pub use integrated_gradients::gauss_legendre;

use candle_core::{Tensor, Var};

use crate::error::{Error, Result};
use crate::model::causal::CausalLm;
use crate::model::vision::VisionBody;
use crate::model::{Keep, Model};

/// What the attributions need of a model, encoder or decoder: the explained position's
/// logits from the word embeddings ([`Words`]: their lookup is the caller's).
pub trait Predictor: Sync {
    /// Word embeddings `[b, n, width]` and token types (`[b, n]` u32) → the embedding
    /// block's output, what the first layer reads.
    fn embed(&self, words: &Tensor, types: &Tensor) -> Result<Tensor>;

    /// The embedding block's output `[b, n, hidden]` → the head's logits at `target`,
    /// `[b, classes]`.
    fn logits(&self, embedded: &Tensor, target: usize) -> Result<Tensor>;

    /// Whether gradient × input at the word embeddings is zero by construction.
    fn scale_free_words(&self) -> bool;

    /// Whether the gradient's components at the word embeddings sum to zero by construction.
    fn shift_free_words(&self) -> bool;

    /// Whether the gradient's components at the embedding block's output sum to zero by
    /// construction.
    fn shift_free_block(&self) -> bool {
        false
    }

    /// Whether the embedding block's output is the word embeddings themselves.
    fn block_is_words(&self) -> bool {
        false
    }

    /// The layers one at a time, where the predictor can run them so: a backward pass then
    /// holds one layer's graph at a time ([`gradient_at_block`]).
    fn stepwise(&self) -> Option<&dyn Stepwise> {
        None
    }
}

/// A predictor's layers one at a time.
pub trait Stepwise {
    fn layers(&self) -> usize;

    /// Layer `layer` (0-based) on its input `[b, n, hidden]`.
    fn layer(&self, layer: usize, x: &Tensor) -> Result<Tensor>;

    /// The last layer's output → the head's logits at `target`, `[b, classes]`.
    fn top(&self, hidden: &Tensor, target: usize) -> Result<Tensor>;
}

/// `score` (a scalar from the logits `[b, classes]` at `target`) and its gradient at the
/// embedding block's output `embedded` (`[b, n, hidden]`, read as a constant), with whatever
/// rules are in force. Through the whole stack in one backward pass; or, where the predictor
/// runs its layers one at a time, layer by layer: every layer's input kept from a forward
/// pass without a graph, then each layer run again with one and the gradient carried down
/// through it (the chain rule's same products; memory of one layer's graph instead of every
/// layer's: `--lrp` on 1,370 tokens and 12 layers went from 18.1 GB to 2.5 GB).
pub(crate) fn gradient_at_block(
    model: &dyn Predictor,
    embedded: &Tensor,
    target: usize,
    score: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<(Tensor, f64)> {
    let missing = || candle_core::Error::Msg("no gradient reached the embedding block".into());
    let Some(steps) = model.stepwise() else {
        let block = Var::from_tensor(&embedded.detach())?;
        let s = score(&model.logits(block.as_tensor(), target)?)?;
        let grad = s
            .backward()?
            .get(block.as_tensor())
            .ok_or_else(missing)?
            .detach();
        return Ok((grad, importance::scalar(&s)?));
    };
    let mut inputs = vec![embedded.detach()];
    for layer in 0..steps.layers() {
        let next = steps.layer(layer, &inputs[layer])?.detach();
        inputs.push(next);
    }
    let top = Var::from_tensor(&inputs[steps.layers()])?;
    let s = score(&steps.top(top.as_tensor(), target)?)?;
    let mut grad = s
        .backward()?
        .get(top.as_tensor())
        .ok_or_else(missing)?
        .detach();
    for layer in (0..steps.layers()).rev() {
        let x = Var::from_tensor(&inputs[layer])?;
        let through = (steps.layer(layer, x.as_tensor())? * &grad)?.sum_all()?;
        grad = through
            .backward()?
            .get(x.as_tensor())
            .ok_or_else(missing)?
            .detach();
    }
    Ok((grad, importance::scalar(&s)?))
}

/// The head's logits at `target` from the embedding block's output.
fn head_logits(model: &Model, embedded: &Tensor, target: usize) -> Result<Tensor> {
    with_head(
        model
            .forward_embedded(embedded, target, Keep::default())?
            .logits,
    )
}

/// The head's logits, or the error of a checkpoint without a head.
fn with_head(logits: Option<Tensor>) -> Result<Tensor> {
    logits.ok_or(Error::NeedsMlmHead {
        what: "importance scores",
        model: "this checkpoint".into(),
    })
}

impl Predictor for Model {
    fn embed(&self, words: &Tensor, types: &Tensor) -> Result<Tensor> {
        Model::embed(self, words, Some(types))
    }

    fn logits(&self, embedded: &Tensor, target: usize) -> Result<Tensor> {
        head_logits(self, embedded, target)
    }

    fn scale_free_words(&self) -> bool {
        Model::scale_free_words(self)
    }

    fn shift_free_words(&self) -> bool {
        Model::shift_free_words(self)
    }
}

/// An image model as a predictor from its tokens before positions
/// ([`VisionBody::tokens`]): its "word embeddings" are the class (distillation, register)
/// tokens and each patch's projection, and its embedding block adds the positions for
/// `grid`. Its layers are pre-norm and end in a LayerNorm, so every path from a token meets
/// a LayerNorm's mean first: the gradient sums to zero there and at the block's output.
pub struct Picture<'a> {
    pub model: &'a Model,
    pub body: &'a VisionBody,
    /// Rows and columns of patches.
    pub grid: (usize, usize),
}

impl Predictor for Picture<'_> {
    fn embed(&self, words: &Tensor, _types: &Tensor) -> Result<Tensor> {
        self.body.place(words, self.grid)
    }

    fn logits(&self, embedded: &Tensor, target: usize) -> Result<Tensor> {
        head_logits(self.model, embedded, target)
    }

    fn scale_free_words(&self) -> bool {
        false
    }

    fn shift_free_words(&self) -> bool {
        true
    }

    fn shift_free_block(&self) -> bool {
        true
    }

    fn stepwise(&self) -> Option<&dyn Stepwise> {
        Some(self)
    }
}

impl Stepwise for Picture<'_> {
    fn layers(&self) -> usize {
        self.model.layers()
    }

    fn layer(&self, layer: usize, x: &Tensor) -> Result<Tensor> {
        self.model.run_layer(layer, x, None)
    }

    fn top(&self, hidden: &Tensor, target: usize) -> Result<Tensor> {
        let hidden = self.body.final_norm(hidden)?;
        with_head(self.model.head_logits(&hidden, target)?)
    }
}

/// A causal language model as a predictor of the token after its text: the last position's
/// next-token logits, whatever the target. Its embedding block is the word embeddings.
pub struct NextToken<'a> {
    pub model: &'a dyn CausalLm,
}

impl Predictor for NextToken<'_> {
    fn embed(&self, words: &Tensor, _types: &Tensor) -> Result<Tensor> {
        Ok(words.clone())
    }

    fn logits(&self, embedded: &Tensor, _target: usize) -> Result<Tensor> {
        self.model.next_logits(embedded)
    }

    fn scale_free_words(&self) -> bool {
        false
    }

    fn shift_free_words(&self) -> bool {
        self.model.shift_free_words()
    }

    fn block_is_words(&self) -> bool {
        true
    }
}

/// One way of scoring each input token's importance for the explained class.
pub trait Attribution: Sync {
    /// What the attribution is called where one is asked for alone (`lrp`).
    fn name(&self) -> &'static str;

    /// The scores it gives, in the order reports list them.
    fn scores(&self) -> &'static [Score];

    /// Scores every position of `subject`: one `Vec` of n values per
    /// [`Attribution::scores`], in that order, and what checks them where the method has one.
    fn attribute(&self, subject: &Subject) -> Result<Attributed>;
}

/// One score: its key in the report's `importance` (and `evaluation`), what a person reads
/// it as in a table's header, and how tables show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Score {
    pub name: &'static str,
    pub label: &'static str,
    /// One of the scores a short table shows (the terminal's columns); the others are
    /// variants of these (absolute values, another layer).
    pub headline: bool,
    /// Signed (shown with its sign); else never negative.
    pub signed: bool,
}

/// What one attribution gives.
pub struct Attributed {
    pub scores: Vec<Vec<f64>>,
    pub check: Option<Check>,
}

/// How an attribution's scores are checked against what they divide up.
pub enum Check {
    /// Integrated gradients' completeness.
    Completeness(Completeness),
    /// LRP's conservation of the explained logit.
    Lrp(LrpCheck),
}

/// Every attribution, in the order reports list their scores.
pub const ATTRIBUTIONS: [&dyn Attribution; 4] = [
    &gradients::Gradients,
    &blank_out::BlankOut,
    &integrated_gradients::IntegratedGradients,
    &lrp::Lrp,
];

/// Every score of every attribution, in report order.
pub fn scores() -> impl Iterator<Item = &'static Score> {
    ATTRIBUTIONS.into_iter().flat_map(|a| a.scores())
}

/// The headline scores (the ones a short table shows), in report order.
pub fn headline_scores() -> impl Iterator<Item = &'static Score> {
    scores().filter(|s| s.headline)
}

/// The score called `name`, if any attribution gives it.
pub fn score(name: &str) -> Option<&'static Score> {
    scores().find(|s| s.name == name)
}
