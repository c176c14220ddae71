//! Mixing matrices × aggregations (SPEC §8): every method turns what the layers kept into
//! one matrix `M_l` per layer (row i: the layer's output at i, column j: its input at j);
//! [`aggregate`] then gives its `layer`, `rollout` and `flow` maps like attention's.
//!
//! - `attention`: heads fused (Abnar & Zuidema 2020), today's maps;
//! - `norm`: ‖Σ_h A^h_ij f^h(x_j)‖ (Kobayashi et al. 2020), norm.rs;
//! - `alti`: each input's share of the attention block's normalised output (Ferrando et al.
//!   2022), alti.rs;
//! - `value-zeroing`: how much the layer's output moves when an input's values are zeroed
//!   (Mohebbi et al. 2023), value_zeroing.rs;
//! - `grad-attention`: attention weighted by the gradient of the explained logit (Chefer et
//!   al. 2021), grad_attention.rs.

mod aggregate;
mod alti;
pub mod causal;
mod grad_attention;
mod norm;
mod value_zeroing;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

pub use aggregate::{aggregate, aggregate_with, Propagated};
pub use grad_attention::decoder_matrices as decoder_grad_attention;

use crate::attention::compute_dtype;
use crate::error::{Error, Result};
use crate::model::causal::{CausalLm, StepOutput};
use crate::model::{Keep, LayerInternals, LayerTrace, Model, ModelOutput};
use crate::relevance::{ProgressFn, Relevance, RelevanceOptions};

/// One mixing method of SPEC §8: its name, where its `M_l` comes from, and whether `M_l`
/// already holds the residual connection (no α is added then).
struct Method {
    name: &'static str,
    source: Source,
    residual_inside: bool,
}

/// Where a method's `M_l` comes from.
#[derive(Clone, Copy)]
enum Source {
    /// The attention probabilities, heads fused: the report's own maps.
    Attention,
    /// Each layer's trace of one forward pass that kept the layers' internals.
    Layers(fn(&TracedLayer) -> Result<Tensor>),
    /// The gradient of the explained logit (a prediction head), aggregated by Chefer's rule.
    Gradient,
}

/// Every method, in the order reports list them. A method that reads the layers' traces is
/// one file with its `matrix` and one line here; encoders and decoders then both run it.
const METHODS: [Method; 5] = [
    Method {
        name: "attention",
        source: Source::Attention,
        residual_inside: false,
    },
    Method {
        name: "norm",
        source: Source::Layers(norm::matrix),
        residual_inside: false,
    },
    Method {
        name: "alti",
        source: Source::Layers(alti::matrix),
        residual_inside: true,
    },
    Method {
        name: "value-zeroing",
        source: Source::Layers(value_zeroing::matrix),
        residual_inside: true,
    },
    Method {
        name: "grad-attention",
        source: Source::Gradient,
        residual_inside: false,
    },
];

/// One layer as a method that reads traces sees it.
pub struct TracedLayer<'a> {
    /// `[1, H, n, n]`.
    pub probs: &'a Tensor,
    pub internals: &'a LayerInternals,
    /// The layer run alone on a batch of inputs `[b, n, d]`, each position's value vectors
    /// multiplied by a mask `[b, n]` (value zeroing).
    pub rerun: &'a dyn Fn(&Tensor, Option<&Tensor>) -> Result<Tensor>,
    /// Its feed-forward width (how value zeroing sizes its batches).
    pub width: usize,
}

/// A method of [`METHODS`], by its place there (which is its order in reports).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mixing(usize);

impl Mixing {
    /// Attention's own maps (Abnar & Zuidema 2020).
    pub const ATTENTION: Mixing = Mixing::named("attention");
    /// Chefer et al. 2021.
    pub const GRAD_ATTENTION: Mixing = Mixing::named("grad-attention");

