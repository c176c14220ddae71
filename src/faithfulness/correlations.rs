//! Faithfulness (Abnar & Zuidema 2020, §4): Spearman rank correlation of each relevance map,
//! layer by layer, with each importance score; and its mean ± std over a dataset.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::eraser::{Aopc, Eraser};
use super::{Importance, Score};
use crate::methods::{CausalMixings, Methods, Mixing};
use crate::relevance::causal::{by_layer, CausalRelevance};
use crate::relevance::Relevance;

/// Correlations of one importance score with each method, one value per layer (index 0 is
/// layer 1); `None` where either side is constant and the correlation is undefined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correlations {
    pub raw: Vec<Option<f64>>,
    pub rollout: Vec<Option<f64>>,
    /// A generated token's corrected rollout, where the causal report has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_corrected: Option<Vec<Option<f64>>>,
    /// Absent where the flow map is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Vec<Option<f64>>>,
}

/// The same for one method of SPEC §8: its `layer`, `rollout` and `flow` maps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MapCorrelations {
    pub layer: Vec<Option<f64>>,
    pub rollout: Vec<Option<f64>>,
    /// Absent where the flow map is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Vec<Option<f64>>>,
}

impl Correlations {
    /// Each map's correlations, named: raw, rollout, and the corrected rollout and flow
    /// where they were computed.
    fn named(&self) -> impl Iterator<Item = (&'static str, &Vec<Option<f64>>)> {
        let corrected = self.rollout_corrected.as_ref();
        [("raw", &self.raw), ("rollout", &self.rollout)]
            .into_iter()
            .chain(corrected.map(|rollout| ("rollout_corrected", rollout)))
            .chain(self.flow.as_ref().map(|flow| ("flow", flow)))
    }
}

impl MapCorrelations {
    /// Each map's correlations, named: layer, rollout, and flow where it was computed.
    fn named(&self) -> impl Iterator<Item = (&'static str, &Vec<Option<f64>>)> {
        [("layer", &self.layer), ("rollout", &self.rollout)]
            .into_iter()
            .chain(self.flow.as_ref().map(|flow| ("flow", flow)))
    }
}

/// One method's correlations with each importance score, by the score's name.
pub type MethodEvaluation = BTreeMap<String, MapCorrelations>;

/// The report's `evaluation`: correlations with each importance score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Attention's raw, rollout and flow correlated with each score, by the score's name (the
    /// names of [`super::scores`], keys of `evaluation` itself in the JSON).
    #[serde(flatten)]
    pub scores: BTreeMap<String, Correlations>,
    /// Whether special tokens ([CLS], [SEP], ...) were left out of every correlation
    /// (`--correlate-without-specials`); they count by default, as in the paper's code.
    #[serde(default)]
    pub without_specials: bool,
    /// With `--mixing`: every method's maps correlated the same way (attention's are the
    /// ones above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<BTreeMap<String, MethodEvaluation>>,
    /// ERASER comprehensiveness and sufficiency (AOPC) of each method's last-layer rollout
    /// and flow (SPEC §8), by mixing name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eraser: Option<BTreeMap<String, Eraser>>,
    /// ERASER comprehensiveness and sufficiency (AOPC) of each importance score's ranking of
    /// the tokens (signed scores as they are: the most positive first), by the score's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eraser_importance: Option<BTreeMap<String, Aopc>>,
}

/// Correlates each row of `maps` with `score`, over the positions `keep` allows (all
/// where `None`).
fn rows(maps: &[Vec<f64>], score: &[f64], keep: Option<&[bool]>) -> Vec<Option<f64>> {
    let kept = |values: &[f64]| -> Vec<f64> {
        match keep {
            Some(keep) => (values.iter().zip(keep))
                .filter(|(_, k)| **k)
                .map(|(v, _)| *v)
                .collect(),
            None => values.to_vec(),
        }
    };
    let score = kept(score);
    maps.iter()
        .map(|row| spearman(&kept(row), &score))
        .collect()
}

