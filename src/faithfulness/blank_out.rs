//! Blank-out (Abnar & Zuidema 2020, §4): how much p(class) drops when each token in turn is
//! replaced by the blank (a token; for an image, a patch of the mean pixel).

use super::importance::probabilities;
use super::{Attributed, Attribution, Score, Subject};
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

    fn attribute(&self, subject: &Subject) -> Result<Attributed> {
        // Every position blanked in turn, run a few at a time by `probabilities`.
        let n = subject.words.len();
        let blanked: Vec<Vec<bool>> = (0..n).map(|j| (0..n).map(|i| i == j).collect()).collect();
        let (model, query) = (subject.model, subject.query);
        let blanked = probabilities(model, subject.words, &blanked, subject.target, query.id)?;
        let drop: Vec<f64> = blanked.iter().map(|q| subject.probability - q).collect();
        let absolute = drop.iter().map(|x| x.abs()).collect();
        Ok(Attributed {
            scores: vec![drop, absolute],
            check: None,
        })
    }
}
