//! Relevance maps of the input tokens for one target position, one row per layer:
//! raw attention, attention rollout and attention flow (Abnar & Zuidema 2020).

pub mod causal;
mod discard;
mod flow;
mod raw;
mod rollout;

pub use discard::discard;
pub use flow::{
    flow, flow_from_every_position, flow_from_every_position_with, flow_with, max_flow,
};
pub use raw::raw;
pub use rollout::{joint_attention, rollout, rollout_on_host, Augmenting};

use std::ops::ControlFlow;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::attention::{with_residual, AttentionStack, HeadFusion, HostLayers};
use crate::device::available_memory;
use crate::error::{Error, Result};

/// How attention becomes relevance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RelevanceOptions {
    pub fusion: HeadFusion,
    /// α in `Â = (1 - α)·Ā + α·I`.
    pub residual: f64,
    /// The fraction of each fused layer's entries zeroed before rollout and flow
    /// ([`discard`]; 0: none).
    pub discard_ratio: f64,
}

impl Default for RelevanceOptions {
    fn default() -> Self {
        Self {
            fusion: HeadFusion::Mean,
            residual: 0.5,
            discard_ratio: 0.0,
        }
    }
}

/// Called as `(done, total)` while a flow runs, from any thread: one position's flow counts
/// its sinks, every position's its (layer, sink) pairs. Each flow is a new count, except
/// where a caller adds several up (a generated text's flows, in one count). Answering
/// `Break` stops the flow soon after (within the sinks or positions under way), and it fails
/// with [`Error::Interrupted`](crate::Error::Interrupted).
pub type ProgressFn<'a> = dyn Fn(usize, usize) -> ControlFlow<()> + Sync + 'a;

/// The progress of a flow nobody watches: it never stops one.
pub fn no_progress(_done: usize, _total: usize) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// A [`ProgressFn`] that options can hold.
#[derive(Clone)]
pub struct Progress(pub Arc<dyn Fn(usize, usize) -> ControlFlow<()> + Send + Sync>);

impl Progress {
    /// What a flow calls: this progress, or [`no_progress`] without one.
    pub fn of(progress: Option<&Progress>) -> &ProgressFn<'_> {
        match progress {
            Some(progress) => &*progress.0,
            None => &no_progress,
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl PartialEq for Progress {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Whether an encoder's report computes attention flow: its cost grows far faster with the
/// text's length than the other maps' (it solves `L · n` max-flow problems on a graph of
/// `L · n²` edges), so past [`FLOW_AUTO_LIMIT`] tokens it is computed only when asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlowChoice {
    /// Up to [`FLOW_AUTO_LIMIT`] tokens.
    #[default]
    Auto,
    /// At any length (`--flow`).
    Always,
    /// Never (`--no-flow`).
    Never,
}

/// The longest text whose flow [`FlowChoice::Auto`] computes: every input of a 512-position
/// encoder, and twice that.
pub const FLOW_AUTO_LIMIT: usize = 1024;

impl FlowChoice {
    /// Whether a text of `n` tokens gets its flow.
    pub fn wanted(self, n: usize) -> bool {
        match self {
            Self::Auto => n <= FLOW_AUTO_LIMIT,
            Self::Always => true,
            Self::Never => false,
        }
    }
}

/// The three methods' maps for one target, each `[L][n]` (index 0 is layer 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relevance {
    pub raw: Vec<Vec<f64>>,
    pub rollout: Vec<Vec<f64>>,
    /// Absent where flow was not computed ([`FlowChoice`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Vec<Vec<f64>>>,
}

impl Relevance {
    /// Each map the report has, named: raw, rollout, and flow where it was computed.
    pub fn named(&self) -> impl Iterator<Item = (&'static str, &Vec<Vec<f64>>)> {
        [("raw", &self.raw), ("rollout", &self.rollout)]
            .into_iter()
            .chain(self.flow.as_ref().map(|flow| ("flow", flow)))
    }
}

/// Raw attention, rollout and flow from every position, each `[L][n][n]`: `[l][i][j]` is
/// the relevance of input token j for position i at layer l + 1 (the reference's
/// `compute_flows`; raw is the fused attention matrix itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllPositions {
    /// Absent from reports written before it was added: empty then.
    #[serde(default)]
    pub raw: Vec<Vec<Vec<f64>>>,
    pub rollout: Vec<Vec<Vec<f64>>>,
    /// Absent where flow was not computed ([`FlowChoice`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<Vec<Vec<Vec<f64>>>>,
}

