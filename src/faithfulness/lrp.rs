//! Layer-wise relevance propagation of the explained logit, in the Gradient × Input form of
//! LXT's efficient mode: AttnLRP (Achtibat et al., ICML 2024) and CP-LRP (Ali et al., ICML
//! 2022). Each token's relevance is `R_j = Σ_d e_jd · g_jd`, with e_j its word embedding and
//! g the gradient of the logit through the model with the rule set's backward pass
//! ([`crate::model::rules`]): one forward and one backward pass per rule set.

use std::collections::BTreeMap;

use candle_core::{IndexOp, Tensor, Var, D};

use super::importance::host;
use super::{gradient_at_block, Attributed, Attribution, Check, LrpCheck, Score, Subject};
use crate::error::Result;
use crate::model::rules::Rules;

pub struct Lrp;

/// Each rule set with the score it gives, in the order of [`Lrp::scores`].
const RULES: [(Rules, &str); 2] = [(Rules::AttnLrp, "attnlrp"), (Rules::CpLrp, "cp_lrp")];

impl Attribution for Lrp {
    fn name(&self) -> &'static str {
        "lrp"
    }

    fn scores(&self) -> &'static [Score] {
        &[
            Score {
                name: "attnlrp",
                label: "AttnLRP",
                headline: true,
                signed: true,
            },
            Score {
                name: "cp_lrp",
                label: "CP-LRP",
                headline: true,
                signed: true,
            },
        ]
    }

    fn attribute(&self, subject: &Subject) -> Result<Attributed> {
        let mut scores = Vec::with_capacity(RULES.len());
        let mut sum = BTreeMap::new();
        let mut logit = 0.0;
        for (rules, name) in RULES {
            let (relevance, explained) = relevance(subject, rules)?;
            sum.insert(name.to_string(), relevance.iter().sum());
            scores.push(relevance);
            logit = explained;
        }
        Ok(Attributed {
            scores,
            check: Some(Check::Lrp(LrpCheck { logit, sum })),
        })
    }
}

/// Each position's relevance for the logit of `subject.query.id` at the target under `rules`, and
/// that logit.
fn relevance(subject: &Subject, rules: Rules) -> Result<(Vec<f64>, f64)> {
    let model = subject.model;
    let words = Var::from_tensor(&subject.words.input)?;
    let id = subject.query.id as usize;
    // The rules shape the graphs the forward passes build; the backward passes follow them.
    let (grad, logit) = rules.apply(|| -> Result<(Tensor, f64)> {
        let block = model.embed(words.as_tensor(), &subject.words.types)?;
        let (at_block, logit) = gradient_at_block(model, &block, subject.target, |logits| {
            Ok(logits.i((0, id))?)
        })?;
        let through = (&block * &at_block)?.sum_all()?;
        let grad = through.backward()?.get(words.as_tensor()).cloned();
        let missing = || candle_core::Error::Msg("no relevance reached the word embeddings".into());
        Ok((grad.ok_or_else(missing)?.detach(), logit))
    })?;
    let relevance = host(&(grad * words.as_tensor())?.sum(D::Minus1)?.squeeze(0)?)?;
    Ok((relevance, logit))
}