    /// The method called `name` (a compile-time error where there is none).
    const fn named(name: &str) -> Mixing {
        let mut i = 0;
        while i < METHODS.len() {
            if same(METHODS[i].name.as_bytes(), name.as_bytes()) {
                return Mixing(i);
            }
            i += 1;
        }
        panic!("no such method")
    }

    /// Every method, in report order.
    pub fn all() -> impl Iterator<Item = Mixing> {
        (0..METHODS.len()).map(Mixing)
    }

    fn method(self) -> &'static Method {
        &METHODS[self.0]
    }

    pub fn name(self) -> &'static str {
        self.method().name
    }

    /// Whether `M_l` already holds the residual connection (no α is added).
    pub fn residual_inside(self) -> bool {
        self.method().residual_inside
    }

    /// Whether the method needs the model's internals, not just its attention.
    pub fn needs_model(self) -> bool {
        !matches!(self.method().source, Source::Attention)
    }

    /// Whether the method reads each layer's trace of one forward pass.
    pub fn reads_traces(self) -> bool {
        matches!(self.method().source, Source::Layers(_))
    }

    /// Whether the method needs a score to differentiate (a prediction head).
    pub fn needs_score(self) -> bool {
        matches!(self.method().source, Source::Gradient)
    }

    /// Every method's name, in report order, comma-separated.
    pub fn names() -> String {
        Mixing::all()
            .map(Mixing::name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether a `--mixing` list names `all`: every method that applies to the model
    /// ([`crate::Explainer::applicable`]).
    pub fn names_all(text: &str) -> bool {
        text.split(',').any(|name| name.trim() == "all")
    }

    /// Parses `--mixing`: comma-separated names, or `all`.
    pub fn parse_list(text: &str) -> Result<Vec<Mixing>> {
        let mut list = Vec::new();
        for name in text.split(',').map(str::trim) {
            let chosen: Vec<Mixing> = match name {
                "all" => Mixing::all().collect(),
                _ => vec![name.parse()?],
            };
            for m in chosen {
                if !list.contains(&m) {
                    list.push(m);
                }
            }
        }
        list.sort();
        Ok(list)
    }
}

impl FromStr for Mixing {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        Mixing::all()
            .find(|m| m.name() == name)
            .ok_or_else(|| Error::UnknownMixing {
                given: name.to_string(),
                known: Mixing::names(),
            })
    }
}

impl fmt::Display for Mixing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Mixing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Byte-for-byte equality, at compile time.
const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// One method's maps for the target, each `[L][n]` (index 0 is layer 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodMaps {
    pub layer: Vec<Vec<f64>>,
    pub rollout: Vec<Vec<f64>>,
    /// Absent where attention's flow is ([`crate::relevance::FlowChoice`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Vec<Vec<f64>>>,
}

impl MethodMaps {
    /// Each map, named: layer, rollout, and flow where it was computed.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, &Vec<Vec<f64>>)> {
        [("layer", &self.layer), ("rollout", &self.rollout)]
            .into_iter()
            .chain(self.flow.as_ref().map(|flow| ("flow", flow)))
    }
}

/// Every computed method's maps, by mixing name (the report's `methods`).
pub type Methods = BTreeMap<String, MethodMaps>;

/// One method's maps, each `[g][m][L]` like [`crate::relevance::causal::CausalRelevance`]'s: generated token k,
/// prompt token j, layer l + 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CausalMethodMaps {
    /// `M_l[t][j]`, rows normalised as SPEC §8 says.
    pub layer: Vec<Vec<Vec<f64>>>,
    pub rollout: Vec<Vec<Vec<f64>>>,
    /// With `--flow` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Vec<Vec<Vec<f64>>>>,
}

/// Every computed method's maps, by mixing name (the causal report's `methods`).
pub type CausalMixings = BTreeMap<String, CausalMethodMaps>;

