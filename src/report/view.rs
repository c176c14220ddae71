//! What the renderers draw: a report, or with `--hide-special` the same report without
//! [CLS], [SEP] and punctuation, each row renormalised over the tokens that remain
//! (rollout piles relevance on those tokens; Abnar & Zuidema 2020, §4).

use serde::Serialize;

use super::{Prediction, Report, Target};
use crate::faithfulness::correlations::Evaluation;

/// A report as displayed. `report.tokens` and every relevance row hold the shown tokens
/// only; `positions[k]` is the position in the model's input of shown token k.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    #[serde(flatten)]
    pub report: Report,
    /// With `--hide-special`: the left-out positions and their tokens (JSON: `"hidden"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Vec<Target>>,
    #[serde(skip)]
    pub positions: Vec<usize>,
}

impl View {
    /// A view back from its JSON (`--json`'s output): the report, and with `"hidden"` the
    /// positions left out, from which the shown tokens' positions follow.
    pub fn from_json(json: &str) -> serde_json::Result<Self> {
        let report: Report = serde_json::from_str(json)?;
        #[derive(serde::Deserialize)]
        struct Hidden {
            hidden: Option<Vec<Target>>,
        }
        let Hidden { hidden } = serde_json::from_str(json)?;
        let left_out: Vec<usize> = hidden.iter().flatten().map(|t| t.index).collect();
        let total = report.tokens.len() + left_out.len();
        let positions = (0..total).filter(|p| !left_out.contains(p)).collect();
        Ok(Self {
            report,
            hidden,
            positions,
        })
    }

    /// Every token, as computed.
    pub fn full(report: Report) -> Self {
        let positions = (0..report.tokens.len()).collect();
        Self {
            report,
            hidden: None,
            positions,
        }
    }

    /// Without special tokens and punctuation; the target is always kept. Each layer's row
    /// is divided by its sum over the kept tokens (rows that sum to 0 stay 0). The target's
    /// `index` becomes its index among the kept tokens, so `tokens[target.index]` still
    /// names it; `positions` maps back to the model's input.
    pub fn hide_special(report: Report) -> Self {
        let target = report.target.index;
        let special = |j: usize| match &report.special {
            Some(special) => special[j] || is_punctuation_token(&report.tokens[j]),
            None => is_special(&report.tokens[j]),
        };
        let (kept, hidden): (Vec<usize>, Vec<usize>) =
            (0..report.tokens.len()).partition(|&j| j == target || !special(j));
        let hidden = hidden
            .into_iter()
            .map(|index| Target {
                index,
                token: report.tokens[index].clone(),
            })
            .collect();
        let rows = |maps: &[Vec<f64>]| -> Vec<Vec<f64>> {
            maps.iter().map(|row| renormalised(row, &kept)).collect()
        };
        let mut shown = report.clone();
        shown.tokens = kept.iter().map(|&j| report.tokens[j].clone()).collect();
        shown.target.index = kept.iter().position(|&j| j == target).unwrap_or(0);
        let r = &report.relevance;
        shown.relevance.raw = rows(&r.raw);
        shown.relevance.rollout = rows(&r.rollout);
        shown.relevance.flow = r.flow.as_deref().map(rows);
        if let (Some(methods), Some(out)) = (&report.methods, &mut shown.methods) {
            for (name, maps) in methods {
                let shown_maps = out.get_mut(name).expect("the same methods");
                shown_maps.layer = rows(&maps.layer);
                shown_maps.rollout = rows(&maps.rollout);
                shown_maps.flow = maps.flow.as_deref().map(rows);
            }
        }
        if let (Some(all), Some(out)) = (&report.all_positions, &mut shown.all_positions) {
            // Rows are source positions: keep the kept ones, then their kept columns.
            let square = |maps: &[Vec<Vec<f64>>]| -> Vec<Vec<Vec<f64>>> {
                let from_kept = |layer: &Vec<Vec<f64>>| -> Vec<Vec<f64>> {
                    kept.iter().map(|&i| layer[i].clone()).collect()
                };
                maps.iter().map(|layer| rows(&from_kept(layer))).collect()
            };
            out.raw = square(&all.raw);
            out.rollout = square(&all.rollout);
            out.flow = all.flow.as_deref().map(square);
        }
        // Importance scores are not distributions: kept as they are, only filtered; the
        // correlations are recomputed over the kept tokens.
        if let Some(importance) = &mut shown.importance {
            importance.pick(&kept);
            if let Some(evaluation) = &mut shown.evaluation {
                // The hidden tokens include every special one: none is left to leave out.
                let recomputed =
                    Evaluation::compute(&shown.relevance, shown.methods.as_ref(), importance, None);
                // ERASER never blanks special tokens: hiding them changes nothing there.
                evaluation.scores = recomputed.scores;
                evaluation.methods = recomputed.methods;
            }
        }
        Self {
            report: shown,
            hidden: Some(hidden),
            positions: kept,
        }
    }