/// One method's maps as the correlations read them, each `[L][n]`: attention's raw, rollout,
/// corrected rollout and flow, or another method's layer, rollout and flow (an encoder's
/// report's own, or a generated token's cut from its causal report).
struct LayerMaps<'a> {
    /// Attention's raw, or a method's layer.
    first: Cow<'a, [Vec<f64>]>,
    rollout: Cow<'a, [Vec<f64>]>,
    rollout_corrected: Option<Cow<'a, [Vec<f64>]>>,
    flow: Option<Cow<'a, [Vec<f64>]>>,
}

impl Evaluation {
    /// Correlates every layer of every map (attention's, and each method's) with every
    /// score, over all n input tokens, or with `specials` over those it marks false.
    pub fn compute(
        relevance: &Relevance,
        methods: Option<&Methods>,
        importance: &Importance,
        specials: Option<&[bool]>,
    ) -> Self {
        let attention = LayerMaps {
            first: Cow::Borrowed(&relevance.raw),
            rollout: Cow::Borrowed(&relevance.rollout),
            rollout_corrected: None,
            flow: relevance.flow.as_deref().map(Cow::Borrowed),
        };
        let methods: Option<Vec<(&String, LayerMaps)>> = methods.map(|methods| {
            (methods.iter())
                .filter(|(name, _)| name.as_str() != Mixing::ATTENTION.name())
                .map(|(name, maps)| {
                    let maps = LayerMaps {
                        first: Cow::Borrowed(&maps.layer),
                        rollout: Cow::Borrowed(&maps.rollout),
                        rollout_corrected: None,
                        flow: maps.flow.as_deref().map(Cow::Borrowed),
                    };
                    (name, maps)
                })
                .collect()
        });
        Self::of(&attention, methods.as_deref(), importance, specials)
    }

    /// The same for generated token `k` of a causal report: each map's `[L][m]` over the m
    /// prompt tokens, with those tokens' scores (`importance` covers every token fed at the
    /// step: the prompt, then the tokens generated before k).
    pub fn compute_causal(
        relevance: &CausalRelevance,
        methods: Option<&CausalMixings>,
        k: usize,
        importance: &Importance,
    ) -> Self {
        let at_k = |maps: &Vec<Vec<Vec<f64>>>| Cow::Owned(by_layer(&maps[k]));
        let attention = LayerMaps {
            first: at_k(&relevance.raw),
            rollout: at_k(&relevance.rollout),
            rollout_corrected: relevance.rollout_corrected.as_ref().map(at_k),
            flow: relevance.flow.as_ref().map(at_k),
        };
        let methods: Option<Vec<(&String, LayerMaps)>> = methods.map(|methods| {
            (methods.iter())
                .filter(|(name, _)| name.as_str() != Mixing::ATTENTION.name())
                .map(|(name, maps)| {
                    let maps = LayerMaps {
                        first: at_k(&maps.layer),
                        rollout: at_k(&maps.rollout),
                        rollout_corrected: None,
                        flow: maps.flow.as_ref().map(at_k),
                    };
                    (name, maps)
                })
                .collect()
        });
        let m = attention.first.first().map_or(0, Vec::len);
        let mut prompt = importance.clone();
        prompt.pick(&(0..m).collect::<Vec<_>>());
        Self::of(&attention, methods.as_deref(), &prompt, None)
    }

