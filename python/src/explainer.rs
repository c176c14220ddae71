//! A loaded checkpoint for Python: texts (or a causal model's prompts, or images) in, the
//! command line's JSON reports out; batch mode's records one line at a time (for Ray), and
//! its evaluation summary.

use std::io::Cursor;
use std::path::PathBuf;

use bert_explain::batch::{explain_records, is_blank, Batch};
use bert_explain::causal::{CausalExplainer, CausalOptions};
use bert_explain::cli::{
    output_files, refuse_for_task, view, write_outputs, CAUSAL_OPTIONS, ENCODER_OPTIONS,
};
use bert_explain::explain::Input;
use bert_explain::faithfulness::correlations::{Evaluation, Summary};
use bert_explain::image::{decode_keyed, read_keyed, Decoded, FILE_LIMIT};
use bert_explain::input::{Line, Lines, LINE_LIMIT};
use bert_explain::report::{Explained, Format, GeneratedView, OutputFile};
use bert_explain::{DeviceChoice, ExplainOptions, Loaded, ModelSource};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::arrays::json;
use crate::errors::{to_py, usage};
use crate::interrupt::interruptible;
use crate::options::{self, Options};

/// The outputs one text may have besides its report.
const OUTPUT_OPTIONS: &[&str] = &["hide_special", "figure", "html"];
/// The outputs one prompt may have besides its report.
const CAUSAL_OUTPUT_OPTIONS: &[&str] = &["figure", "html", "figure_token"];

/// A checkpoint loaded once (as batch mode loads it), explaining any number of texts.
#[pyclass(module = "bert_explain._native", frozen)]
pub struct Explainer {
    inner: Loaded,
    model: String,
}

impl Explainer {
    /// `options` parsed, with what this model's kind and task do not use refused: those of a
    /// batch line, and with `outputs` those of one text's files too.
    fn options(&self, options: Option<&Bound<'_, PyDict>>, outputs: bool) -> PyResult<Options> {
        let (encoder, causal) = (
            [ENCODER_OPTIONS, OUTPUT_OPTIONS],
            [CAUSAL_OPTIONS, CAUSAL_OUTPUT_OPTIONS],
        );
        let (ours, theirs) = match &self.inner {
            Loaded::Encoder(_) => (encoder, causal),
            Loaded::Causal(_) => (causal, encoder),
        };
        let mut allowed: Vec<&str> = match outputs {
            true => ours.concat(),
            false => ours[0].to_vec(),
        };
        // How many texts share a forward pass (--batch-size).
        allowed.push("batch_size");
        // The other kind's options get the command line's message for them.
        for (key, value) in options.iter().flat_map(|dict| dict.iter()) {
            let key: String = key.extract()?;
            let other_kind =
                theirs.concat().contains(&key.as_str()) && !ours.concat().contains(&key.as_str());
            if other_kind && !value.is_none() {
                // Named as the command line names it, as refuse_for_task names its options.
                let option = format!("--{}", key.replace('_', "-"));
                let model = self.model.clone();
                return Err(to_py(match &self.inner {
                    Loaded::Encoder(_) => {
                        bert_explain::Error::CausalOptionForBert { option, model }
                    }
                    Loaded::Causal(_) => bert_explain::Error::BertOptionForCausal { option, model },
                }));
            }
        }
        let py_options = options;
        let mut options = options::parse(options, &allowed)?;
        let Loaded::Encoder(inner) = &self.inner else {
            return Ok(options);
        };
        let given = |id: &str| options.given.iter().any(|g| g == id);
        refuse_for_task(given, inner.task(), &self.model).map_err(to_py)?;
        // mixing="all": what applies to this model, a warning for each method left out.
        if let (true, Some(list), Some(dict)) =
            (options.mixing_all, &options.explain.mixing, py_options)
        {
            let (kept, notes) = inner.applicable(list);
            for note in notes {
                let warning = dict.py().get_type::<pyo3::exceptions::PyUserWarning>();
                PyErr::warn(dict.py(), &warning, &std::ffi::CString::new(note)?, 1)?;
            }
            options.explain.mixing = Some(kept);
        }
        Ok(options)
    }
}

#[pymethods]
impl Explainer {
    /// Loads `model` (a checkpoint folder or a Hub id) onto `device` (auto, cpu, cuda or
    /// metal).
    #[new]
    #[pyo3(signature = (model, device = "cpu", revision = "main"))]
    fn new(py: Python<'_>, model: &str, device: &str, revision: &str) -> PyResult<Self> {
        let choice = match device {
            "auto" => DeviceChoice::Auto,
            "cpu" => DeviceChoice::Cpu,
            "cuda" => DeviceChoice::Cuda,
            "metal" => DeviceChoice::Metal,
            other => {
                return Err(usage(format!(
                    "device={other:?} is not a device; choose auto, cpu, cuda or metal"
                )))
            }
        };
        let source = ModelSource::parse(model, revision);
        let inner = py
            .detach(|| Loaded::load(&source, &bert_explain::device(choice)?))
            .map_err(to_py)?;
        Ok(Self {
            inner,
            model: source.to_string(),
        })
    }

