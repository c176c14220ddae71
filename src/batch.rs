//! Many texts through one loaded model: JSON lines in, one report (or error record) per
//! line out, and the dataset-level summary of `--evaluate`. An encoder explains each line's
//! masked word or label; a causal model continues each line's prompt and explains what it
//! generated.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::Result;
use crate::explain::generation::{CausalExplainer, CausalOptions, Continuation};
use crate::explain::{
    sift, EvaluateOptions, ExplainOptions, Explainer, ForwardSeconds, Forwarded, Grouping, Input,
};
use crate::faithfulness::correlations::Summary;
use crate::generate::Decoding;
use crate::image::{read_keyed, Decoded};
use crate::input::{Line, Lines, LINE_LIMIT};
use crate::report::causal::CausalReport;

/// One input line: `{"text": "...", "target": 7, "candidates": ["is", "are"],
/// "expected": "are"}`, for a classifier `{"text": "...", "pair": "...", "label":
/// "positive"}`, for a causal model `{"text": prompt, "generate": 5, "seed": 7}`, for an
/// image model `{"image": "photo.jpg", "target": 5}`; all but text (or image) are optional
/// and default to the command line's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    #[serde(default)]
    pub text: Option<String>,
    /// An image model's: the image file (a relative path from the working directory).
    #[serde(default)]
    pub image: Option<PathBuf>,
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
    /// A causal model: how many tokens to generate.
    #[serde(default)]
    pub generate: Option<usize>,
    /// A causal model: sample the continuation with this seed.
    #[serde(default)]
    pub seed: Option<u64>,
}

impl Example {
    /// One line of a batch file, or what is wrong with it.
    pub fn parse(line: &Line) -> std::result::Result<Self, String> {
        match line {
            Line::Text(text) => serde_json::from_str(text).map_err(|e| {
                format!("not a JSON object with \"text\" or \"image\" (and optional \"target\", \"candidates\", \"pair\", \"label\"; for a causal model \"generate\", \"seed\"): {e}")
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
    /// Seconds spent in the forward passes ([`Explainer::forward`], on the model's device),
    /// and in finishing the reports ([`Explainer::finish`], on the host), summed over the
    /// threads that ran them: the pipeline's two stages.
    pub forward_seconds: f64,
    pub finish_seconds: f64,
    /// The forward passes' stages, summed: the model on its device, its attention to the host.
    pub stages: ForwardSeconds,
    /// How many threads finished reports.
    pub workers: usize,
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

/// A loaded model and the options every line starts from (a line's own fields win).
#[derive(Clone, Copy)]
pub enum Batch<'a> {
    /// An encoder: each line's masked word, label or replaced token, the lines' forward
    /// passes grouped as [`Grouping`] says.
    Encoder(&'a Explainer, &'a ExplainOptions, Grouping),
    /// A causal language model: each line's prompt continued and its generation explained,
    /// the prompts' steps grouped as [`Grouping`] says.
    Causal(&'a CausalExplainer, &'a CausalOptions, Grouping),
}

impl Batch<'_> {
    /// Where the model runs: "cpu", "cuda" or "metal".
    pub fn device_name(&self) -> &'static str {
        match self {
            Batch::Encoder(explainer, ..) => explainer.device_name(),
            Batch::Causal(explainer, ..) => explainer.device_name(),
        }
    }

    /// How many lines are read before their forward passes run (grouped by length): a
    /// group's worth twice over.
    pub fn window(&self) -> usize {
        match self {
            Batch::Encoder(_, _, grouping) | Batch::Causal(_, _, grouping) if grouping.size > 1 => {
                2 * grouping.size
            }
            _ => 1,
        }
    }
}

/// What batch mode writes for one input line.
#[derive(Debug)]
pub enum Record {
    Report(Box<crate::Report>),
    /// A causal model's report on one prompt.
    Causal(Box<CausalReport>),
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
            Record::Causal(report) => serde_json::to_string(report),
            Record::Error { line, message } => {
                Ok(serde_json::json!({"line": line, "error": message}).to_string())
            }
        }
    }
}