    fn of(
        attention: &LayerMaps,
        methods: Option<&[(&String, LayerMaps)]>,
        importance: &Importance,
        specials: Option<&[bool]>,
    ) -> Self {
        let keep: Option<Vec<bool>> = specials.map(|s| s.iter().map(|special| !special).collect());
        let keep = keep.as_deref();
        let scores = importance.scores();
        let methods = methods.map(|methods| {
            (methods.iter())
                .map(|(name, maps)| {
                    let evaluation = (scores.iter())
                        .map(|(score, values)| {
                            let correlations = MapCorrelations {
                                layer: rows(&maps.first, values, keep),
                                rollout: rows(&maps.rollout, values, keep),
                                flow: maps.flow.as_deref().map(|flow| rows(flow, values, keep)),
                            };
                            (score.to_string(), correlations)
                        })
                        .collect();
                    (name.to_string(), evaluation)
                })
                .collect()
        });
        let correlate = |values: &[f64]| Correlations {
            raw: rows(&attention.first, values, keep),
            rollout: rows(&attention.rollout, values, keep),
            rollout_corrected: (attention.rollout_corrected.as_deref())
                .map(|maps| rows(maps, values, keep)),
            flow: attention
                .flow
                .as_deref()
                .map(|flow| rows(flow, values, keep)),
        };
        Self {
            scores: (scores.iter())
                .map(|(score, values)| (score.to_string(), correlate(values)))
                .collect(),
            without_specials: specials.is_some(),
            methods,
            eraser: None,
            eraser_importance: None,
        }
    }

    /// `(score name, map name, per-layer correlations)` for every pair, scores in the order
    /// of [`super::scores`]: attention's `raw`, `rollout`, `flow`, then each method's as `norm
    /// layer` and so on.
    pub fn entries(&self) -> Vec<(&str, String, &[Option<f64>])> {
        let mut out = Vec::new();
        let known = super::scores().filter(|s| self.scores.contains_key(s.name));
        for Score { name: score, .. } in known {
            let c = &self.scores[*score];
            for (map, values) in c.named() {
                out.push((*score, map.to_string(), values.as_slice()));
            }
            for (name, method) in self.methods.iter().flatten() {
                let Some(c) = method.get(*score) else {
                    continue;
                };
                for (map, values) in c.named() {
                    out.push((*score, format!("{name} {map}"), values.as_slice()));
                }
            }
        }
        out
    }
}

/// Spearman's ρ: Pearson's correlation of the ranks, ties taking their average rank (as
/// scipy.stats.spearmanr). `None` when either input is constant or they differ in length.
///
/// Values equal to 12 significant digits count as tied: relevance that is equal in exact
/// arithmetic (flow through one shared bottleneck, say) can differ in its last bits, and
/// those bits must not decide a rank.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    pearson(&ranks(a), &ranks(b))
}

fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && tied(values[order[start]], values[order[end + 1]]) {
            end += 1;
        }
        // Ranks start at 1; a run of ties shares the mean of its ranks.
        let rank = (start + end) as f64 / 2.0 + 1.0;
        for &index in &order[start..=end] {
            ranks[index] = rank;
        }
        start = end + 1;
    }
    ranks
}

fn tied(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len() as f64;
    let (mean_a, mean_b) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut cov, mut var_a, mut var_b) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        let (dx, dy) = (x - mean_a, y - mean_b);
        cov += dx * dy;
        var_a += dx * dx;
        var_b += dy * dy;
    }
    (var_a > 0.0 && var_b > 0.0).then(|| cov / (var_a * var_b).sqrt())
}

/// `(score, map)`, e.g. `("blank_out", "flow")` or `("blank_out", "norm rollout")`.
type Pair = (String, String);

/// Mean, standard deviation and count of one correlation at one layer.
pub type LayerStats = (f64, f64, usize);

/// Mean ± standard deviation of each correlation over many reports, as in the paper's tables.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Per pair, per layer: the defined correlations seen so far.
    values: Vec<(Pair, Vec<Vec<f64>>)>,
    /// Per method: rollout comprehensiveness, rollout sufficiency, flow comprehensiveness,
    /// flow sufficiency, one value per example.
    eraser: Vec<(String, [Vec<f64>; 4])>,
    /// Per importance score: comprehensiveness and sufficiency, one value per example.
    eraser_importance: Vec<(String, [Vec<f64>; 2])>,
    pub examples: usize,
    /// Whether the correlations left special tokens out (`--correlate-without-specials`).
    pub without_specials: bool,
}