/// What the methods need from one explained input.
pub struct Run<'a> {
    pub model: &'a Model,
    /// `[1, n]` u32.
    pub ids: &'a Tensor,
    /// `[1, n]` u32.
    pub types: &'a Tensor,
    /// The explained position.
    pub target: usize,
    /// The class whose logit grad-attention differentiates (a word or a label); `None`
    /// without a head.
    pub score: Option<u32>,
}

/// Every mixing in `mixings`, aggregated for the run's target. Attention's maps are the
/// report's own (`relevance`, computed with the same options); the other methods read one
/// more forward pass, which keeps the layers' internals. Each has a flow map where attention
/// has one (`relevance.flow`); `progress` is told how far each flow has got.
pub fn compute(
    run: &Run,
    mixings: &[Mixing],
    options: RelevanceOptions,
    relevance: &Relevance,
    progress: &ProgressFn,
) -> Result<Methods> {
    let pass = match mixings.iter().any(|m| m.needs_model()) {
        true => {
            let keep = Keep {
                internals: true,
                probes: false,
                ..Keep::default()
            };
            Some(
                run.model
                    .forward(run.ids, Some(run.types), run.target, keep)?,
            )
        }
        false => None,
    };
    let mut methods = Methods::new();
    for &mixing in mixings {
        let maps = match (mixing, &pass) {
            (Mixing::ATTENTION, _) => MethodMaps {
                layer: relevance.raw.clone(),
                rollout: relevance.rollout.clone(),
                flow: relevance.flow.clone(),
            },
            (_, Some(output)) => {
                let matrices = matrices(run, output, mixing)?;
                check_finite(&matrices, mixing)?;
                let flow = relevance.flow.is_some();
                let alpha = options.residual;
                aggregate_with(&matrices, mixing, run.target, alpha, flow, progress)?
            }
            (_, None) => unreachable!("the pass runs for every method but attention"),
        };
        methods.insert(mixing.name().to_string(), maps);
    }
    Ok(methods)
}

/// `[L, n, n]` (f64 on the model's device): `M_l` of every layer but attention's (the
/// report's own), before any row normalisation, from `output`, a forward pass that kept the
/// layers' internals.
pub fn matrices(run: &Run, output: &ModelOutput, mixing: Mixing) -> Result<Tensor> {
    match mixing.needs_score() {
        true => {
            let score = run.score.ok_or(Error::NeedsMlmHead {
                what: "grad-attention",
                model: "this checkpoint".into(),
            })?;
            grad_attention::matrices(run, score)
        }
        false => {
            let input = &kept(&output.layers[0], mixing)?.input;
            let width = input.dim(2)? * run.model.intermediate_factor();
            let layer =
                |l: usize, x: &Tensor, mask: Option<&Tensor>| run.model.run_layer(l, x, mask);
            from_traces(&output.layers, &layer, width, mixing)
        }
    }
}

/// `[L, n, n]` (f64): a causal decoder's `M_l` of every layer for norm, ALTI and value
/// zeroing, before row normalisation, from `pass`, one forward pass over n positions that
/// kept the layers' internals; an entry is exactly zero where the position cannot read the
/// input (a later one, or one outside a sliding window). Attention's are the generation's
/// own; grad-attention's depend on the token explained ([`decoder_grad_attention`]).
pub fn decoder_matrices(model: &dyn CausalLm, pass: &StepOutput, mixing: Mixing) -> Result<Tensor> {
    let layer = |l: usize, x: &Tensor, mask: Option<&Tensor>| model.run_layer(l, x, mask);
    from_traces(&pass.layers, &layer, model.dims().intermediate, mixing)
}

/// A model's layer `l` run alone on `x` (`[b, n, d]`), each position's value vectors
/// multiplied by `mask` (`[b, n]`): what value zeroing reruns, an encoder's or a decoder's.
type RunLayer<'a> = dyn Fn(usize, &Tensor, Option<&Tensor>) -> Result<Tensor> + 'a;