/// Explains lines of a batch file, each `(number, line)`: its fields (`text`, `target`,
/// ...) over the batch's options, the forward passes grouped, as batch mode does; one record
/// per line, in their order.
pub fn explain_records(batch: Batch, lines: &[(usize, Line)]) -> Vec<Record> {
    let parsed = lines
        .iter()
        .map(|(_, line)| parse_line(batch, line))
        .collect();
    start_lines(batch, parsed)
        .into_iter()
        .zip(lines)
        .map(|(started, (number, _))| finish_line(*number, started))
        .collect()
}

/// Explains every non-blank line of `input`, writing one JSON line per input line to
/// `output`: the report, or `{"line": N, "error": "..."}` for a line that cannot be
/// explained (the others still run). `progress(done)` is called after each line.
///
/// A pipeline: this thread writes; one thread reads the lines and runs the model's forward
/// passes ([`Explainer::forward_many`], all the device's work for a plain report, a group of
/// lines of near lengths at a time); one worker a core finishes the reports on the host
/// ([`Explainer::finish`]: flow above all), while the forward passes of the next lines run.
/// Reports are written in the input's order, and memory stays bounded whatever the input:
/// lines are read one at a time, each capped, and at most a worker's count, two, and the
/// lines read before a forward pass ([`Batch::window`]) are in flight.
pub fn run_batch(
    batch: Batch,
    input: impl BufRead + Send,
    output: &mut dyn Write,
    mut progress: impl FnMut(usize),
) -> Result<BatchOutcome> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let window = batch.window();
    let in_flight = workers + 2 + window;
    std::thread::scope(|scope| {
        // A ticket for every line in flight, handed back as its record is written.
        let (ticket_tx, ticket_rx) = mpsc::sync_channel::<()>(in_flight);
        for _ in 0..in_flight {
            ticket_tx.send(()).expect("the channel holds every ticket");
        }
        let (job_tx, job_rx) = mpsc::sync_channel::<(usize, usize, StartedLine)>(1);
        let (done_tx, done_rx) = mpsc::channel::<(usize, Record, Duration)>();
        let reader = scope.spawn(move || -> std::io::Result<(f64, ForwardSeconds)> {
            let mut busy = Duration::ZERO;
            let mut stages = ForwardSeconds::default();
            let mut lines = examples(input).enumerate().peekable();
            let mut seq = 0;
            while lines.peek().is_some() {
                // A window of lines, each with its ticket, then their forward passes.
                let mut read = Vec::with_capacity(window);
                while read.len() < window {
                    if ticket_rx.recv().is_err() {
                        return Ok((busy.as_secs_f64(), stages)); // the writer has stopped
                    }
                    let Some((_, line)) = lines.next() else {
                        break;
                    };
                    let (number, line) = line?;
                    read.push((number, parse_line(batch, &line)));
                }
                let start = Instant::now();
                let (numbers, parsed): (Vec<usize>, Vec<_>) = read.into_iter().unzip();
                let started = start_lines(batch, parsed);
                busy += start.elapsed();
                for (number, started) in numbers.into_iter().zip(started) {
                    if let Ok(Started::Forwarded(_, started)) = &started {
                        let forwarded = &started.1;
                        stages.model += forwarded.seconds().model;
                        stages.to_host += forwarded.seconds().to_host;
                    }
                    if job_tx.send((seq, number, started)).is_err() {
                        return Ok((busy.as_secs_f64(), stages));
                    }
                    seq += 1;
                }
            }
            Ok((busy.as_secs_f64(), stages))
        });
        let job_rx = Arc::new(Mutex::new(job_rx));
        for _ in 0..workers {
            let (job_rx, done_tx) = (Arc::clone(&job_rx), done_tx.clone());
            scope.spawn(move || loop {
                let job = job_rx.lock().map(|rx| rx.recv());
                let Ok(Ok((seq, number, started))) = job else {
                    break;
                };
                let start = Instant::now();
                let record = finish_line(number, started);
                if done_tx.send((seq, record, start.elapsed())).is_err() {
                    break;
                }
            });
        }
        drop((done_tx, job_rx));
        let mut outcome = BatchOutcome {
            workers,
            ..BatchOutcome::default()
        };
        let mut waiting = BTreeMap::new();
        for (seq, record, took) in done_rx {
            outcome.finish_seconds += took.as_secs_f64();
            waiting.insert(seq, record);
            while let Some(record) = waiting.remove(&outcome.examples) {
                outcome.examples += 1;
                match &record {
                    Record::Report(report) => {
                        if let Some(evaluation) = &report.evaluation {
                            outcome.summary.add(evaluation);
                        }
                    }
                    // Each generated token's correlations, over its prompt.
                    Record::Causal(report) => {
                        for evaluation in report.evaluation.iter().flatten() {
                            outcome.summary.add(evaluation);
                        }
                    }
                    Record::Error { .. } => outcome.failed += 1,
                }
                let json = record.to_json().map_err(std::io::Error::from)?;
                writeln!(output, "{json}")?;
                progress(outcome.examples);
                // The reader may have finished and dropped its end.
                let _ = ticket_tx.send(());
            }
        }
        (outcome.forward_seconds, outcome.stages) =
            reader.join().expect("the reader does not panic")?;
        output.flush()?;
        Ok(outcome)
    })
}