impl Summary {
    pub fn add(&mut self, evaluation: &Evaluation) {
        self.examples += 1;
        self.without_specials |= evaluation.without_specials;
        for (name, e) in evaluation.eraser.iter().flatten() {
            // A report without flow adds to the rollout's columns only.
            let values = [
                Some(e.rollout.comprehensiveness),
                Some(e.rollout.sufficiency),
                e.flow.map(|f| f.comprehensiveness),
                e.flow.map(|f| f.sufficiency),
            ];
            for (column, value) in slot(&mut self.eraser, name).iter_mut().zip(values) {
                column.extend(value);
            }
        }
        for (name, aopc) in evaluation.eraser_importance.iter().flatten() {
            let [comprehensiveness, sufficiency] = slot(&mut self.eraser_importance, name);
            comprehensiveness.push(aopc.comprehensiveness);
            sufficiency.push(aopc.sufficiency);
        }
        for (score, method, layers) in evaluation.entries() {
            let slot = slot(&mut self.values, &(score.to_string(), method));
            slot.resize(slot.len().max(layers.len()), Vec::new());
            for (l, value) in layers.iter().enumerate() {
                if let Some(v) = value {
                    slot[l].push(*v);
                }
            }
        }
    }

    /// `(score, [comprehensiveness, sufficiency] as (mean, std, count))` of the ERASER AOPC
    /// of each importance score's ranking, in the order of [`super::scores`].
    pub fn eraser_importance_rows(&self) -> Vec<(&str, [LayerStats; 2])> {
        let stats = |name: &str| {
            let (_, columns) = self.eraser_importance.iter().find(|(n, _)| n == name)?;
            Some(columns.each_ref().map(|v| mean_std(v)))
        };
        super::scores()
            .filter_map(|s| Some((s.name, stats(s.name)?)))
            .collect()
    }

    /// `(method, [rollout comprehensiveness, rollout sufficiency, flow comprehensiveness,
    /// flow sufficiency] as (mean, std, count))` of the ERASER AOPC.
    pub fn eraser_rows(&self) -> Vec<(&str, [LayerStats; 4])> {
        self.eraser
            .iter()
            .map(|(name, columns)| (name.as_str(), columns.each_ref().map(|v| mean_std(v))))
            .collect()
    }

    /// `(score, map, per-layer (mean, std, count))`; std is the sample standard deviation.
    pub fn rows(&self) -> Vec<(&str, &str, Vec<LayerStats>)> {
        self.values
            .iter()
            .map(|((score, method), layers)| {
                let stats = layers.iter().map(|v| mean_std(v)).collect();
                (score.as_str(), method.as_str(), stats)
            })
            .collect()
    }
}

