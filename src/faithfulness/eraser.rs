//! ERASER faithfulness (DeYoung et al. 2020) of a relevance map, as SPEC §8 defines it:
//! rank the tokens by relevance (special tokens and the explained position never removed),
//! take the top k for k = 1, 5, 10, 20 and 50% of the rest (rounded up), and measure
//! **comprehensiveness** p(y|x) − p(y|x with the top k blanked) and **sufficiency**
//! p(y|x) − p(y|x with all but the top k blanked); AOPC is the mean over the k. High
//! comprehensiveness and low sufficiency say the map found what the prediction rests on.
//! Each importance score's ranking is measured the same way (signed scores as they are, the
//! most positive first).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{probabilities, Importance, ImportanceQuery, Predictor, Words};
use crate::error::{Error, Result};

/// The percentages of the removable tokens that are blanked (or kept).
pub const PERCENTS: [usize; 5] = [1, 5, 10, 20, 50];

/// AOPC of one map.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Aopc {
    pub comprehensiveness: f64,
    pub sufficiency: f64,
}

/// One method's AOPC for its last-layer rollout and flow maps (flow where it was computed).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Eraser {
    pub rollout: Aopc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Aopc>,
}

/// The input whose prediction the maps explain.
pub struct Erasable<'a> {
    pub model: &'a dyn Predictor,
    pub words: &'a Words,
    pub target: usize,
    /// Positions that are never blanked (special tokens, the explained position).
    pub fixed: &'a [bool],
    /// The class y and the blank; `probability` is p(y|x).
    pub query: &'a ImportanceQuery,
    pub probability: f64,
}

/// AOPC of each map in `maps` (each n relevance values), in order, with every blanked
/// input run as one batch; maps that rank the tokens alike share their inputs.
pub fn aopc(input: &Erasable, maps: &[&[f64]]) -> Result<Vec<Aopc>> {
    let n = input.words.len();
    let removable: Vec<usize> = (0..n).filter(|&j| !input.fixed[j]).collect();
    // Each map's index among the distinct rankings.
    let mut rankings: Vec<Vec<usize>> = Vec::new();
    let mut of_map = Vec::with_capacity(maps.len());
    for map in maps {
        let order = ranked(map, &removable);
        let index = match rankings.iter().position(|r| *r == order) {
            Some(index) => index,
            None => {
                rankings.push(order);
                rankings.len() - 1
            }
        };
        of_map.push(index);
    }
    let mut inputs: Vec<Vec<bool>> = Vec::new();
    for ranked in &rankings {
        for percent in PERCENTS {
            let (top, rest) = ranked.split_at(top_k(percent, ranked.len()));
            inputs.push(blanked(n, top));
            inputs.push(blanked(n, rest));
        }
    }
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let (model, words, target) = (input.model, input.words, input.target);
    let p = probabilities(model, words, &inputs, target, input.query.id)?;
    let base = input.probability;
    let by_ranking: Vec<Aopc> = p
        .chunks(2 * PERCENTS.len())
        .map(|runs| {
            let mean = |offset: usize| {
                runs.iter()
                    .skip(offset)
                    .step_by(2)
                    .map(|q| base - q)
                    .sum::<f64>()
                    / PERCENTS.len() as f64
            };
            Aopc {
                comprehensiveness: mean(0),
                sufficiency: mean(1),
            }
        })
        .collect();
    if by_ranking
        .iter()
        .any(|a| !(a.comprehensiveness.is_finite() && a.sufficiency.is_finite()))
    {
        return Err(Error::NotFinite {
            what: "an ERASER score".into(),
        });
    }
    Ok(of_map.into_iter().map(|i| by_ranking[i]).collect())
}

/// ERASER of each named method's last-layer rollout and flow (`(name, rollout, flow)`, each
/// map n values), and of each importance score's ranking (by name), with every blanked input
/// run as one batch.
pub fn eraser_of(
    input: &Erasable,
    named: Vec<(String, Vec<f64>, Option<Vec<f64>>)>,
    importance: &Importance,
) -> Result<(BTreeMap<String, Eraser>, BTreeMap<String, Aopc>)> {
    let scores = importance.scores();
    let maps: Vec<&[f64]> = named
        .iter()
        .flat_map(|(_, rollout, flow)| std::iter::once(rollout.as_slice()).chain(flow.as_deref()))
        .chain(scores.iter().map(|(_, values)| *values))
        .collect();
    // One AOPC per map, in the maps' order: each name's rollout, then its flow if any; then
    // each score.
    let aopcs = aopc(input, &maps)?;
    let mut next = aopcs.into_iter();
    let mut eraser = BTreeMap::new();
    for (name, _, flow) in named {
        if let Some(rollout) = next.next() {
            let flow = flow.and_then(|_| next.next());
            eraser.insert(name, Eraser { rollout, flow });
        }
    }
    let by_score = scores
        .iter()
        .zip(next)
        .map(|((name, _), aopc)| (name.to_string(), aopc))
        .collect();
    Ok((eraser, by_score))
}

/// `removable` ordered by relevance rounded to 10 decimals, highest first; ties by
/// position. Flow often gives several tokens one bottleneck's value, equal in exact
/// arithmetic but not in its last bits: those bits must not decide what is blanked.
fn ranked(map: &[f64], removable: &[usize]) -> Vec<usize> {
    let key = |j: usize| (map[j] * 1e10).round();
    let mut order = removable.to_vec();
    order.sort_by(|&a, &b| key(b).total_cmp(&key(a)).then(a.cmp(&b)));
    order
}

/// ⌈percent · m / 100⌉ in integers (in floats 0.05 · 20 rounds up to 2).
fn top_k(percent: usize, m: usize) -> usize {
    (percent * m).div_ceil(100)
}

/// n flags, `positions` set.
fn blanked(n: usize, positions: &[usize]) -> Vec<bool> {
    let mut flags = vec![false; n];
    for &j in positions {
        flags[j] = true;
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_is_rounded_up_and_exact_products_stay() {
        assert_eq!(top_k(1, 8), 1);
        assert_eq!(top_k(5, 20), 1);
        assert_eq!(top_k(10, 20), 2);
        assert_eq!(top_k(50, 7), 4);
        assert_eq!(top_k(50, 0), 0);
    }

    #[test]
    fn ranking_breaks_ties_by_position_and_skips_fixed_tokens() {
        let map = [0.9, 0.1, 0.3, 0.3 + 1e-16, 0.2];
        assert_eq!(ranked(&map, &[1, 2, 3, 4]), vec![2, 3, 4, 1]);
    }
}
