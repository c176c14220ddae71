//! Blank-out (Abnar & Zuidema 2020, §4): how much p(class) drops when each token in turn is
//! replaced by the blank token.

use candle_core::Tensor;

use super::importance::probabilities;
use super::{Attributed, Attribution, Score, Text};
use crate::error::Result;

pub struct BlankOut;

impl Attribution for BlankOut {
    fn name(&self) -> &'static str {
        "blank-out"
    }

    fn scores(&self) -> &'static [Score] {
        &[
            // `p − p(token j blanked)`: positive where blanking the token lowers p.
            Score {
                name: "blank_out",
                label: "blank-out",
                headline: true,
                signed: true,
            },
            // `|p − p(token j blanked)|`, the absolute drop, as the paper's code takes it.
            Score {
                name: "blank_out_abs",
                label: "|blank-out|",
                headline: false,
                signed: false,
            },
        ]
    }

    fn attribute(&self, text: &Text) -> Result<Attributed> {
        // Every blanked text in one batch of n, run a few at a time by `probabilities`.
        let n = text.ids.len();
        let mut batch = Vec::with_capacity(n * n);
        for j in 0..n {
            batch.extend(text.ids.iter().enumerate().map(|(i, &id)| match i == j {
                true => text.query.blank_id,
                false => id,
            }));
        }
        let input = Tensor::from_vec(batch, (n, n), text.model.device())?;
        let blanked = probabilities(text.model, &input, text.types, text.target, text.query.id)?;
        let drop: Vec<f64> = blanked.iter().map(|q| text.probability - q).collect();
        let absolute = drop.iter().map(|x| x.abs()).collect();
        Ok(Attributed {
            scores: vec![drop, absolute],
            check: None,
        })
    }
}