/// `[L, n, n]` (f64): the `M_l` of every layer of a method that reads traces, from those of
/// one forward pass that kept the layers' internals, whichever model ran it; `layer` reruns
/// a layer and `width` is its feed-forward width (value zeroing).
fn from_traces(
    traces: &[LayerTrace],
    layer: &RunLayer,
    width: usize,
    mixing: Mixing,
) -> Result<Tensor> {
    let Source::Layers(matrix) = mixing.method().source else {
        let why = format!("{mixing} does not come from the layers' internals");
        return Err(candle_core::Error::Msg(why).into());
    };
    let layers = (traces.iter().enumerate())
        .map(|(l, trace)| {
            let rerun = |x: &Tensor, mask: Option<&Tensor>| layer(l, x, mask);
            matrix(&TracedLayer {
                probs: &trace.probs,
                internals: kept(trace, mixing)?,
                rerun: &rerun,
                width,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::stack(&layers, 0)?)
}

/// The internals a trace kept.
fn kept(trace: &LayerTrace, mixing: Mixing) -> Result<&LayerInternals> {
    let missing = || candle_core::Error::Msg(format!("{mixing} needs the layers' internals"));
    Ok(trace.internals.as_ref().ok_or_else(missing)?)
}

pub(crate) fn check_finite(matrices: &Tensor, mixing: Mixing) -> Result<()> {
    let values: Vec<f64> = host(matrices)?.flatten_all()?.to_vec1()?;
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        let n = matrices.dim(1)?;
        return Err(Error::NotFinite {
            what: format!(
                "the {mixing} mixing matrix of layer {} (row {}, column {})",
                at / (n * n) + 1,
                at / n % n,
                at % n
            ),
        });
    }
    Ok(())
}

/// The weights `[H, n, n]` that one layer's head values `[H, n, d]` are mixed with, and those
/// values, widened: the attention, with each row scaled where a norm after the attention
/// block scales it ([`LayerInternals::row_scale`]).
fn mixing_inputs(probs: &Tensor, internals: &LayerInternals) -> Result<(Tensor, Tensor)> {
    let a = wide(&probs.squeeze(0)?)?;
    let a = match &internals.row_scale {
        Some(scale) => a.broadcast_mul(&wide(scale)?.reshape((1, (), 1))?)?,
        None => a,
    };
    Ok((a, wide(&internals.head_values.squeeze(0)?)?))
}

/// Any tensor → f64 on the host.
fn host(t: &Tensor) -> Result<Tensor> {
    Ok(t.to_device(&Device::Cpu)?.to_dtype(DType::F64)?)
}

/// Any tensor → the widest float its device has (f64; f32 on Metal), where every method's
/// arithmetic happens.
fn wide(t: &Tensor) -> Result<Tensor> {
    Ok(t.to_dtype(compute_dtype(t.device()))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_names_each_method_once_in_report_order() {
        assert_eq!(
            Mixing::names(),
            "attention, norm, alti, value-zeroing, grad-attention"
        );
        for mixing in Mixing::all() {
            assert_eq!(mixing.name().parse::<Mixing>().unwrap(), mixing);
        }
        assert_eq!(Mixing::ATTENTION.name(), "attention");
        assert_eq!(Mixing::GRAD_ATTENTION.name(), "grad-attention");
        let inside: Vec<&str> = (Mixing::all().filter(|m| m.residual_inside()))
            .map(Mixing::name)
            .collect();
        assert_eq!(inside, ["alti", "value-zeroing"]);
        let traced: Vec<&str> = (Mixing::all().filter(|m| m.reads_traces()))
            .map(Mixing::name)
            .collect();
        assert_eq!(traced, ["norm", "alti", "value-zeroing"]);
        assert_eq!(
            Mixing::parse_list("grad-attention, norm,norm").unwrap(),
            [Mixing::all().nth(1).unwrap(), Mixing::GRAD_ATTENTION]
        );
    }
}