/// A line started, or why it cannot be explained.
type StartedLine<'a> = std::result::Result<Started<'a>, String>;

/// A line ready for a worker, after the device's part of its report: an encoder's options
/// and forward pass, a causal model's options and generation.
enum Started<'a> {
    Forwarded(&'a Explainer, Box<(ExplainOptions, Forwarded)>),
    Generated(&'a CausalExplainer, Box<(CausalOptions, Continuation)>),
}

/// A line read: an encoder's text and options, or a causal model's prompt and options; or
/// why the line cannot be explained.
type ParsedLine = std::result::Result<Parsed, String>;

enum Parsed {
    Text(Given, Box<ExplainOptions>),
    Prompt(String, Box<CausalOptions>),
}

/// What an encoder's line gives: a text, or an image read.
enum Given {
    Text(String),
    Image(Decoded),
}

/// Reads a line's fields over the batch's options (and an image line's picture); or says
/// why the line cannot be explained.
fn parse_line(batch: Batch, line: &Line) -> ParsedLine {
    let example = Example::parse(line)?;
    let images = matches!(batch, Batch::Encoder(explainer, ..) if explainer.reads_images());
    let text = match (example.text.clone(), &example.image, images) {
        (Some(_), Some(_), _) => {
            return Err("give \"text\" or \"image\", not both".into());
        }
        (Some(text), None, false) => text,
        (None, Some(_), true) => String::new(),
        (_, _, true) => {
            return Err(
                "this model reads images: give the line an \"image\": a file's path".into(),
            );
        }
        (_, _, false) => {
            return Err("this model reads text: give the line a \"text\"".into());
        }
    };
    match batch {
        Batch::Encoder(_, options, _) => {
            let options = encoder_options(example_fields(&example, false)?, options)?;
            let given = match &example.image {
                Some(path) => Given::Image(read_keyed(path).map_err(|e| e.to_string())?),
                None => Given::Text(text),
            };
            Ok(Parsed::Text(given, Box::new(options)))
        }
        Batch::Causal(_, options, _) => {
            example_fields(&example, true)?;
            let mut options = options.clone();
            options.generate = example.generate.unwrap_or(options.generate);
            if let Some(seed) = example.seed {
                let temperature = match options.decoding {
                    Decoding::Sample { temperature, .. } => temperature,
                    Decoding::Greedy => 1.0,
                };
                options.decoding = Decoding::Sample { seed, temperature };
            }
            Ok(Parsed::Prompt(text, Box::new(options)))
        }
    }
}

/// The lines read through the device's part of their reports (an encoder's forward passes,
/// a causal model's generation), grouped as the batch says, in their order.
fn start_lines<'a>(batch: Batch<'a>, parsed: Vec<ParsedLine>) -> Vec<StartedLine<'a>> {
    let (mut started, lines) = sift::<_, Started, _>(parsed);
    let (indices, lines): (Vec<usize>, Vec<Parsed>) = lines.into_iter().unzip();
    let results = match batch {
        Batch::Encoder(explainer, _, grouping) => start_group(
            lines.into_iter().filter_map(|line| match line {
                Parsed::Text(text, options) => Some((text, options)),
                Parsed::Prompt(..) => None,
            }),
            |given| {
                let given: Vec<_> = (given.iter())
                    .map(|(given, options)| match given {
                        Given::Text(text) => (Input::Text(text), *options),
                        Given::Image(picture) => (Input::Image(picture), *options),
                    })
                    .collect();
                explainer.forward_many(&given, &grouping)
            },
            |started| Started::Forwarded(explainer, started),
        ),
        Batch::Causal(explainer, _, grouping) => start_group(
            lines.into_iter().filter_map(|line| match line {
                Parsed::Prompt(prompt, options) => Some((prompt, options)),
                Parsed::Text(..) => None,
            }),
            |given| {
                let given: Vec<_> = (given.iter()).map(|(t, o)| (t.as_str(), *o)).collect();
                explainer.generate_many(&given, &grouping)
            },
            |started| Started::Generated(explainer, started),
        ),
    };
    for (i, result) in indices.into_iter().zip(results) {
        started[i] = Some(result);
    }
    started
        .into_iter()
        .map(|s| s.expect("every line has its result"))
        .collect()
}

