//! Which prompt tokens each generated token came from: raw attention, rollout (optionally
//! corrected for the causal mask's receptive fields) and flow over the sequence so far
//! (Abnar & Zuidema 2020, extended to decoders as their §5 suggests).
//!
//! Generated token k (0-based) is predicted at position `t = m − 1 + k` (m prompt tokens).
//! Under the causal mask, row t of a layer only mixes rows ≤ t of the layer below, so the
//! rollout over the whole fed sequence, read at row t, is exactly the rollout over the
//! sequence as it was when token k was generated; one pass serves every token.

use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::attention::AttentionStack;
use crate::error::Result;
use crate::relevance::{no_progress, AttentionGraph, ProgressFn, RelevanceOptions};

/// Each method as `[g][m][L]`: generated token k, prompt token j, layer l + 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CausalRelevance {
    /// `Ā_l[t][j]`.
    pub raw: Vec<Vec<Vec<f64>>>,
    /// `R_l[t][j]`: the prompt slice of the rollout row, which does not sum to 1 (the
    /// generated tokens before k hold the rest).
    pub rollout: Vec<Vec<Vec<f64>>>,
    /// The receptive-field correction of the rollout (see [`correct_rollout`]), summing to 1
    /// over the prompt; with `--correction` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_corrected: Option<Vec<Vec<Vec<f64>>>>,
    /// Attention flow from `(l, t)` to `(0, j)`, normalised over all positions as SPEC §1;
    /// with `--flow` only (it solves L · N max-flow problems per generated token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Vec<Vec<Vec<f64>>>>,
}

/// A relevance method of the causal report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CausalMethod {
    Raw,
    Rollout,
    RolloutCorrected,
    Flow,
}

impl CausalMethod {
    /// The JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Rollout => "rollout",
            Self::RolloutCorrected => "rollout_corrected",
            Self::Flow => "flow",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Raw, Self::Rollout, Self::RolloutCorrected, Self::Flow]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

impl CausalRelevance {
    /// The `[g][m][L]` array of `method`, if it was computed.
    pub fn get(&self, method: CausalMethod) -> Option<&Vec<Vec<Vec<f64>>>> {
        match method {
            CausalMethod::Raw => Some(&self.raw),
            CausalMethod::Rollout => Some(&self.rollout),
            CausalMethod::RolloutCorrected => self.rollout_corrected.as_ref(),
            CausalMethod::Flow => self.flow.as_ref(),
        }
    }

    /// The generated-token × prompt-token map `[g][m]`: each entry the mean over layers.
    pub fn token_map(&self, method: CausalMethod) -> Option<Vec<Vec<f64>>> {
        Some(layer_mean(self.get(method)?))
    }

    /// The layer × prompt-token map `[L][m]` of generated token `k`.
    pub fn layer_map(&self, method: CausalMethod, k: usize) -> Option<Vec<Vec<f64>>> {
        Some(by_layer(self.get(method)?.get(k)?))
    }
}

/// One generated token's `[m][L]` → `[L][m]`.
pub fn by_layer(per_prompt: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let layers = per_prompt.first().map_or(0, Vec::len);
    (0..layers)
        .map(|l| per_prompt.iter().map(|j| j[l]).collect())
        .collect()
}

/// `[g][m][L]` → `[g][m]`: each entry the mean over layers.
pub fn layer_mean(maps: &[Vec<Vec<f64>>]) -> Vec<Vec<f64>> {
    let mean = |layers: &Vec<f64>| layers.iter().sum::<f64>() / layers.len().max(1) as f64;
    maps.iter()
        .map(|prompt| prompt.iter().map(mean).collect())
        .collect()
}

/// What to compute beyond raw attention and rollout.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CausalMethods {
    pub relevance: RelevanceOptions,
    pub correction: bool,
    pub flow: bool,
}

/// `stack`: `[L, H, N, N]` causal attention over N ≥ m + g − 1 fed positions; `prompt` = m ≥ 1
/// and `generated` = g ≥ 1. Returns every method as `[g][m][L]`.
pub fn causal_relevance(
    stack: &AttentionStack,
    prompt: usize,
    generated: usize,
    methods: CausalMethods,
) -> Result<CausalRelevance> {
    causal_relevance_with(stack, prompt, generated, methods, &no_progress)
}

