//! Many sentences through one loaded model: JSON lines in, one report (or error record) per
//! line out, and the dataset-level summary of `--evaluate`.

use std::io::{BufRead, Write};

use serde::Deserialize;

use crate::error::Result;
use crate::evaluate::Summary;
use crate::explain::{EvaluateOptions, ExplainOptions, Explainer};
use crate::input::{Line, Lines, LINE_LIMIT};

/// One input line: `{"text": "...", "target": 7, "candidates": ["is", "are"],
/// "expected": "are"}`, or for a classifier `{"text": "...", "pair": "...", "label":
/// "positive"}`; all but text are optional and default to the command line's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub text: String,
    #[serde(default)]
    pub target: Option<usize>,
    #[serde(default)]
    pub candidates: Option<Vec<String>>,
    /// The second text of a pair.
    #[serde(default)]
    pub pair: Option<String>,
    /// With `--evaluate`: the label (name or id) whose probability is explained.
    #[serde(default)]
    pub label: Option<String>,
    /// The right answer, which datasets may record; not used by the explainer.
    #[serde(default)]
    pub expected: Option<String>,
}

impl Example {
    /// One line of a batch file, or what is wrong with it.
    pub fn parse(line: &Line) -> std::result::Result<Self, String> {
        match line {
            Line::Text(text) => serde_json::from_str(text).map_err(|e| {
                format!("not a JSON object with \"text\" (and optional \"target\", \"candidates\", \"pair\", \"label\"): {e}")
            }),
            Line::TooLong => Err(format!(
                "the line is longer than {LINE_LIMIT} bytes, more than any model's positions can hold; it was skipped"
            )),
            Line::NotUtf8 => Err("the line is not UTF-8 text; save the file as UTF-8".into()),
        }
    }
}

/// What a batch run did.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub examples: usize,
    pub failed: usize,
    /// Correlations over the examples that succeeded, with `--evaluate`.
    pub summary: Summary,
}

/// The lines of a batch file that hold something (blank lines are skipped), each at most
/// [`LINE_LIMIT`] bytes in memory.
pub fn examples(input: impl BufRead) -> impl Iterator<Item = std::io::Result<(usize, Line)>> {
    Lines::new(input, LINE_LIMIT).filter(|line| !matches!(line, Ok((_, line)) if is_blank(line)))
}

/// A blank line, which batch mode skips (it still counts for the line numbers).
pub fn is_blank(line: &Line) -> bool {
    matches!(line, Line::Text(text) if text.trim().is_empty())
}

/// What batch mode writes for one input line.
#[derive(Debug)]
pub enum Record {
    Report(Box<crate::Report>),
    /// The line (numbered from 1) could not be explained; the others still run.
    Error {
        line: usize,
        message: String,
    },
}

impl Record {
    /// The output line, without its newline: the report's JSON, or `{"line": N, "error": "..."}`.
    pub fn to_json(&self) -> serde_json::Result<String> {
        match self {
            Record::Report(report) => serde_json::to_string(report),
            Record::Error { line, message } => {
                Ok(serde_json::json!({"line": line, "error": message}).to_string())
            }
        }
    }
}

/// Explains line `number` of a batch file: its fields (`text`, `target`, ...) over
/// `options`, as batch mode does for every line.
pub fn explain_record(
    explainer: &Explainer,
    number: usize,
    line: &Line,
    options: &ExplainOptions,
) -> Record {
    match explain_line(explainer, line, options) {
        Ok(report) => Record::Report(Box::new(report)),
        Err(message) => Record::Error {
            line: number,
            message,
        },
    }
}

/// Explains every non-blank line of `input`, writing one JSON line per input line to
/// `output`: the report, or `{"line": N, "error": "..."}` for a line that cannot be
/// explained (the others still run). `progress(done)` is called after each line. Memory
/// stays bounded whatever the input: lines are read one at a time, each capped.
pub fn run_batch(
    explainer: &Explainer,
    input: impl BufRead,
    output: &mut dyn Write,
    options: &ExplainOptions,
    mut progress: impl FnMut(usize),
) -> Result<BatchOutcome> {
    let mut outcome = BatchOutcome::default();
    for line in examples(input) {
        let (number, line) = line?;
        outcome.examples += 1;
        let record = explain_record(explainer, number, &line, options);
        match &record {
            Record::Report(report) => {
                if let Some(evaluation) = &report.evaluation {
                    outcome.summary.add(evaluation);
                }
            }
            Record::Error { .. } => outcome.failed += 1,
        }
        let json = record.to_json().map_err(std::io::Error::from)?;
        writeln!(output, "{json}")?;
        progress(outcome.examples);
    }
    output.flush()?;
    Ok(outcome)
}

fn explain_line(
    explainer: &Explainer,
    line: &Line,
    options: &ExplainOptions,
) -> std::result::Result<crate::Report, String> {
    let example = Example::parse(line)?;
    let evaluate = match (&options.evaluate, example.label) {
        (None, Some(_)) => {
            return Err("\"label\" chooses what --evaluate explains; run with --evaluate".into())
        }
        (Some(evaluate), label) => Some(EvaluateOptions {
            label: label.or_else(|| evaluate.label.clone()),
            ..evaluate.clone()
        }),
        (None, None) => None,
    };
    let options = ExplainOptions {
        target: example.target.or(options.target),
        pair: example.pair.or_else(|| options.pair.clone()),
        evaluate,
        candidates: example.candidates.or_else(|| options.candidates.clone()),
        ..options.clone()
    };
    explainer
        .explain(&example.text, &options)
        .map_err(|e| e.to_string())
}
