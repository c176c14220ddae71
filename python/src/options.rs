//! Keyword arguments → the library's options. The keywords are the command line's option
//! names (`top_k` for `--top-k`), with its defaults; the Python half passes only those the
//! caller gave, so that options a model's task does not use are refused as the command
//! line refuses them.

use std::path::PathBuf;

use bert_explain::cli::CausalArgs;
use bert_explain::explain::{EvaluateOptions, Grouping, DEFAULT_IG_STEPS, MAX_IG_STEPS};
use bert_explain::faithfulness::Blank;
use bert_explain::methods::Mixing;
use bert_explain::relevance::{FlowChoice, Progress};
use bert_explain::report::Format;
use bert_explain::{ExplainOptions, HeadFusion, RelevanceOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{to_py, usage};

/// Everything a call asked for.
pub struct Options {
    pub explain: ExplainOptions,
    /// The keywords given, for `refuse_for_task`.
    pub given: Vec<String>,
    pub hide_special: bool,
    pub figures: Vec<PathBuf>,
    pub html: Option<PathBuf>,
    /// `explain_attention`: one label per position.
    pub tokens: Option<Vec<String>>,
    /// `mixing` names `all`: the methods that apply to the model, the others left out.
    pub mixing_all: bool,
    /// A causal model's choices (`generate`, `sample`, `seed`, ...), as the command line's.
    pub causal: CausalArgs,
    /// `batch_size`: how texts share forward passes (a causal model's: generation).
    pub grouping: Grouping,
}

/// Reads `options` (keyword → value; `None` values count as not given), refusing any
/// keyword outside `allowed`.
pub fn parse(options: Option<&Bound<'_, PyDict>>, allowed: &[&str]) -> PyResult<Options> {
    let mut given = Vec::new();
    if let Some(dict) = options {
        for (key, value) in dict.iter() {
            let key: String = key.extract()?;
            if !allowed.contains(&key.as_str()) {
                return Err(usage(format!(
                    "{key} is not an option here; the options are {}",
                    allowed.join(", ")
                )));
            }
            if !value.is_none() {
                given.push(key);
            }
        }
    }
    let get = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        match options {
            Some(dict) => Ok(dict.get_item(key)?.filter(|v| !v.is_none())),
            None => Ok(None),
        }
    };
    let string = |key: &str| -> PyResult<Option<String>> {
        get(key)?.map(|v| v.extract::<String>()).transpose()
    };
    let flag = |key: &str| -> PyResult<bool> {
        Ok(get(key)?
            .map(|v| v.extract::<bool>())
            .transpose()?
            .unwrap_or(false))
    };
    let strings = |key: &str| -> PyResult<Option<Vec<String>>> {
        get(key)?.map(|v| v.extract::<Vec<String>>()).transpose()
    };

    let fusion = match string("fusion")?.as_deref() {
        None | Some("mean") => HeadFusion::Mean,
        Some("max") => HeadFusion::Max,
        Some("min") => HeadFusion::Min,
        Some(other) => {
            return Err(usage(format!(
                "fusion={other:?} is not a head fusion; choose mean, max or min"
            )))
        }
    };
    let residual = get("residual")?
        .map(|v| v.extract::<f64>())
        .transpose()?
        .unwrap_or(0.5);
    if !(0.0..=1.0).contains(&residual) {
        return Err(usage(format!(
            "residual={residual} is not a number between 0 and 1"
        )));
    }
    let discard_ratio = get("discard_ratio")?
        .map(|v| v.extract::<f64>())
        .transpose()?
        .unwrap_or(0.0);
    if !(0.0..1.0).contains(&discard_ratio) {
        return Err(usage(format!(
            "discard_ratio={discard_ratio} is not a fraction from 0 up to (not including) 1"
        )));
    }
    let (evaluate, lrp) = (flag("evaluate")?, flag("lrp")?);
    for needs in ["importance_word", "label", "correlate_without_specials"] {
        if !evaluate && !lrp && given.iter().any(|g| g == needs) {
            return Err(usage(format!(
                "{needs} chooses what evaluate and lrp score; pass evaluate=True or lrp=True with it"
            )));
        }
    }
    for needs in ["blank", "ig_steps"] {
        if !evaluate && given.iter().any(|g| g == needs) {
            return Err(usage(format!(
                "{needs} chooses what evaluate scores; pass evaluate=True with it"
            )));
        }
    }
    let batch_size = match get("batch_size")? {
        Some(v) => match v.extract::<usize>() {
            Ok(n) if (1..=Grouping::MAX_SIZE).contains(&n) => n,
            _ => {
                return Err(usage(format!(
                    "batch_size must be a whole number from 1 to {}",
                    Grouping::MAX_SIZE
                )))
            }
        },
        None => Grouping::DEFAULT_SIZE,
    };
    let ig_steps = match get("ig_steps")? {
        Some(v) => match v.extract::<usize>() {
            Ok(n) if (1..=MAX_IG_STEPS).contains(&n) => n,
            _ => {
                return Err(usage(format!(
                    "ig_steps must be a whole number from 1 to {MAX_IG_STEPS}"
                )))
            }
        },
        None => DEFAULT_IG_STEPS,
    };
    let blank = match string("blank")?.as_deref() {
        None | Some("unk") => Blank::Unk,
        Some("mask") => Blank::Mask,
        Some("pad") => Blank::Pad,
        Some(other) => {
            return Err(usage(format!(
                "blank={other:?} is not a blank-out token; choose unk, mask or pad"
            )))
        }
    };
    let figures: Vec<PathBuf> = strings("figure")?
        .unwrap_or_default()
        .into_iter()
        .map(PathBuf::from)
        .collect();
    for figure in &figures {
        Format::of_figure(figure).map_err(usage)?;
    }
    let html = string("html")?.map(PathBuf::from);
    if let Some(html) = &html {
        Format::of_html(html).map_err(usage)?;
    }
    // flow=True computes flow at any length, flow=False (or no_flow=True) never; neither
    // leaves it to the text's length, as the command line without --flow or --no-flow.
    let asked_flow = get("flow")?.map(|v| v.extract::<bool>()).transpose()?;
    let flow = match (asked_flow, flag("no_flow")?) {
        (Some(true), true) => {
            return Err(usage(
                "flow=True and no_flow=True contradict each other; pass one",
            ))
        }
        (Some(true), false) => FlowChoice::Always,
        (Some(false), _) | (None, true) => FlowChoice::Never,
        (None, false) => FlowChoice::Auto,
    };
    let explain = ExplainOptions {
        target: get("target")?.map(|v| v.extract::<usize>()).transpose()?,
        pair: string("pair")?,
        pretokenized: flag("pretokenized")?,
        candidates: strings("candidates")?,
        top_k: get("top_k")?
            .map(|v| v.extract::<usize>())
            .transpose()?
            .unwrap_or(ExplainOptions::default().top_k),
        relevance: RelevanceOptions {
            fusion,
            residual,
            discard_ratio,
        },
        all_positions: flag("all_positions")?,
        flow,
        // None for batch lines, as batch mode; for the rest, the bar and the stop for Ctrl-C
        // that interrupt.rs makes where the work runs.
        progress: None,
        mixing: string("mixing")?
            .map(|m| Mixing::parse_list(&m))
            .transpose()
            .map_err(to_py)?,
        evaluate: match evaluate || lrp {
            true => Some(EvaluateOptions {
                word: string("importance_word")?,
                label: string("label")?,
                blank,
                without_specials: flag("correlate_without_specials")?,
                ig_steps,
                only: (!evaluate).then_some("lrp"),
            }),
            false => None,
        },
    };
    let number = |key: &str| -> PyResult<Option<usize>> {
        get(key)?.map(|v| v.extract::<usize>()).transpose()
    };
    let sample = flag("sample")?;
    for needs in ["seed", "temperature"] {
        if !sample && given.iter().any(|g| g == needs) {
            return Err(usage(format!(
                "{needs} chooses how sample draws the tokens; pass sample=True with it"
            )));
        }
    }
    let temperature = get("temperature")?
        .map(|v| v.extract::<f64>())
        .transpose()?;
    if temperature.is_some_and(|t| !(t > 0.0 && t.is_finite())) {
        return Err(usage("temperature must be a positive number"));
    }
    let causal = CausalArgs {
        generate: number("generate")?,
        sample,
        seed: get("seed")?.map(|v| v.extract::<u64>()).transpose()?,
        temperature,
        top_prompt: number("top_prompt")?,
        correction: flag("correction")?,
        flow: flag("flow")?,
        skip_common: flag("skip_common")?,
        figure_token: number("figure_token")?,
    };
    Ok(Options {
        explain,
        given,
        causal,
        hide_special: flag("hide_special")?,
        figures,
        html,
        tokens: strings("tokens")?,
        mixing_all: string("mixing")?.is_some_and(|m| Mixing::names_all(&m)),
        grouping: Grouping::of(batch_size),
    })
}

/// `explain` with `progress` told how its flows advance.
pub fn watched(explain: &ExplainOptions, progress: &Progress) -> ExplainOptions {
    ExplainOptions {
        progress: Some(progress.clone()),
        ..explain.clone()
    }
}