/// Lines of one kind (each what it gives and its options) through `run`, the device's part
/// of their reports for all of them at once, each result `started` with its options.
fn start_group<'a, T, O, R>(
    lines: impl Iterator<Item = (T, Box<O>)>,
    run: impl FnOnce(&[(&T, &O)]) -> Vec<Result<R>>,
    started: impl Fn(Box<(O, R)>) -> Started<'a>,
) -> Vec<StartedLine<'a>> {
    let (texts, options): (Vec<T>, Vec<Box<O>>) = lines.unzip();
    let given: Vec<(&T, &O)> = (texts.iter().zip(&options))
        .map(|(text, options)| (text, options.as_ref()))
        .collect();
    (run(&given).into_iter().zip(options))
        .map(|(result, options)| {
            result
                .map(|result| started(Box::new((*options, result))))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// `example`, with the fields its model's kind does not read refused (`causal`: the model
/// continues a prompt).
fn example_fields(example: &Example, causal: bool) -> std::result::Result<&Example, String> {
    let encoder_fields = [
        ("target", example.target.is_some()),
        ("candidates", example.candidates.is_some()),
        ("pair", example.pair.is_some()),
        ("label", example.label.is_some()),
    ];
    let causal_fields = [
        ("generate", example.generate.is_some()),
        ("seed", example.seed.is_some()),
    ];
    let (unused, why) = match causal {
        true => (
            &encoder_fields[..],
            "a causal model continues the prompt and explains what it generates",
        ),
        false => (
            &causal_fields[..],
            "it is for causal models (GPT-2, Llama, ...), which continue a prompt",
        ),
    };
    match unused.iter().find(|(_, given)| *given) {
        Some((field, _)) => Err(format!(
            "\"{field}\" is not used with this model: {why}; leave it out"
        )),
        None => Ok(example),
    }
}

/// An encoder line's options: its fields over the batch's.
fn encoder_options(
    example: &Example,
    options: &ExplainOptions,
) -> std::result::Result<ExplainOptions, String> {
    let evaluate = match (&options.evaluate, &example.label) {
        (None, Some(_)) => {
            return Err("\"label\" chooses what --evaluate explains; run with --evaluate".into())
        }
        (Some(evaluate), label) => Some(EvaluateOptions {
            label: label.clone().or_else(|| evaluate.label.clone()),
            ..evaluate.clone()
        }),
        (None, None) => None,
    };
    Ok(ExplainOptions {
        target: example.target.or(options.target),
        pair: example.pair.clone().or_else(|| options.pair.clone()),
        evaluate,
        candidates: example
            .candidates
            .clone()
            .or_else(|| options.candidates.clone()),
        ..options.clone()
    })
}

/// The record of line `number`: its report finished on the host (a causal model's generated
/// and explained), or its error.
fn finish_line(number: usize, started: StartedLine) -> Record {
    let record = started.and_then(|started| {
        match started {
            Started::Forwarded(explainer, started) => explainer
                .finish(started.1, &started.0)
                .map(|report| Record::Report(Box::new(report))),
            Started::Generated(explainer, started) => explainer
                .finish(started.1, &started.0)
                .map(|report| Record::Causal(Box::new(report))),
        }
        .map_err(|e| e.to_string())
    });
    record.unwrap_or_else(|message| Record::Error {
        line: number,
        message,
    })
}