impl std::fmt::Display for Summary {
    /// One table per importance score: methods as rows, layers as columns, mean ± std.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rows = self.rows();
        let mut scores: Vec<&str> = rows.iter().map(|(s, _, _)| *s).collect();
        scores.dedup();
        for score in scores {
            let tokens = match self.without_specials {
                true => ", special tokens left out",
                false => "",
            };
            writeln!(
                f,
                "Spearman correlation with {score} (mean ± std over {} examples{tokens})",
                self.examples
            )?;
            let layers = rows.iter().map(|(_, _, l)| l.len()).max().unwrap_or(0);
            let width = rows
                .iter()
                .map(|(_, m, _)| m.len())
                .max()
                .unwrap_or(6)
                .max(6);
            write!(f, "  {:<width$}", "method")?;
            for l in 1..=layers {
                write!(f, " {:>13}", format!("layer {l}"))?;
            }
            writeln!(f)?;
            for (_, method, stats) in rows.iter().filter(|(s, _, _)| *s == score) {
                write!(f, "  {method:<width$}")?;
                for stats in stats {
                    write!(f, " {:>13}", cell(*stats))?;
                }
                writeln!(f)?;
            }
            writeln!(f)?;
        }
        let eraser = self.eraser_rows();
        if !eraser.is_empty() {
            writeln!(
                f,
                "ERASER AOPC of the last layer's maps (mean ± std over {} examples; comprehensiveness: higher is better, sufficiency: lower is better)",
                self.examples
            )?;
            let header = ["rollout comp.", "rollout suff.", "flow comp.", "flow suff."];
            write!(f, "  {:<16}", "method")?;
            for h in header {
                write!(f, " {h:>15}")?;
            }
            writeln!(f)?;
            for (name, stats) in eraser {
                write!(f, "  {name:<16}")?;
                // n/a: no flow in these reports (--no-flow, or a causal model without --flow).
                for stats in stats {
                    write!(f, " {:>15}", cell(stats))?;
                }
                writeln!(f)?;
            }
            writeln!(f)?;
        }
        let by_score = self.eraser_importance_rows();
        if !by_score.is_empty() {
            writeln!(
                f,
                "ERASER AOPC of each importance score's ranking (mean ± std over {} examples)",
                self.examples
            )?;
            writeln!(f, "  {:<30} {:>15} {:>15}", "score", "comp.", "suff.")?;
            for (name, [comprehensiveness, sufficiency]) in by_score {
                writeln!(
                    f,
                    "  {name:<30} {:>15} {:>15}",
                    cell(comprehensiveness),
                    cell(sufficiency)
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// The entry for `key` in `entries`, added empty where there is none yet (kept in the
/// order the keys were first seen).
fn slot<'a, K, V>(entries: &'a mut Vec<(K, V)>, key: &K) -> &'a mut V
where
    K: PartialEq + Clone,
    V: Default,
{
    let i = match entries.iter().position(|(k, _)| k == key) {
        Some(i) => i,
        None => {
            entries.push((key.clone(), V::default()));
            entries.len() - 1
        }
    };
    &mut entries[i].1
}

/// `mean ± std`, or n/a where no example had the value.
fn cell((mean, std, count): LayerStats) -> String {
    match count {
        0 => "n/a".to_string(),
        _ => format!("{mean:+.3} ± {std:.3}"),
    }
}

fn mean_std(values: &[f64]) -> LayerStats {
    let n = values.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, 0);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    (mean, var.sqrt(), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_monotone_and_reversed_orders() {
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 35.0]), Some(1.0));
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        assert_eq!(spearman(&[1.0, 1.0, 1.0], &[3.0, 2.0, 1.0]), None);
    }

    #[test]
    fn ties_share_their_mean_rank() {
        assert_eq!(ranks(&[0.5, 0.1, 0.5, 0.9]), vec![2.5, 1.0, 2.5, 4.0]);
        let last_bits = 0.19137019638337877;
        assert_eq!(
            ranks(&[0.1913701963833788, 0.1, last_bits]),
            vec![2.5, 1.0, 2.5]
        );
        // scipy.stats.spearmanr([1, 2, 2, 3], [1, 3, 2, 4]).statistic, from scipy 1.17.1.
        let rho = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]).unwrap();
        assert!((rho - 0.9486832980505139).abs() < 1e-15);
    }

    #[test]
    fn summary_takes_mean_and_sample_std_per_layer() {
        let correlations = |v: f64| Correlations {
            raw: vec![Some(v), None],
            rollout: vec![Some(v), Some(v)],
            rollout_corrected: None,
            flow: Some(vec![Some(v), Some(1.0)]),
        };
        let evaluation = |v| Evaluation {
            scores: ["gradient_norm", "gradient_x_input", "blank_out"]
                .into_iter()
                .map(|s| (s.to_string(), correlations(v)))
                .collect(),
            without_specials: false,
            methods: None,
            eraser: None,
            eraser_importance: None,
        };
        let mut summary = Summary::default();
        summary.add(&evaluation(0.2));
        summary.add(&evaluation(0.6));
        let rows = summary.rows();
        assert_eq!(rows.len(), 9);
        let (score, method, raw) = &rows[0];
        assert_eq!((*score, *method), ("gradient_norm", "raw"));
        assert!((raw[0].0 - 0.4).abs() < 1e-15 && (raw[0].1 - 0.08f64.sqrt()).abs() < 1e-15);
        assert_eq!(raw[1].2, 0);
    }
}