/// The layers as a graph, on the host: the fused attention alone. Rollout makes each
/// residual-augmented layer as it reads it, so a long text holds one augmented layer and not
/// L; flow and every position's maps make them all (their own cost is far larger).
pub struct AttentionGraph {
    /// Raw attention's layers.
    fused: Tensor,
    /// Rollout's and flow's: `fused` with `--discard-ratio`'s entries zeroed.
    linked: Tensor,
    residual: f64,
}

impl AttentionGraph {
    /// The heads are fused where the stack lies; a stack on a GPU then comes to the host in
    /// one copy of `[L, n, n]` (an H-th of the stack), and every map is computed there.
    pub fn new(stack: &AttentionStack, options: RelevanceOptions) -> Result<Self> {
        Self::from_fused(fuse_to_host(stack, options)?, options)
    }

    /// The graph of `[L, n, n]` fused attention from [`fuse_to_host`]: the host's half.
    pub fn from_fused(fused: Tensor, options: RelevanceOptions) -> Result<Self> {
        let fused = host(&fused)?.contiguous()?;
        Ok(Self {
            linked: discard(&fused, options.discard_ratio)?,
            fused,
            residual: options.residual,
        })
    }

    /// The number of tokens.
    pub fn len(&self) -> usize {
        self.shape().1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Raw attention, rollout and flow for `target` (< n).
    pub fn relevance(&self, target: usize) -> Result<Relevance> {
        self.relevance_with(target, true, &no_progress)
    }

    /// Raw attention, rollout and (with `flow`) flow for `target`, calling
    /// `progress(done, total)` as the flow advances (see [`flow_with`]).
    pub fn relevance_with(
        &self,
        target: usize,
        flow: bool,
        progress: &ProgressFn,
    ) -> Result<Relevance> {
        Ok(Relevance {
            raw: self.raw(target)?,
            rollout: self.rollout(target)?,
            flow: match flow {
                true => Some(self.flow_with(target, progress)?),
                false => None,
            },
        })
    }

    /// Raw attention alone for `target` (< n), `[L][n]`.
    pub fn raw(&self, target: usize) -> Result<Vec<Vec<f64>>> {
        to_rows(&raw(&self.fused, target)?)
    }

    /// Rollout alone for `target` (< n), `[L][n]`, without computing any flow.
    pub fn rollout(&self, target: usize) -> Result<Vec<Vec<f64>>> {
        let fused = HostLayers::new(&self.linked)?;
        Ok(fused.read(|layers| rollout_on_host(&Augmenting::new(layers, self.residual), target)))
    }

    /// The residual-augmented layers `Â_l`, `[L, n, n]`, each as flow reads it.
    fn augmented(&self) -> Result<(Tensor, HostLayers)> {
        let augmented = with_residual(&self.linked, self.residual)?;
        let capacities = HostLayers::new(&augmented)?;
        Ok((augmented, capacities))
    }

    /// `[L, n]` of the fused layers.
    fn shape(&self) -> (usize, usize) {
        let dims = self.fused.dims();
        (dims[0], dims[1])
    }

    /// Flow alone for `target` (< n), `[L][n]`.
    pub fn flow(&self, target: usize) -> Result<Vec<Vec<f64>>> {
        self.flow_with(target, &no_progress)
    }

    /// [`Self::flow`], calling `progress(done, total)` as it advances (see [`flow_with`]).
    pub fn flow_with(&self, target: usize, progress: &ProgressFn) -> Result<Vec<Vec<f64>>> {
        let (layers, n) = self.shape();
        let asked = Asked {
            flow: true,
            all_positions: false,
            fused: false,
        };
        maps_fit(layers, n, asked)?;
        let (_, capacities) = self.augmented()?;
        capacities.read(|capacities| flow_with(capacities, target, progress))
    }

    /// Raw attention, rollout and (with `flow`) flow from every position, calling
    /// `progress(done, total)` as the flows advance (see [`flow_from_every_position_with`]).
    pub fn all_positions(&self, flow: bool, progress: &ProgressFn) -> Result<AllPositions> {
        let (layers, n) = self.shape();
        let asked = Asked {
            flow,
            all_positions: true,
            fused: false,
        };
        maps_fit(layers, n, asked)?;
        let (augmented, capacities) = self.augmented()?;
        let flow = match flow {
            true => Some(
                capacities
                    .read(|capacities| flow_from_every_position_with(capacities, progress))?,
            ),
            false => None,
        };
        Ok(AllPositions {
            raw: self.fused.to_vec3()?,
            rollout: host(&joint_attention(&augmented)?)?.to_vec3()?,
            flow,
        })
    }
}

/// What the memory must hold besides what it holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    /// Flow from the target.
    pub flow: bool,
    /// Every position's maps (with flow where `flow`).
    pub all_positions: bool,
    /// The fused layers too: before the forward pass, which makes them.
    pub fused: bool,
}

