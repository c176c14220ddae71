//! SPEC §8's mixing matrices for a generated text (`--mixing`): every method's `layer`,
//! `rollout` and (with `--flow`) `flow` maps for each generated token, cut to the prompt as
//! attention's maps are ([`crate::relevance::causal`]).
//!
//! Under the causal mask, row t of a layer depends only on positions ≤ t, so one forward pass
//! over the N = m + g − 1 fed positions, without a cache, gives at row t exactly what the model
//! computed when it generated from there: norm, ALTI and value zeroing read that pass.
//! Attention's maps are the report's own. Grad-attention
//! differentiates the logit of generated token k at its position t = m − 1 + k, so it runs
//! one pass over positions 0..=t and one backward pass per token.
//! The decoders are pre-norm, so ALTI takes the attention block's parts as they are (alti.rs).

use candle_core::{Device, Tensor};

use super::{
    check_finite, decoder_grad_attention, decoder_matrices, CausalMethodMaps, CausalMixings,
    Mixing, Propagated,
};
use crate::error::Result;
use crate::model::causal::{CausalLm, KvCache};
use crate::model::Keep;
use crate::relevance::causal::{CausalMethods, CausalRelevance};
use crate::relevance::ProgressFn;

/// The generated text whose tokens the methods explain.
pub struct Generated<'a> {
    /// The attention maps already computed for the report: the `attention` method's.
    pub relevance: &'a CausalRelevance,
    /// The N = m + g − 1 positions fed to the model: the prompt, then every generated token
    /// but the last.
    pub fed: &'a [u32],
    /// The g generated tokens.
    pub ids: &'a [u32],
    /// m.
    pub prompt: usize,
    /// Told how far each flow has got.
    pub progress: &'a ProgressFn<'a>,
}

/// Every mixing in `mixings` for each generated token.
pub fn causal_mixings(
    model: &dyn CausalLm,
    text: &Generated,
    mixings: &[Mixing],
    methods: CausalMethods,
    device: &Device,
) -> Result<CausalMixings> {
    let fed = Tensor::new(text.fed, device)?.unsqueeze(0)?;
    let pass = match mixings.iter().any(|m| m.reads_traces()) {
        true => {
            let keep = Keep {
                internals: true,
                probes: false,
                ..Keep::default()
            };
            Some(model.step(&fed, &mut KvCache::default(), keep)?)
        }
        false => None,
    };
    let mut all = CausalMixings::new();
    for &mixing in mixings {
        let maps = match (mixing, &pass) {
            // The report's own attention maps.
            (Mixing::ATTENTION, _) => CausalMethodMaps {
                layer: text.relevance.raw.clone(),
                rollout: text.relevance.rollout.clone(),
                flow: text.relevance.flow.clone(),
            },
            (Mixing::GRAD_ATTENTION, _) => {
                let mut maps = Maps::new(text.ids.len());
                for (k, &next) in text.ids.iter().enumerate() {
                    let t = text.prompt - 1 + k;
                    let matrices = decoder_grad_attention(model, &fed.narrow(1, 0, t + 1)?, next)?;
                    maps.push(&propagate(&matrices, mixing, methods)?, t, text, methods)?;
                }
                maps.done()
            }
            (_, Some(pass)) => {
                let propagated =
                    propagate(&decoder_matrices(model, pass, mixing)?, mixing, methods)?;
                let mut maps = Maps::new(text.ids.len());
                for k in 0..text.ids.len() {
                    maps.push(&propagated, text.prompt - 1 + k, text, methods)?;
                }
                maps.done()
            }
            (_, None) => unreachable!("the pass runs for every method that reads it"),
        };
        all.insert(mixing.name().to_string(), maps);
    }
    Ok(all)
}

/// `matrices` checked and made ready for every generated token's maps.
fn propagate(matrices: &Tensor, mixing: Mixing, methods: CausalMethods) -> Result<Propagated> {
    check_finite(matrices, mixing)?;
    Propagated::of(matrices, mixing, methods.relevance.residual)
}

/// One method's maps, token by token.
struct Maps {
    layer: Vec<Vec<Vec<f64>>>,
    rollout: Vec<Vec<Vec<f64>>>,
    flow: Vec<Vec<Vec<f64>>>,
}

impl Maps {
    fn new(tokens: usize) -> Self {
        Self {
            layer: Vec::with_capacity(tokens),
            rollout: Vec::with_capacity(tokens),
            flow: Vec::new(),
        }
    }

    /// Appends the maps of the token predicted at `t`, each `[m][L]` (flow with `--flow`).
    fn push(
        &mut self,
        propagated: &Propagated,
        t: usize,
        text: &Generated,
        methods: CausalMethods,
    ) -> Result<()> {
        let prompt = text.prompt;
        self.layer
            .push(prompt_by_layer(&propagated.layer(t)?, prompt));
        self.rollout
            .push(prompt_by_layer(&propagated.rollout(t)?, prompt));
        if methods.flow {
            self.flow.push(prompt_by_layer(
                &propagated.flow_with(t, text.progress)?,
                prompt,
            ));
        }
        Ok(())
    }

    fn done(self) -> CausalMethodMaps {
        let has_flow = !self.flow.is_empty();
        CausalMethodMaps {
            layer: self.layer,
            rollout: self.rollout,
            flow: has_flow.then_some(self.flow),
        }
    }
}

/// `[L][N]` → `[m][L]`: the first `prompt` positions of every layer.
fn prompt_by_layer(rows: &[Vec<f64>], prompt: usize) -> Vec<Vec<f64>> {
    (0..prompt)
        .map(|j| rows.iter().map(|row| row[j]).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_by_layer_keeps_the_prompt_columns() {
        let rows = vec![vec![0.1, 0.2, 0.7], vec![0.3, 0.3, 0.4]];
        assert_eq!(
            prompt_by_layer(&rows, 2),
            vec![vec![0.1, 0.3], vec![0.2, 0.3]]
        );
    }
}