    /// The model as the reports name it.
    #[getter]
    fn model(&self) -> &str {
        &self.model
    }

    /// `masked-lm`, `sequence-classification`, `replaced-token-detection`, `encoder` or
    /// `causal-lm`.
    #[getter]
    fn task(&self) -> &'static str {
        self.inner.task_name()
    }

    /// The model family (`bert`, `roberta`, ..., `gpt2`, `llama`, ...).
    #[getter]
    fn family(&self) -> &'static str {
        self.inner.family()
    }

    /// The JSON report of each text (a causal model's prompt), as `bert-explain --json`
    /// prints it; the first text that fails raises. Figures and the page take one text.
    #[pyo3(signature = (texts, options = None))]
    fn explain(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<String>> {
        let options = self.options(options, true)?;
        one_drawn(texts.len(), &options, "text")?;
        match &self.inner {
            Loaded::Encoder(inner) => {
                let inputs: Vec<Input> = texts.iter().map(|t| Input::Text(t)).collect();
                explain_inputs(py, inner, &inputs, &options)
            }
            Loaded::Causal(inner) => explain_prompts(py, inner, &texts, &options),
        }
    }

    /// The JSON report of each image (a path, or a file's bytes), for a model that reads
    /// images, as `bert-explain --json` prints it; the first image that fails raises.
    /// Figures and the page take one image.
    #[pyo3(signature = (images, options = None))]
    fn explain_images(
        &self,
        py: Python<'_>,
        images: Vec<Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<String>> {
        let options = self.options(options, true)?;
        one_drawn(images.len(), &options, "image")?;
        let inner = match &self.inner {
            Loaded::Encoder(inner) if inner.reads_images() => inner,
            _ => {
                return Err(usage(format!(
                    "{} reads texts, not images; give it texts with explain()",
                    self.model
                )))
            }
        };
        let decoded = images
            .iter()
            .map(|image| match image.cast::<PyBytes>() {
                Ok(bytes) => decode_bytes(bytes.as_bytes()),
                Err(_) => read_keyed(&image.extract::<PathBuf>()?).map_err(to_py),
            })
            .collect::<PyResult<Vec<Decoded>>>()?;
        let inputs: Vec<Input> = decoded.iter().map(Input::Image).collect();
        explain_inputs(py, inner, &inputs, &options)
    }

    /// Batch mode's output line for each `(line number, line)` of a batch file (the line as
    /// bytes or text, without its newline): the report, or `{"line": N, "error": ...}`;
    /// `None` for a blank line, which batch mode skips.
    #[pyo3(signature = (lines, options = None))]
    fn batch_records(
        &self,
        py: Python<'_>,
        lines: Vec<(usize, Bound<'_, PyAny>)>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<Option<String>>> {
        let options = self.options(options, false)?;
        let lines: Vec<(usize, Vec<u8>)> = lines
            .into_iter()
            .map(|(number, line)| {
                let bytes = match line.cast::<PyBytes>() {
                    Ok(bytes) => bytes.as_bytes().to_vec(),
                    Err(_) => line.extract::<String>()?.into_bytes(),
                };
                Ok((number, bytes))
            })
            .collect::<PyResult<_>>()?;
        interruptible(py, |watch| {
            // Batch mode's bar counts lines, not flows: a line's flow draws none here.
            let explain = options::watched(&options.explain, &watch.quiet());
            let causal;
            let batch = match &self.inner {
                Loaded::Encoder(inner) => Batch::Encoder(inner, &explain, options.grouping),
                Loaded::Causal(inner) => {
                    causal = options.causal.options(&explain);
                    Batch::Causal(inner, &causal, options.grouping)
                }
            };
            let mut records = vec![None; lines.len()];
            // Read as batch mode reads its file: a BOM and a "\r" ending dropped, the length
            // capped, bytes that are not UTF-8 an error record; blank lines skipped.
            let mut read = Vec::with_capacity(lines.len());
            for (k, (number, bytes)) in lines.iter().enumerate() {
                if let Some(line) = Lines::new(Cursor::new(bytes), LINE_LIMIT).next() {
                    let line = line?.1;
                    if !is_blank(&line) {
                        read.push((k, (*number, line)));
                    }
                }
            }
            // As many lines at a time as batch mode reads before its forward passes.
            for chunk in read.chunks(batch.window()) {
                watch.check()?;
                let (at, chunk): (Vec<usize>, Vec<(usize, Line)>) = chunk.iter().cloned().unzip();
                for (k, record) in at.into_iter().zip(explain_records(batch, &chunk)) {
                    records[k] = Some(record.to_json()?);
                }
            }
            Ok(records)
        })
    }
}

/// An error where figures or a page are asked of other than one input (`what`: text or image).
fn one_drawn(inputs: usize, options: &Options, what: &str) -> PyResult<()> {
    match inputs != 1 && (!options.figures.is_empty() || options.html.is_some()) {
        true => Err(usage(format!(
            "figure and html draw one {what}; explain the {what}s one at a time to draw them"
        ))),
        false => Ok(()),
    }
}

/// An image file's bytes decoded, bounded as a file on disk is.
fn decode_bytes(bytes: &[u8]) -> PyResult<Decoded> {
    if bytes.len() as u64 > FILE_LIMIT {
        return Err(usage(format!(
            "the image is {} bytes, over the {FILE_LIMIT} an image file may have",
            bytes.len()
        )));
    }
    decode_keyed(bytes).map_err(to_py)
}

/// The report of each text (or image), and the figure and page of the one there may be.
fn explain_inputs(
    py: Python<'_>,
    inner: &bert_explain::Explainer,
    inputs: &[Input],
    options: &Options,
) -> PyResult<Vec<String>> {
    interruptible(py, |watch| {
        let mut files = Some(first_files(options)?);
        let explain = options::watched(&options.explain, watch.progress());
        let mut reports = Vec::with_capacity(inputs.len());
        // The forward passes of a group of inputs at a time (batch_size), each report then
        // finished in turn.
        for chunk in inputs.chunks(options.grouping.size) {
            watch.check()?;
            let given: Vec<(Input, &ExplainOptions)> =
                chunk.iter().map(|&input| (input, &explain)).collect();
            for forwarded in inner.forward_many(&given, &options.grouping) {
                watch.check()?;
                let report = inner.finish(forwarded?, &explain)?;
                let shown = view(report, options.hide_special);
                write_outputs(files.take().unwrap_or_default(), &shown, |_| {})?;
                reports.push(json(&shown)?);
            }
        }
        Ok(reports)
    })
}

/// The figure and page files the options name, for the first text: created before any
/// model runs.
fn first_files(options: &Options) -> anyhow::Result<Vec<(OutputFile, Format)>> {
    output_files(&options.figures, options.html.as_deref(), &[])
}

/// The causal report of each prompt, and the figure and page of the one prompt there may be.
fn explain_prompts(
    py: Python<'_>,
    inner: &CausalExplainer,
    prompts: &[String],
    options: &Options,
) -> PyResult<Vec<String>> {
    let causal = options.causal.options(&options.explain);
    let token = options.causal.figure_token;
    if token.is_some() && options.figures.is_empty() && options.html.is_none() {
        return Err(usage(
            "figure_token chooses the map of figure or html; pass one of those",
        ));
    }
    if let Some(token) = token.filter(|&k| k >= causal.generate) {
        let generate = causal.generate;
        return Err(to_py(bert_explain::Error::FigureTokenOutOfRange {
            token,
            generate,
        }));
    }
    interruptible(py, |watch| {
        let mut files = Some(first_files(options)?);
        let watched = CausalOptions {
            progress: Some(watch.progress().clone()),
            ..causal.clone()
        };
        let mut reports = Vec::with_capacity(prompts.len());
        // A group of prompts generated at a time (batch_size), each report then finished in
        // turn.
        for chunk in prompts.chunks(options.grouping.size) {
            watch.check()?;
            let given: Vec<(&str, &CausalOptions)> = chunk
                .iter()
                .map(|prompt| (prompt.as_str(), &watched))
                .collect();
            for generated in inner.generate_many(&given, &options.grouping) {
                watch.check()?;
                let report = inner.finish(generated?, &watched)?;
                let shown = Explained::from(GeneratedView::new(report, token)?);
                write_outputs(files.take().unwrap_or_default(), &shown, |_| {})?;
                reports.push(json(&shown)?);
            }
        }
        Ok(reports)
    })
}

/// Batch mode's `--evaluate` summary over its output lines (reports and error records):
/// the table's text, the number of lines and the number that failed.
#[pyfunction]
pub fn evaluation_summary(
    py: Python<'_>,
    records: Vec<String>,
) -> PyResult<(String, usize, usize)> {
    py.detach(|| -> anyhow::Result<(String, usize, usize)> {
        let mut summary = Summary::default();
        let mut failed = 0;
        for record in &records {
            let value: serde_json::Value = serde_json::from_str(record)?;
            if value.get("error").is_some() {
                failed += 1;
            } else if let Some(evaluation) = value.get("evaluation") {
                summary.add(&serde_json::from_value::<Evaluation>(evaluation.clone())?);
            }
        }
        Ok((summary.to_string(), records.len(), failed))
    })
    .map_err(to_py)
}
