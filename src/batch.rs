//! Many sentences through one loaded model: JSON lines in, one report (or error record) per
//! line out, and the dataset-level summary of `--evaluate`.

use std::io::{BufRead, Write};

use serde::Deserialize;

use crate::error::Result;
use crate::evaluate::Summary;
use crate::explain::{ExplainOptions, Explainer};

/// One input line: `{"text": "...", "target": 7, "candidates": ["is", "are"],
/// "expected": "are"}`; all but text are optional; target and candidates default to the
/// command line's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Example {
    text: String,
    #[serde(default)]
    target: Option<usize>,
    #[serde(default)]
    candidates: Option<Vec<String>>,
    /// The right answer, which datasets may record; not used by the explainer.
    #[serde(default)]
    #[allow(dead_code)]
    expected: Option<String>,
}

/// What a batch run did.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub examples: usize,
    pub failed: usize,
    /// Correlations over the examples that succeeded, with `--evaluate`.
    pub summary: Summary,
}

/// Explains every non-blank line of `input`, writing one JSON line per input line to
/// `output`: the report, or `{"line": N, "error": "..."}` for a line that cannot be
/// explained (the others still run). `progress(done, total)` is called after each line.
pub fn run_batch(
    explainer: &Explainer,
    input: impl BufRead,
    output: &mut dyn Write,
    options: &ExplainOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<BatchOutcome> {
    let lines: Vec<(usize, String)> = input
        .lines()
        .enumerate()
        .map(|(i, line)| line.map(|l| (i + 1, l)))
        .collect::<std::io::Result<_>>()?;
    let lines: Vec<_> = lines
        .into_iter()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let mut outcome = BatchOutcome::default();
    for (done, (number, line)) in lines.iter().enumerate() {
        outcome.examples += 1;
        let record = match explain_line(explainer, line, options) {
            Ok(report) => {
                if let Some(evaluation) = &report.evaluation {
                    outcome.summary.add(evaluation);
                }
                serde_json::to_string(&report).map_err(std::io::Error::from)?
            }
            Err(message) => {
                outcome.failed += 1;
                serde_json::json!({"line": number, "error": message}).to_string()
            }
        };
        writeln!(output, "{record}")?;
        progress(done + 1, lines.len());
    }
    output.flush()?;
    Ok(outcome)
}

fn explain_line(
    explainer: &Explainer,
    line: &str,
    options: &ExplainOptions,
) -> std::result::Result<crate::Report, String> {
    let example: Example = serde_json::from_str(line).map_err(|e| {
        format!("not a JSON object with \"text\" (and optional \"target\", \"candidates\"): {e}")
    })?;
    let options = ExplainOptions {
        target: example.target.or(options.target),
        candidates: example
            .candidates
            .unwrap_or_else(|| options.candidates.clone()),
        ..options.clone()
    };
    explainer
        .explain(&example.text, &options)
        .map_err(|e| e.to_string())
}