/// [`causal_relevance`], telling `progress` how far each token's flow has got.
///
/// Each map is the encoders' ([`AttentionGraph`]) from the position that predicted the
/// generated token, `t = m − 1 + k`, cut to the prompt.
pub fn causal_relevance_with(
    stack: &AttentionStack,
    prompt: usize,
    generated: usize,
    methods: CausalMethods,
    progress: &ProgressFn,
) -> Result<CausalRelevance> {
    let graph = AttentionGraph::new(stack, methods.relevance)?;
    let positions = prompt - 1..prompt - 1 + generated;
    // Each generated token's `[L][n]` map → `[m][L]`.
    let per_token = |map: &dyn Fn(usize) -> Result<Vec<Vec<f64>>>| -> Result<Vec<Vec<Vec<f64>>>> {
        positions
            .clone()
            .map(|t| Ok(prompt_by_layer(&map(t)?, prompt)))
            .collect()
    };
    let rollout = per_token(&|t| graph.rollout(t))?;
    let rollout_corrected = match methods.correction {
        true => {
            let uniform = receptive_field_baseline(stack.layers(), stack.len(), methods.relevance)?;
            let baseline = per_token(&|t| uniform.rollout(t))?;
            Some(correct_rollout(&rollout, &baseline))
        }
        false => None,
    };
    let flow = match methods.flow {
        true => Some(per_token(&|t| graph.flow_with(t, progress))?),
        false => None,
    };
    Ok(CausalRelevance {
        raw: per_token(&|t| graph.raw(t))?,
        rollout,
        rollout_corrected,
        flow,
    })
}

/// `[L][n]` → `[m][L]`: the first m tokens, layers innermost.
fn prompt_by_layer(map: &[Vec<f64>], prompt: usize) -> Vec<Vec<f64>> {
    (0..prompt)
        .map(|j| map.iter().map(|row| row[j]).collect())
        .collect()
}

/// The graph of what the causal mask alone produces over `layers` layers of `n` positions:
/// the uniform causal attention `Ū[i][j] = 1/(i+1)` for `j ≤ i` (0 otherwise), with the
/// options' residual α. Its rollout `U_l[t][j]` is the share of token j in position t's
/// rollout when attention carries no information at all: every position attends evenly over
/// its receptive field `{0..i}`. Early tokens lie in more receptive fields, so `U_l[t][j]`
/// falls with j.
pub fn receptive_field_baseline(
    layers: usize,
    n: usize,
    options: RelevanceOptions,
) -> Result<AttentionGraph> {
    let uniform: Vec<f64> = (0..n)
        .flat_map(|i| (0..n).map(move |j| if j <= i { 1.0 / (i + 1) as f64 } else { 0.0 }))
        .collect();
    let one = Tensor::from_vec(uniform, (1, n, n), &Device::Cpu)?;
    AttentionGraph::from_fused(one.repeat((layers, 1, 1))?, options)
}

