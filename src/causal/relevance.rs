//! Which prompt tokens each generated token came from: raw attention, rollout (optionally
//! corrected for the causal mask's receptive fields) and flow over the sequence so far
//! (Abnar & Zuidema 2020, extended to decoders as their §5 suggests).
//!
//! Generated token k (0-based) is predicted at position `t = m − 1 + k` (m prompt tokens).
//! Under the causal mask, row t of a layer only mixes rows ≤ t of the layer below, so the
//! rollout over the whole fed sequence, read at row t, is exactly the rollout over the
//! sequence as it was when token k was generated; one pass serves every token.

use candle_core::{DType, Device, IndexOp, Tensor, D};
use serde::{Deserialize, Serialize};

use crate::attention::{with_residual, AttentionStack, HostLayers};
use crate::error::Result;
use crate::relevance::{flow_with, joint_attention, RelevanceOptions};

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
    causal_relevance_with(stack, prompt, generated, methods, &|_, _| {})
}

/// [`causal_relevance`], telling `progress` how far each token's flow has got.
pub fn causal_relevance_with(
    stack: &AttentionStack,
    prompt: usize,
    generated: usize,
    methods: CausalMethods,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<CausalRelevance> {
    let fused = stack.fuse(methods.relevance.fusion)?;
    let augmented = with_residual(&fused, methods.relevance.residual)?;
    let joint = joint_attention(&augmented)?;
    let rows = prompt - 1..prompt - 1 + generated;
    let slice = |t: &Tensor| -> Result<Tensor> { Ok(t.i((.., rows.clone(), ..prompt))?) };
    let rollout = slice(&joint)?;
    let rollout_corrected = match methods.correction {
        true => {
            let baseline = receptive_field_baseline(&augmented, methods.relevance.residual)?;
            Some(to_gml(&correct_rollout(&rollout, &slice(&baseline)?)?)?)
        }
        false => None,
    };
    let flow = match methods.flow {
        true => {
            let capacities = HostLayers::new(&augmented)?;
            let per_token = rows
                .clone()
                .map(|t| {
                    let layers = capacities.read(|capacities| flow_with(capacities, t, progress));
                    (0..prompt)
                        .map(|j| layers.iter().map(|row| row[j]).collect())
                        .collect()
                })
                .collect();
            Some(per_token)
        }
        false => None,
    };
    Ok(CausalRelevance {
        raw: to_gml(&slice(&fused)?)?,
        rollout: to_gml(&rollout)?,
        rollout_corrected,
        flow,
    })
}

/// The rollout that the causal mask alone produces: `augmented` only gives the shape
/// `[L, N, N]`; returns the joint attention `U_l` `[L, N, N]` of the uniform causal attention
/// `Ū[i][j] = 1/(i+1)` for `j ≤ i` (0 otherwise), with the same residual α.
///
/// `U_l[t][j]` is the share of token j in position t's rollout when attention carries no
/// information at all: every position attends evenly over its receptive field `{0..i}`.
/// Early tokens lie in more receptive fields, so `U_l[t][j]` falls with j.
pub fn receptive_field_baseline(augmented: &Tensor, alpha: f64) -> Result<Tensor> {
    let (layers, n, _) = augmented.dims3()?;
    let uniform: Vec<f64> = (0..n)
        .flat_map(|i| (0..n).map(move |j| if j <= i { 1.0 / (i + 1) as f64 } else { 0.0 }))
        .collect();
    let one = Tensor::from_vec(uniform, (1, n, n), &Device::Cpu)?;
    let stacked = one
        .repeat((layers, 1, 1))?
        .to_dtype(augmented.dtype())?
        .to_device(augmented.device())?;
    joint_attention(&with_residual(&stacked, alpha)?)
}

/// The receptive-field correction: `rollout` and `baseline` are `[L, g, m]` prompt slices of
/// the rollout `R_l[t][j]` and of the uniform-attention baseline `U_l[t][j]`; returns `[L, g, m]`
///
/// ```text
/// C_l[t][j] = (R_l[t][j] / U_l[t][j]) / Σ_{j' < m} (R_l[t][j'] / U_l[t][j'])
/// ```
///
/// i.e. each prompt token's rollout divided by what the causal structure alone would give it,
/// renormalised over the prompt. A token whose rollout is exactly its structural share scores
/// the same as every other such token (1/m when all are); `U_l[t][j] > 0` for j ≤ t, so the
/// ratio is always defined.
pub fn correct_rollout(rollout: &Tensor, baseline: &Tensor) -> Result<Tensor> {
    let ratio = rollout.div(baseline)?;
    let total = ratio.sum_keepdim(D::Minus1)?;
    let safe = total.eq(0.0)?.where_cond(&total.ones_like()?, &total)?;
    Ok(ratio.broadcast_div(&safe)?)
}

/// `[L, g, m]` on any device → `[g][m][L]` on the host.
fn to_gml(t: &Tensor) -> Result<Vec<Vec<Vec<f64>>>> {
    Ok(t.permute((1, 2, 0))?
        .to_device(&Device::Cpu)?
        .to_dtype(DType::F64)?
        .to_vec3()?)
}

#[cfg(test)]
mod tests {
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
        let baseline = receptive_field_baseline(
            &Tensor::zeros((2, 3, 3), DType::F64, &Device::Cpu).unwrap(),
            0.5,
        )
        .unwrap();
        let u2: Vec<f64> = baseline.i((1, 2)).unwrap().to_vec1().unwrap();
        close(&u2, &[23.0 / 72.0, 17.0 / 72.0, 32.0 / 72.0]);
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