/// An error, before any of it is allocated, where the maps `asked` for of `n` tokens through
/// `layers` layers need more memory than the system says is available
/// ([`available_memory`]), saying how to do without.
pub fn maps_fit(layers: usize, n: usize, asked: Asked) -> Result<()> {
    // Raw attention and rollout alone are what the fused layers already are: nothing to read.
    if !asked.flow && !asked.all_positions {
        return Ok(());
    }
    let threads = rayon::current_num_threads();
    maps_fit_in(available_memory(), threads, layers, n, asked)
}

/// [`maps_fit`] with `available` bytes (`None`: unknown, which refuses nothing).
fn maps_fit_in(
    available: Option<u64>,
    threads: usize,
    layers: usize,
    n: usize,
    asked: Asked,
) -> Result<()> {
    let Asked {
        flow,
        all_positions,
        fused,
    } = asked;
    let held = if fused { layers as u64 } else { 0 };
    let fits = |copies: u64, what: &str, remedy: &'static str| -> Result<()> {
        let needed = layer_bytes(n).saturating_mul(copies.saturating_add(held));
        match available {
            Some(available) if needed > available => Err(Error::Memory {
                what: format!("{what} on {n} tokens through {layers} layers"),
                needed: needed as f64 / 1e9,
                available: available as f64 / 1e9,
                remedy,
            }),
            _ => Ok(()),
        }
    };
    let flow_copies = flow_copies(layers, threads);
    if flow {
        fits(flow_copies, "attention flow", NO_FLOW)?;
    }
    if all_positions {
        // The augmented layers, their joint attention, raw and rollout as rows; with flow,
        // its own layers (the augmented counted once) and every position's flow as rows.
        let layers = layers as u64;
        let copies = match flow {
            true => 3 * layers + flow_copies + layers,
            false => 4 * layers,
        };
        let what = "every position's maps (--all-positions)";
        fits(
            copies,
            what,
            "leave out --all-positions, or explain a shorter text",
        )?;
    }
    Ok(())
}

/// How to do without a flow too large for the memory.
const NO_FLOW: &str = "leave flow out (--no-flow; past 1,024 tokens it is left out unless --flow asks for it), or explain a shorter text";

