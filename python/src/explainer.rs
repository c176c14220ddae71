//! A loaded checkpoint for Python: texts in, the command line's JSON reports out; batch
//! mode's records one line at a time (for Ray), and its evaluation summary.

use std::io::Cursor;

use bert_explain::batch::{explain_record, is_blank};
use bert_explain::cli::{output_files, refuse_for_task, write_outputs};
use bert_explain::evaluate::{Evaluation, Summary};
use bert_explain::input::{Lines, LINE_LIMIT};
use bert_explain::report::View;
use bert_explain::{DeviceChoice, ModelSource};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::arrays::json;
use crate::errors::{to_py, usage};
use crate::options::{self, Options};

/// The options of a batch line: every option of a text but the outputs.
const LINE_OPTIONS: &[&str] = &[
    "target",
    "pair",
    "pretokenized",
    "candidates",
    "top_k",
    "all_positions",
    "mixing",
    "fusion",
    "residual",
    "evaluate",
    "importance_word",
    "label",
    "blank",
    "correlate_without_specials",
    "ig_steps",
];
/// The outputs one text may have besides its report.
const OUTPUT_OPTIONS: &[&str] = &["hide_special", "figure", "html"];

/// A checkpoint loaded once (as batch mode loads it), explaining any number of texts.
#[pyclass(module = "bert_explain._native", frozen)]
pub struct Explainer {
    inner: bert_explain::Explainer,
    model: String,
}

impl Explainer {
    /// `options` parsed, with what this model's task does not use refused.
    fn options(&self, options: Option<&Bound<'_, PyDict>>, allowed: &[&str]) -> PyResult<Options> {
        let py_options = options;
        let mut options = options::parse(options, allowed)?;
        let given = |id: &str| options.given.iter().any(|g| g == id);
        refuse_for_task(given, self.inner.task(), &self.model).map_err(to_py)?;
        // mixing="all": what applies to this model, a warning for each method left out.
        if let (true, Some(list), Some(dict)) =
            (options.mixing_all, &options.explain.mixing, py_options)
        {
            let (kept, notes) = self.inner.applicable(list);
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
            .detach(|| -> bert_explain::Result<bert_explain::Explainer> {
                bert_explain::Explainer::load(&source, &bert_explain::device(choice)?)
            })
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

    /// `masked-lm`, `sequence-classification`, `replaced-token-detection` or `encoder`.
    #[getter]
    fn task(&self) -> &'static str {
        self.inner.task().name()
    }

    /// The model family (`bert`, `roberta`, ...).
    #[getter]
    fn family(&self) -> &'static str {
        self.inner.family()
    }

    /// The JSON report of each text, as `bert-explain --json` prints it; the first text
    /// that fails raises. Figures and the page take one text.
    #[pyo3(signature = (texts, options = None))]
    fn explain(
        &self,
        py: Python<'_>,
        texts: Vec<String>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<String>> {
        let allowed: Vec<&str> = LINE_OPTIONS.iter().chain(OUTPUT_OPTIONS).copied().collect();
        let options = self.options(options, &allowed)?;
        if texts.len() != 1 && (!options.figures.is_empty() || options.html.is_some()) {
            return Err(usage(
                "figure and html draw one text; explain the texts one at a time to draw them",
            ));
        }
        py.detach(|| -> anyhow::Result<Vec<String>> {
            let mut files = Some(output_files(
                &options.figures,
                options.html.as_deref(),
                &[],
            )?);
            texts
                .iter()
                .map(|text| {
                    let report = self.inner.explain(text, &options.explain)?;
                    let view = match options.hide_special {
                        true => View::hide_special(report),
                        false => View::full(report),
                    };
                    write_outputs(files.take().unwrap_or_default(), &view, |_| {})?;
                    json(&view)
                })
                .collect()
        })
        .map_err(to_py)
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
        let options = self.options(options, LINE_OPTIONS)?;
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
        py.detach(|| -> anyhow::Result<Vec<Option<String>>> {
            let mut records = Vec::with_capacity(lines.len());
            for (number, bytes) in &lines {
                // Read as batch mode reads its file: a BOM and a "\r" ending dropped, the
                // length capped, bytes that are not UTF-8 an error record.
                let line = match Lines::new(Cursor::new(bytes), LINE_LIMIT).next() {
                    Some(line) => line?.1,
                    None => {
                        records.push(None);
                        continue;
                    }
                };
                if is_blank(&line) {
                    records.push(None);
                    continue;
                }
                let record = explain_record(&self.inner, *number, &line, &options.explain);
                records.push(Some(record.to_json()?));
            }
            Ok(records)
        })
        .map_err(to_py)
    }
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