/// The receptive-field correction: `rollout` and `baseline` are `[g][m][L]` prompt slices of
/// the rollout `R_l[t][j]` and of the uniform-attention baseline `U_l[t][j]`; returns
/// `[g][m][L]`
///
/// ```text
/// C_l[t][j] = (R_l[t][j] / U_l[t][j]) / Σ_{j' < m} (R_l[t][j'] / U_l[t][j'])
/// ```
///
/// i.e. each prompt token's rollout divided by what the causal structure alone would give it,
/// renormalised over the prompt. A token whose rollout is exactly its structural share scores
/// the same as every other such token (1/m when all are); `U_l[t][j] > 0` for j ≤ t, so the
/// ratio is always defined.
pub fn correct_rollout(
    rollout: &[Vec<Vec<f64>>],
    baseline: &[Vec<Vec<f64>>],
) -> Vec<Vec<Vec<f64>>> {
    rollout
        .iter()
        .zip(baseline)
        .map(|(r, u)| {
            let ratio: Vec<Vec<f64>> = r
                .iter()
                .zip(u)
                .map(|(r, u)| r.iter().zip(u).map(|(r, u)| r / u).collect())
                .collect();
            let layers = ratio.first().map_or(0, Vec::len);
            let totals: Vec<f64> = (0..layers)
                .map(|l| match ratio.iter().map(|j| j[l]).sum::<f64>() {
                    0.0 => 1.0,
                    total => total,
                })
                .collect();
            ratio
                .iter()
                .map(|j| j.iter().zip(&totals).map(|(x, total)| x / total).collect())
                .collect()
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One head in which every position attends only to token 0 (an "attention sink").
    fn sink(layers: usize, n: usize) -> AttentionStack {
        let mut one = vec![0.0; n * n];
        (0..n).for_each(|i| one[i * n] = 1.0);
        AttentionStack::from_vec(layers, 1, n, one.repeat(layers)).unwrap()
    }

    fn close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    }

    /// Made-up maps of one generated token: m = 3, L = 2.
    pub(crate) fn relevance() -> CausalRelevance {
        let rows = vec![vec![vec![0.1, 0.3], vec![0.5, 0.5], vec![0.4, 0.8]]];
        CausalRelevance {
            raw: rows.clone(),
            rollout: rows,
            rollout_corrected: None,
            flow: None,
        }
    }

    #[test]
    fn maps_average_layers_and_slice_one_token() {
        let r = relevance();
        assert_eq!(
            r.token_map(CausalMethod::Rollout).unwrap(),
            vec![vec![0.2, 0.5, 0.6000000000000001]]
        );
        assert_eq!(
            r.layer_map(CausalMethod::Rollout, 0).unwrap(),
            vec![vec![0.1, 0.5, 0.4], vec![0.3, 0.5, 0.8]]
        );
        assert!(r.token_map(CausalMethod::Flow).is_none());
        assert!(r.layer_map(CausalMethod::Rollout, 1).is_none());
    }

    #[test]
    fn correction_by_hand_one_layer() {
        // Â = ½·[[1,0],[.8,.2]] + ½·I = [[1,0],[.4,.6]]; Û = ½·[[1,0],[.5,.5]] + ½·I
        // = [[1,0],[.25,.75]]. Row 1: ratios .4/.25 = 1.6 and .6/.75 = .8 → [2/3, 1/3].
        let stack = AttentionStack::from_vec(1, 1, 2, vec![1.0, 0.0, 0.8, 0.2]).unwrap();
        let methods = CausalMethods {
            correction: true,
            ..Default::default()
        };
        let r = causal_relevance(&stack, 2, 1, methods).unwrap();
        close(&r.rollout[0][0], &[0.4]);
        let corrected = r.rollout_corrected.unwrap();
        close(
            &[corrected[0][0][0], corrected[0][1][0]],
            &[2.0 / 3.0, 1.0 / 3.0],
        );
    }

    #[test]
    fn correction_by_hand_two_layers() {
        // Every position attends to token 0. Â = [[1,0,0],[.5,.5,0],[.5,0,.5]];
        // R_1[2] = [.5, 0, .5], R_2[2] = .5·Â[0] + .5·Â[2] = [.75, 0, .25].
        // Û = [[1,0,0],[1/4,3/4,0],[1/6,1/6,2/3]]; U_1[2] = [1/6, 1/6, 2/3],
        // U_2[2] = 1/6·Û[0] + 1/6·Û[1] + 2/3·Û[2] = [23/72, 17/72, 32/72].
        // Layer 1: ratios [3, 0, 3/4] → [.8, 0, .2].
        // Layer 2: ratios [54/23, 0, 9/16] → [96/119, 0, 23/119].
        let methods = CausalMethods {
            correction: true,
            ..Default::default()
        };
        let r = causal_relevance(&sink(2, 3), 3, 1, methods).unwrap();
        let (rollout, corrected) = (&r.rollout[0], r.rollout_corrected.as_ref().unwrap());
        close(
            &[rollout[0][1], rollout[1][1], rollout[2][1]],
            &[0.75, 0.0, 0.25],
        );
        let layer = |l: usize| [0, 1, 2].map(|j| corrected[0][j][l]);
        close(&layer(0), &[0.8, 0.0, 0.2]);
        close(&layer(1), &[96.0 / 119.0, 0.0, 23.0 / 119.0]);
        let baseline = receptive_field_baseline(2, 3, RelevanceOptions::default()).unwrap();
        close(
            &baseline.rollout(2).unwrap()[1],
            &[23.0 / 72.0, 17.0 / 72.0, 32.0 / 72.0],
        );
    }

    #[test]
    fn shapes_are_generated_by_prompt_by_layer() {
        // 4 fed positions: a prompt of 2 and 3 generated tokens (the last one never fed).
        let methods = CausalMethods {
            correction: true,
            flow: true,
            ..Default::default()
        };
        let r = causal_relevance(&sink(3, 4), 2, 3, methods).unwrap();
        for method in [
            &r.raw,
            &r.rollout,
            r.rollout_corrected.as_ref().unwrap(),
            r.flow.as_ref().unwrap(),
        ] {
            assert_eq!(method.len(), 3);
            assert!(method
                .iter()
                .all(|k| k.len() == 2 && k.iter().all(|j| j.len() == 3)));
        }
        // Nothing attends to token 1 from a later position, so no flow reaches it.
        let flow = r.flow.unwrap();
        assert!(flow[2][0][2] > 0.0 && flow[2][1][2] == 0.0, "{flow:?}");
    }
}
