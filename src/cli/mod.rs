//! The `bert-explain` command line as a function of its arguments: [`main`] parses them,
//! runs the library and prints the report, and returns the exit status (SPEC §3). The
//! binary (src/main.rs) and the Python package's `bert-explain` console script both call
//! it, so they are one command. This module (with its submodules for the larger modes) is
//! the only part of the library that prints.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bert_explain::{
    attention::read_attention_file,
    causal::is_causal,
    device,
    explain::{explain_attention, EvaluateOptions, Progress},
    importance::Blank,
    methods::Mixing,
    report::{
        remove_partial_outputs_on_interrupt, terminal_text, Colour, Format, OutputFile, View,
    },
    DeviceChoice, Error, ExplainOptions, Explainer, HeadFusion, Json, ModelSource,
    RelevanceOptions, Renderer, Report, Terminal,
};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

mod batch;
mod causal;
mod options;

pub use options::refuse_for_task;
use options::{given, refuse_unused, Mode};

/// Explain which input tokens a BERT's prediction at [MASK] rests on: raw attention,
/// attention rollout and attention flow (Abnar & Zuidema, ACL 2020).
#[derive(Parser, Debug)]
#[command(name = "bert-explain", version, about)]
struct Args {
    /// The sentence, with one [MASK] where the word to predict goes; for a GPT-2 model
    /// (config.json model_type "gpt2"), the prompt to continue.
    #[arg(
        required_unless_present_any = ["attention", "input"],
        conflicts_with_all = ["attention", "input"]
    )]
    text: Option<String>,

    /// Batch mode: explain every line of a JSON-lines file ({"text": …, optional "target"
    /// and "candidates"}) with one loaded model; one JSON report per line comes out.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "attention")]
    input: Option<PathBuf>,

    /// With --input: write the reports here instead of stdout.
    #[arg(long, value_name = "FILE.jsonl", requires = "input")]
    output: Option<PathBuf>,

    /// Score each token's importance for the predicted word (input gradients, blank-out)
    /// and report the Spearman correlation of every layer of every method with each score.
    #[arg(long)]
    evaluate: bool,

    /// With --evaluate: explain this word's probability instead of the top prediction's.
    #[arg(long, value_name = "WORD", requires = "evaluate")]
    importance_word: Option<String>,

    /// With --evaluate on a classifier: explain this label's probability (its name from
    /// id2label, or its id) instead of the top label's.
    #[arg(long, value_name = "NAME|ID", requires = "evaluate")]
    label: Option<String>,

    /// The second text of a pair (NLI, paraphrase), joined as the tokenizer joins pairs.
    #[arg(long, value_name = "TEXT")]
    pair: Option<String>,

    /// The text is tokens separated by spaces, each looked up in the vocabulary as it is
    /// (SMILES, protein or DNA tokens); one not in the vocabulary is an error.
    #[arg(long)]
    pretokenized: bool,

    /// With --evaluate: the token that blank-out puts in place of each token.
    #[arg(long, value_enum, default_value_t = BlankArg::Unk, requires = "evaluate")]
    blank: BlankArg,

    /// Explain an attention stack saved by another framework instead of running a model:
    /// a .npy or .safetensors file of shape [layers, heads, n, n] or [layers, n, n].
    #[arg(long, value_name = "FILE")]
    attention: Option<PathBuf>,

    /// With --attention: the n tokens, separated by spaces (default: their positions).
    #[arg(long, requires = "attention")]
    tokens: Option<String>,

    /// Hugging Face Hub id or a local checkpoint folder.
    #[arg(long, default_value = "bert-base-uncased")]
    model: String,

    /// Hub revision (branch, tag or commit).
    #[arg(long, default_value = "main")]
    revision: String,

    /// Position to explain (default: the [MASK]).
    #[arg(long)]
    target: Option<usize>,

    /// Comma-separated words whose probability to report.
    /// [default: his,her, when the vocabulary has both]
    #[arg(long, value_delimiter = ',')]
    candidates: Option<Vec<String>>,

    /// How many top predictions to report.
    #[arg(long, default_value_t = 5)]
    top_k: usize,

    /// Print the JSON report on stdout and nothing else there.
    #[arg(long)]
    json: bool,

    /// Print every layer's relevance, not just the last layer's.
    #[arg(long)]
    layers: bool,

    /// Also compute rollout and flow from every position, as the reference's
    /// compute_flows does (JSON: "all_positions").
    #[arg(long)]
    all_positions: bool,

    /// Methods beyond attention (SPEC §8), comma-separated: attention, norm, alti,
    /// value-zeroing, grad-attention, or all; each gets layer, rollout and flow maps
    /// (JSON: "methods").
    #[arg(long, value_name = "M,M..")]
    mixing: Option<String>,

    /// How to fuse the heads of a layer.
    #[arg(long, value_enum, default_value_t = Fusion::Mean)]
    fusion: Fusion,

    /// Weight α of the residual connection: Â = (1-α)·Ā + α·I.
    #[arg(long, default_value_t = 0.5, value_parser = parse_alpha)]
    residual: f64,

    /// Where the model runs.
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    device: DeviceArg,

    /// Also write the paper's figure (raw, rollout and flow heatmaps and the prediction):
    /// PATH ending in .svg or .png; may be given more than once.
    #[arg(long, value_name = "PATH", value_parser = figure_path, conflicts_with = "input")]
    figure: Vec<PathBuf>,

    /// Also write a self-contained interactive HTML report to PATH (.html).
    #[arg(long, value_name = "PATH", value_parser = html_path, conflicts_with = "input")]
    html: Option<PathBuf>,

    /// Leave [CLS], [SEP] and punctuation out of every output (JSON too) and renormalise
    /// each layer over the remaining tokens.
    #[arg(long, conflicts_with = "input")]
    hide_special: bool,

    /// Colour the --layers grids: auto (when stdout is a terminal and NO_COLOR is unset),
    /// always or never.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto, value_name = "WHEN")]
    color: ColorArg,

    #[command(flatten)]
    causal: causal::CausalArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ColorArg {
    Auto,
    Always,
    Never,
}

