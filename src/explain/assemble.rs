//! The report from an attention stack (a model's or a saved one), and ERASER over its maps.

use std::collections::BTreeMap;

use candle_core::Device;

use super::ExplainOptions;
use crate::attention::AttentionStack;
use crate::device::device_name;
use crate::error::{Error, Result};
use crate::faithfulness::eraser::{eraser_of, Aopc, Erasable, Eraser};
use crate::faithfulness::Importance;
use crate::methods::{Methods, Mixing};
use crate::relevance::{AttentionGraph, Progress, Relevance};
use crate::report::{Prediction, Report, Target};

/// ERASER of attention's last-layer rollout and flow (where computed), of every other
/// method's, and of every importance score's ranking.
pub(super) fn eraser_of_every_map(
    input: &Erasable,
    relevance: &Relevance,
    methods: Option<&Methods>,
    importance: &Importance,
) -> Result<(BTreeMap<String, Eraser>, BTreeMap<String, Aopc>)> {
    let last = |maps: &'_ [Vec<f64>]| -> Vec<f64> { maps.last().cloned().unwrap_or_default() };
    let last_of = |maps: &'_ Option<Vec<Vec<f64>>>| maps.as_deref().map(last);
    let mut named = vec![(
        Mixing::ATTENTION.name().to_string(),
        last(&relevance.rollout),
        last_of(&relevance.flow),
    )];
    for (name, maps) in methods.into_iter().flatten() {
        if name != Mixing::ATTENTION.name() {
            named.push((name.clone(), last(&maps.rollout), last_of(&maps.flow)));
        }
    }
    eraser_of(input, named, importance)
}

/// Explains an attention stack saved by another framework: the same maps, no prediction.
/// `tokens` label the positions (default: their indices); the target is `options.target`
/// or the one `[MASK]` among the tokens.
pub fn explain_attention(
    name: &str,
    stack: &AttentionStack,
    tokens: Option<Vec<String>>,
    options: &ExplainOptions,
) -> Result<Report> {
    let n = stack.len();
    let tokens = match tokens {
        Some(tokens) if tokens.len() != n => {
            return Err(Error::TokenCount {
                given: tokens.len(),
                expected: n,
            })
        }
        Some(tokens) => tokens,
        None => (0..n).map(|i| i.to_string()).collect(),
    };
    let target = attention_target(&tokens, options.target)?;
    let device = stack.tensor().device().clone();
    let source = Source {
        model: name,
        device: &device,
        tokens,
        layers: stack.layers(),
        heads: stack.heads(),
    };
    let graph = AttentionGraph::new(stack, options.relevance)?;
    assemble(source, &graph, target, None, options)
}

/// The position [`explain_attention`] explains: `target` if it is in range, else the one
/// `[MASK]` among `tokens`.
pub fn attention_target(tokens: &[String], target: Option<usize>) -> Result<usize> {
    resolve_target(tokens, target, |i| tokens[i] == "[MASK]")?.ok_or(Error::NoTargetForAttention)
}

/// Where the attention came from, for the report.
pub(super) struct Source<'a> {
    pub(super) model: &'a str,
    pub(super) device: &'a Device,
    pub(super) tokens: Vec<String>,
    pub(super) layers: usize,
    pub(super) heads: usize,
}

pub(super) fn assemble(
    source: Source,
    graph: &AttentionGraph,
    target: usize,
    prediction: Option<Prediction>,
    options: &ExplainOptions,
) -> Result<Report> {
    let progress = Progress::of(options.progress.as_ref());
    let flow = options.flow.wanted(graph.len());
    let relevance = graph.relevance_with(target, flow, progress)?;
    if (relevance.named())
        .flat_map(|(_, rows)| rows.iter().flatten())
        .any(|v| !v.is_finite())
    {
        return Err(Error::NotFinite {
            what: "a relevance map".into(),
        });
    }
    let all_positions = match options.all_positions {
        true => Some(graph.all_positions(flow, progress)?),
        false => None,
    };
    Ok(Report {
        model: source.model.to_string(),
        device: device_name(source.device).to_string(),
        target: Target {
            index: target,
            token: source.tokens[target].clone(),
        },
        tokens: source.tokens,
        prediction,
        family: None,
        task: None,
        special: None,
        layers: source.layers,
        heads: source.heads,
        relevance,
        all_positions,
        importance: None,
        evaluation: None,
        methods: None,
        image: None,
        picture: None,
    })
}

/// The explicit target if it is in range; else the one position where `is_mask` holds;
/// `None` when no position does.
pub(super) fn resolve_target(
    tokens: &[String],
    target: Option<usize>,
    is_mask: impl Fn(usize) -> bool,
) -> Result<Option<usize>> {
    let len = tokens.len();
    if let Some(target) = target {
        return if target < len {
            Ok(Some(target))
        } else {
            Err(Error::TargetOutOfRange {
                target,
                len,
                last: len.saturating_sub(1),
                tokens: listing(tokens),
            })
        };
    }
    let masks: Vec<usize> = (0..len).filter(|&i| is_mask(i)).collect();
    match masks.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        several => Err(Error::SeveralMasks {
            count: several.len(),
            positions: format!("{several:?}"),
        }),
    }
}

/// `0:[CLS] 1:the …`, for error messages.
pub(super) fn listing(tokens: &[String]) -> String {
    let items: Vec<String> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}:{t}"))
        .collect();
    items.join(" ")
}
