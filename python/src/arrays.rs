//! Attention arrays in, maps out: the checks and the maps of `--attention`.

use bert_explain::attention::checked_attention;
use bert_explain::cli::{output_files, view, write_outputs};
use bert_explain::explain::{attention_target, explain_attention as explain_stack};
use bert_explain::relevance::AttentionGraph;
use bert_explain::report::{Explained, Format, GeneratedView};
use bert_explain::{AttentionStack, Error, Json, Renderer};
use candle_core::{DType, Device, Tensor};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{to_py, usage};
use crate::interrupt::interruptible;
use crate::options;

/// The stack in `data` (native-endian f64, row-major, `shape`), whose values were stored as
/// `precision` (NumPy's name of the caller's dtype), checked as an attention file is.
fn stack(data: &[u8], shape: Vec<usize>, precision: &str) -> bert_explain::Result<AttentionStack> {
    let precision = match precision {
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "float32" => DType::F32,
        "float64" => DType::F64,
        other => {
            return Err(Error::Attention(format!(
                "it holds {other} values; attention probabilities are floating point"
            )))
        }
    };
    let values: Vec<f64> = data
        .chunks_exact(8)
        .map(|bytes| f64::from_ne_bytes(bytes.try_into().expect("chunks of 8 bytes")))
        .collect();
    if values.len() != shape.iter().product::<usize>() || !data.len().is_multiple_of(8) {
        return Err(Error::Attention(format!(
            "{} bytes do not hold the f64 values of shape {shape:?}",
            data.len()
        )));
    }
    let tensor = Tensor::from_vec(values, shape, &Device::Cpu)?;
    checked_attention(tensor, precision, &Device::Cpu)
}

/// Positions as labels: `0 1 2 …`, as `--attention` labels them without `--tokens`.
fn positions(n: usize) -> Vec<String> {
    (0..n).map(|i| i.to_string()).collect()
}

fn row_major(rows: impl IntoIterator<Item = Vec<f64>>) -> Vec<f64> {
    rows.into_iter().flatten().collect()
}

/// One map (`raw`, `rollout` or `flow`) for `target`, `[L, n]`, or with `which` =
/// `all_positions` rollout, flow and raw attention from every position, `[3, L, n, n]`.
/// Returns the f64 values' bytes and the shape.
#[pyfunction]
#[pyo3(signature = (data, shape, precision, which, target = None, options = None))]
pub fn attention_maps<'py>(
    py: Python<'py>,
    data: &[u8],
    shape: Vec<usize>,
    precision: &str,
    which: &str,
    target: Option<usize>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyBytes>, Vec<usize>)> {
    let relevance = options::parse(options, &["fusion", "residual"])?
        .explain
        .relevance;
    let (values, shape) = interruptible(py, |watch| {
        let stack = stack(data, shape, precision)?;
        let (layers, n) = (stack.layers(), stack.len());
        let graph = AttentionGraph::new(&stack, relevance)?;
        let at = || attention_target(&positions(n), target);
        let progress = &*watch.progress().0;
        Ok(match which {
            "raw" => (row_major(graph.raw(at()?)?), vec![layers, n]),
            "rollout" => (row_major(graph.rollout(at()?)?), vec![layers, n]),
            "flow" => (
                row_major(graph.flow_with(at()?, progress)?),
                vec![layers, n],
            ),
            _ => {
                let all = graph.all_positions(true, progress)?;
                let flow = all.flow.unwrap_or_default();
                let maps = [all.rollout, flow, all.raw].into_iter().flatten();
                (row_major(maps.flatten()), vec![3, layers, n, n])
            }
        })
    })?;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    Ok((PyBytes::new(py, &bytes), shape))
}

/// What `bert-explain --attention FILE --json` prints for the stack in `data`, with the
/// figures and page written as `--figure` and `--html` write them; `name` stands for the
/// file's name in the report's `model`.
#[pyfunction]
#[pyo3(signature = (data, shape, precision, name, options = None))]
pub fn explain_attention(
    py: Python<'_>,
    data: &[u8],
    shape: Vec<usize>,
    precision: &str,
    name: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let allowed = [
        "tokens",
        "target",
        "fusion",
        "residual",
        "all_positions",
        "flow",
        "no_flow",
        "hide_special",
        "figure",
        "html",
    ];
    let options = options::parse(options, &allowed)?;
    interruptible(py, |watch| {
        let files = output_files(&options.figures, options.html.as_deref(), &[])?;
        let stack = stack(data, shape, precision)?;
        let explain = options::watched(&options.explain, watch.progress());
        let report = explain_stack(name, &stack, options.tokens.clone(), &explain)?;
        let shown = view(report, options.hide_special);
        write_outputs(files, &shown, |_| {})?;
        json(&shown)
    })
}

/// The report as `--json` prints it.
pub fn json(shown: &Explained) -> anyhow::Result<String> {
    let mut out = Vec::new();
    Json.render(shown, &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// A report's figure (`svg`, `png`) or page (`html`) from its JSON, as `--figure` and
/// `--html` draw them; a causal report's for its generated token `token` (default the last).
#[pyfunction]
#[pyo3(signature = (report, format, token = None))]
pub fn render(
    py: Python<'_>,
    report: &str,
    format: &str,
    token: Option<usize>,
) -> PyResult<Vec<u8>> {
    let format = match format {
        "svg" => Format::Svg,
        "png" => Format::Png,
        "html" => Format::Html,
        other => {
            return Err(usage(format!(
                "format={other:?} is not a format; choose svg, png or html"
            )))
        }
    };
    py.detach(|| -> anyhow::Result<Vec<u8>> {
        let shown = match (Explained::from_json(report)?, token) {
            (Explained::Generated(generated), Some(_)) => {
                Explained::from(GeneratedView::new(generated.report, token)?)
            }
            (shown, _) => shown,
        };
        let mut bytes = Vec::new();
        format.renderer().render(&shown, &mut bytes)?;
        Ok(bytes)
    })
    .map_err(to_py)
}
