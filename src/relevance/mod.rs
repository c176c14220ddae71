//! Relevance maps of the input tokens for one target position, one row per layer:
//! raw attention, attention rollout and attention flow (Abnar & Zuidema 2020).

mod flow;
mod raw;
mod rollout;

pub use flow::{flow, max_flow};
pub use raw::raw;
pub use rollout::rollout;

use serde::{Deserialize, Serialize};

use crate::attention::{AttentionStack, HeadFusion};

/// How attention becomes relevance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelevanceOptions {
    pub fusion: HeadFusion,
    /// α in `Â = (1 - α)·Ā + α·I`.
    pub residual: f64,
}

impl Default for RelevanceOptions {
    fn default() -> Self {
        Self {
            fusion: HeadFusion::Mean,
            residual: 0.5,
        }
    }
}

/// The three methods' maps, each `[L][n]` (index 0 is layer 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relevance {
    pub raw: Vec<Vec<f64>>,
    pub rollout: Vec<Vec<f64>>,
    pub flow: Vec<Vec<f64>>,
}

impl Relevance {
    /// All three maps for `target` (< `stack.n`).
    pub fn compute(stack: &AttentionStack, target: usize, options: RelevanceOptions) -> Self {
        let fused = stack.fuse(options.fusion);
        let augmented: Vec<_> = fused
            .iter()
            .map(|a| a.with_residual(options.residual))
            .collect();
        Self {
            raw: raw(&fused, target),
            rollout: rollout(&augmented, target),
            flow: flow(&augmented, target),
        }
    }
}