fn figure_path(text: &str) -> Result<PathBuf, String> {
    Format::of_figure(Path::new(text)).map(|_| PathBuf::from(text))
}

fn html_path(text: &str) -> Result<PathBuf, String> {
    Format::of_html(Path::new(text)).map(|_| PathBuf::from(text))
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum BlankArg {
    Unk,
    Mask,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Fusion {
    Mean,
    Max,
    Min,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum DeviceArg {
    Auto,
    Cpu,
    Cuda,
    Metal,
}

fn parse_alpha(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(alpha) if (0.0..=1.0).contains(&alpha) => Ok(alpha),
        _ => Err(format!("{text:?} is not a number between 0 and 1")),
    }
}

/// Runs the command line on `args` (the program name first, as `std::env::args_os` gives
/// them) and returns the exit status: 0 on success, 2 for a mistake in the command line or
/// its input, 1 for anything else; `--help` and `--version` print and return 0. Installs the
/// interrupt handler that removes partial outputs (exit status 130).
pub fn main<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let parsed = Args::command()
        .try_get_matches_from(args)
        .and_then(|matches| Ok((Args::from_arg_matches(&matches)?, matches)));
    let (args, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => {
            // As clap's own exit would: help on stdout, mistakes on stderr.
            let _ = err.print();
            return err.exit_code() as u8;
        }
    };
    remove_partial_outputs_on_interrupt();
    let status = match run(&args, &matches) {
        Ok(()) => 0,
        Err(err) => {
            // Messages may quote a checkpoint's tokens: nothing in them may act on the terminal.
            eprintln!("Error: {}", terminal_text(&format!("{err:#}")));
            let usage = err.downcast_ref::<Error>().is_some_and(Error::is_usage);
            if usage {
                2
            } else {
                1
            }
        }
    };
    // A host process (Python) may outlive this call: leave nothing in stdout's buffer.
    let _ = std::io::stdout().flush();
    status
}

fn run(args: &Args, matches: &ArgMatches) -> anyhow::Result<()> {
    let source = ModelSource::parse(&args.model, &args.revision);
    let mode = match (&args.input, &args.attention) {
        (Some(_), _) => Mode::Batch,
        (None, Some(_)) => Mode::Attention,
        (None, None) if is_causal(&source) => Mode::Causal,
        (None, None) => Mode::Masked,
    };
    refuse_unused(matches, mode, &source.to_string())?;
    let inputs: Vec<&Path> = args.attention.iter().map(PathBuf::as_path).collect();
    let files = output_files(&args.figure, args.html.as_deref(), &inputs)?;
    let device = device(match args.device {
        DeviceArg::Auto => DeviceChoice::Auto,
        DeviceArg::Cpu => DeviceChoice::Cpu,
        DeviceArg::Cuda => DeviceChoice::Cuda,
        DeviceArg::Metal => DeviceChoice::Metal,
    })?;
    let options = ExplainOptions {
        target: args.target,
        pair: args.pair.clone(),
        pretokenized: args.pretokenized,
        candidates: args.candidates.clone(),
        top_k: args.top_k,
        relevance: RelevanceOptions {
            fusion: match args.fusion {
                Fusion::Mean => HeadFusion::Mean,
                Fusion::Max => HeadFusion::Max,
                Fusion::Min => HeadFusion::Min,
            },
            residual: args.residual,
        },
        all_positions: args.all_positions,
        // Batch mode has its own bar, one step per line.
        progress: (args.all_positions && mode != Mode::Batch).then(flow_progress),
        mixing: args.mixing.as_deref().map(Mixing::parse_list).transpose()?,
        evaluate: args.evaluate.then(|| EvaluateOptions {
            word: args.importance_word.clone(),
            label: args.label.clone(),
            blank: match args.blank {
                BlankArg::Unk => Blank::Unk,
                BlankArg::Mask => Blank::Mask,
            },
        }),
    };
    match (mode, &args.input, &args.text) {
        (Mode::Batch, Some(input), _) => {
            let explainer = load_explainer(args, matches, &device)?;
            return batch::run(args, input, explainer, &options);
        }
        (Mode::Causal, _, Some(text)) => {
            let printing = causal::Printing {
                json: args.json,
                terminal: Terminal {
                    all_layers: args.layers,
                    colour: Colour::Plain,
                },
                files,
            };
            let relevance = options.relevance;
            return causal::run(&source, text, &args.causal, relevance, &device, printing);
        }
        _ => {}
    }
    let report = match (&args.attention, &args.text) {
        (Some(file), _) => explain_file(file, args.tokens.as_deref(), &device, &options)?,
        (None, Some(text)) => load_explainer(args, matches, &device)?.explain(text, &options)?,
        (None, None) => unreachable!("clap requires the text unless --attention is given"),
    };
    let view = match args.hide_special {
        true => View::hide_special(report),
        false => View::full(report),
    };
    write_outputs(files, &view, |path| eprintln!("Wrote {path}"))?;
    let stdout = std::io::stdout();
    let env = |name: &str| std::env::var(name).ok();
    let colour = match args.color {
        ColorArg::Auto => Colour::detect(stdout.is_terminal(), env),
        ColorArg::Always => Colour::depth(env),
        ColorArg::Never => Colour::Plain,
    };
    let renderer: Box<dyn Renderer> = if args.json {
        Box::new(Json)
    } else {
        Box::new(Terminal {
            all_layers: args.layers,
            colour,
        })
    };
    let mut stdout = stdout.lock();
    renderer
        .render(&view, &mut stdout)
        .and_then(|()| stdout.flush())
        .context("cannot write the report to stdout")
}

/// The --figure and --html files, created (empty, hidden, temporary) before the model runs
/// so that a bad path fails at once; each appears under its name only once written.
/// `inputs` are the files the run reads, which no output may be.
pub fn output_files(
    figures: &[PathBuf],
    html: Option<&Path>,
    inputs: &[&Path],
) -> anyhow::Result<Vec<(OutputFile, Format)>> {
    let figures = figures.iter().map(|p| (p.as_path(), Format::of_figure(p)));
    let html = html.iter().map(|p| (*p, Format::of_html(p)));
    figures
        .chain(html)
        .map(|(path, format)| {
            let format = format.map_err(anyhow::Error::msg)?;
            let file = OutputFile::create(path, inputs)
                .with_context(|| format!("cannot create {}", path.display()))?;
            Ok((file, format))
        })
        .collect()
}

/// Renders `view` into each of [`output_files`]' files and puts it in place, calling
/// `wrote(path)` after each.
pub fn write_outputs(
    files: Vec<(OutputFile, Format)>,
    view: &View,
    mut wrote: impl FnMut(&str),
) -> anyhow::Result<()> {
    for (file, format) in files {
        let path = file.path().display().to_string();
        file.finish(view, format)
            .with_context(|| format!("cannot write {path}"))?;
        wrote(&path);
    }
    Ok(())
}

/// Loads the --model checkpoint, saying so on stderr, and refuses the options its task
/// does not use.
fn load_explainer(
    args: &Args,
    matches: &ArgMatches,
    device: &candle_core::Device,
) -> anyhow::Result<Explainer> {
    let source = ModelSource::parse(&args.model, &args.revision);
    eprintln!("Loading {source}");
    let explainer = Explainer::load(&source, device)?;
    refuse_for_task(
        |id| given(matches, id),
        explainer.task(),
        &source.to_string(),
    )?;
    if !explainer.has_head() {
        eprintln!("Note: {source} has no prediction head, so the prediction is unavailable; relevances still work.");
    }
    Ok(explainer)
}

fn explain_file(
    file: &std::path::Path,
    tokens: Option<&str>,
    device: &candle_core::Device,
    options: &ExplainOptions,
) -> anyhow::Result<Report> {
    let stack = read_attention_file(file, device)?;
    let tokens = tokens.map(|t| t.split_whitespace().map(String::from).collect());
    let name = file.display().to_string();
    Ok(explain_attention(&name, &stack, tokens, options)?)
}

/// The bar on stderr for `--all-positions` (drawn only when stderr is a terminal; cleared
/// when the last flow is done, or when the options holding it are dropped after an error).
pub fn flow_progress() -> Progress {
    let bar = ProgressBar::new(0)
        .with_style(
            ProgressStyle::with_template(
                "{bar:40} {pos}/{len} (layer, position) flows, {per_sec}, {eta} left",
            )
            .expect("the progress template is valid"),
        )
        .with_finish(ProgressFinish::AndClear);
    Progress(Arc::new(move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if done == total {
            bar.finish_and_clear();
        }
    }))
}