    /// The same view with every text (tokens, words, the model's name) passed through
    /// `f`, e.g. to escape what a checkpoint's vocabulary holds for a terminal.
    pub fn map_text(&self, f: impl Fn(&str) -> String) -> Self {
        let mut view = self.clone();
        let r = &mut view.report;
        r.model = f(&r.model);
        r.tokens = r.tokens.iter().map(|t| f(t)).collect();
        r.target.token = f(&r.target.token);
        match &mut r.prediction {
            Some(Prediction::Words { candidates, top }) => {
                for w in candidates.iter_mut().chain(top) {
                    w.word = f(&w.word);
                }
            }
            Some(Prediction::Labels { labels }) => {
                for l in labels {
                    l.label = f(&l.label);
                }
            }
            None => {}
        }
        if let Some(importance) = &mut r.importance {
            importance.word = f(&importance.word);
            importance.blank_token = f(&importance.blank_token);
        }
        for hidden in view.hidden.iter_mut().flatten() {
            hidden.token = f(&hidden.token);
        }
        view
    }

    /// The position in the model's input of the target.
    pub fn target_position(&self) -> usize {
        self.positions[self.report.target.index]
    }
}

/// [CLS], [SEP], [PAD], <s>, </s> and tokens made only of punctuation, judged by spelling
/// (for `--attention` input, which has no tokenizer).
pub fn is_special(token: &str) -> bool {
    const SPECIAL: [&str; 5] = ["[CLS]", "[SEP]", "[PAD]", "<s>", "</s>"];
    SPECIAL.contains(&token) || is_punctuation_token(token)
}

/// A token made only of punctuation, also as a continuation piece (`##.`) or a piece that
/// starts a word in byte-level BPE (`Ġ.`) or SentencePiece (`▁.`).
pub fn is_punctuation_token(token: &str) -> bool {
    let word = ["##", "Ġ", "▁"]
        .iter()
        .find_map(|marker| token.strip_prefix(marker))
        .unwrap_or(token);
    !word.is_empty() && word.chars().all(is_punctuation)
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '¡' | '¿'
                | '«'
                | '»'
                | '‘'
                | '’'
                | '‚'
                | '“'
                | '”'
                | '„'
                | '–'
                | '—'
                | '…'
                | '·'
        )
}

fn renormalised(row: &[f64], kept: &[usize]) -> Vec<f64> {
    let sum: f64 = kept.iter().map(|&j| row[j]).sum();
    kept.iter()
        .map(|&j| if sum > 0.0 { row[j] / sum } else { 0.0 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_tokens_and_punctuation() {
        for token in ["[CLS]", "[SEP]", ".", ",", "##.", "?!", "…", "\""] {
            assert!(is_special(token), "{token}");
        }
        for token in ["[MASK]", "[UNK]", "his", "##s", "3", "don", "##"] {
            assert!(!is_special(token), "{token}");
        }
    }

    #[test]
    fn rows_are_renormalised_over_the_kept_tokens() {
        assert_eq!(renormalised(&[0.5, 0.25, 0.75, 0.1], &[1, 2]), [0.25, 0.75]);
        assert_eq!(renormalised(&[1.0, 0.0], &[1]), [0.0]);
    }
}