/// One f64 layer of `n` positions, in bytes.
fn layer_bytes(n: usize) -> u64 {
    (n as u64).saturating_mul(n as u64).saturating_mul(8)
}

/// How many f64 layers a flow over `layers` layers holds besides the fused ones: the
/// augmented layers, the engine's transposed copy of all but the top one, and one workspace
/// per thread holding a flow on each of those. At n = 8,192 and 22 layers on 2 threads, 85
/// layers: 45.6 GB.
fn flow_copies(layers: usize, threads: usize) -> u64 {
    let below_top = layers.saturating_sub(1) as u64;
    (layers as u64).saturating_add(below_top.saturating_mul(1 + threads as u64))
}

impl Relevance {
    /// All three maps for `target` (< `stack.len()`).
    pub fn compute(
        stack: &AttentionStack,
        target: usize,
        options: RelevanceOptions,
    ) -> Result<Self> {
        AttentionGraph::new(stack, options)?.relevance(target)
    }
}

/// The stack's heads fused where it lies (in f64 but on Metal), brought to the host in one
/// copy of `[L, n, n]`: the device's half of [`AttentionGraph::new`].
pub fn fuse_to_host(stack: &AttentionStack, options: RelevanceOptions) -> Result<Tensor> {
    host(&stack.fuse(options.fusion)?)
}

fn host(t: &Tensor) -> Result<Tensor> {
    Ok(t.to_device(&Device::Cpu)?.to_dtype(DType::F64)?)
}

/// `[L, n]` on any device → rows on the host.
fn to_rows(t: &Tensor) -> Result<Vec<Vec<f64>>> {
    Ok(host(t)?.to_vec2()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a flow adds is counted before it starts: ModernBERT-base at its longest, on 2
    /// threads, needs 85 f64 layers of 8,192² more.
    #[test]
    fn a_flow_counts_its_layers() {
        assert_eq!(flow_copies(22, 2), 22 + 21 * 3);
        assert_eq!(layer_bytes(8192) * flow_copies(22, 2), 45_634_027_520);
        assert_eq!(flow_copies(1, 16), 1);
    }

    /// More than the memory available is an error saying what and how to do without; an
    /// unknown amount refuses nothing.
    #[test]
    fn maps_larger_than_the_memory_available_are_refused_before_they_start() {
        // 2 layers of 3² f64 are 72 bytes each; a flow on 1 thread holds 2 + 1·2 of them,
        // every position's maps 4 more (with flow, 6 more: their flow's rows too).
        let fit = |available, flow, all_positions| {
            let asked = Asked {
                flow,
                all_positions,
                fused: false,
            };
            maps_fit_in(available, 1, 2, 3, asked)
        };
        assert!(fit(Some(288), true, false).is_ok() && fit(None, true, true).is_ok());
        let message = fit(Some(287), true, false).unwrap_err().to_string();
        assert!(
            message.starts_with("attention flow on 3 tokens through 2 layers needs about 0.0 GB")
                && message.contains("0.0 GB is available")
                && message.contains("--no-flow"),
            "{message}"
        );
        assert!(fit(Some(864), true, true).is_ok() && fit(Some(576), false, true).is_ok());
        for (available, flow) in [(863, true), (575, false)] {
            let message = fit(Some(available), flow, true).unwrap_err().to_string();
            assert!(
                message.starts_with("every position's maps (--all-positions) on 3 tokens")
                    && message.contains("leave out --all-positions"),
                "{message}"
            );
        }
        assert!(fit(Some(575), false, false).is_ok() && fit(Some(0), false, false).is_ok());
        // Before the forward pass, the fused layers count too.
        let before = |available| {
            let asked = Asked {
                flow: true,
                all_positions: false,
                fused: true,
            };
            maps_fit_in(available, 1, 2, 3, asked)
        };
        assert!(before(Some(432)).is_ok() && before(Some(431)).is_err());
    }
}
