//! The `bert-explain` command line as a function of its arguments: [`main`] parses them,
//! runs the library and prints the report, and returns the exit status (SPEC §3). The
//! binary (src/main.rs) and the Python package's `bert-explain` console script both call
//! it, so they are one command. This module (with its submodules for the larger modes) is
//! the only part of the library that prints.

use std::io::{IsTerminal, Read, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bert_explain::{
    attention::read_fused_attention_file,
    batch::Batch,
    causal::{is_causal, CausalExplainer},
    device,
    explain::{explain_attention, EvaluateOptions, Grouping, Input, Progress},
    faithfulness::Blank,
    image::{decode_keyed, read_keyed, Decoded, FILE_LIMIT},
    methods::Mixing,
    relevance::{FlowChoice, FLOW_AUTO_LIMIT},
    report::{
        remove_partial_outputs_on_interrupt, terminal_text, Colour, Explained, Format, OutputFile,
        View,
    },
    Error, ExplainOptions, Explainer, HeadFusion, Json, ModelSource, RelevanceOptions, Renderer,
    Report, Terminal,
};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle};

mod args;
mod batch;
mod causal;
mod options;
mod serve;

use args::{Args, BlankArg, ColorArg, Fusion};

pub use causal::CausalArgs;
use options::{given, refuse_for_images, refuse_unused, Mode};
pub use options::{refuse_for_task, CAUSAL_OPTIONS, ENCODER_OPTIONS};

/// Runs the command line on `args` (the program name first, as `std::env::args_os` gives
/// them) and returns the exit status: 0 on success, 2 for a mistake in the command line or
/// its input, 1 for anything else; `--help` and `--version` print and return 0. Installs the
/// interrupt handler that removes partial outputs (exit status 130).
pub fn main<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).is_some_and(|word| word == "serve") {
        return serve_main(&args[1..]);
    }
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
    finish(run(&args, &matches))
}

/// `bert-explain serve ...` (`args` from the word `serve` on).
fn serve_main(args: &[std::ffi::OsString]) -> u8 {
    match serve::ServeArgs::try_parse_from(args) {
        Ok(args) => {
            remove_partial_outputs_on_interrupt();
            finish(serve::run(args))
        }
        Err(err) => {
            let _ = err.print();
            err.exit_code() as u8
        }
    }
}

/// The exit status of a run, with its error printed.
fn finish(outcome: anyhow::Result<()>) -> u8 {
    let status = match outcome {
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
        (Some(_), _) if is_causal(&source) => Mode::CausalBatch,
        (Some(_), _) => Mode::Batch,
        (None, Some(_)) => Mode::Attention,
        (None, None) if is_causal(&source) => Mode::Causal,
        (None, None) => Mode::Masked,
    };
    refuse_unused(matches, mode, &source.to_string())?;
    let inputs: Vec<&Path> = args.attention.iter().map(PathBuf::as_path).collect();
    let files = output_files(&args.figure, args.html.as_deref(), &inputs)?;
    let device = device(args.device.into())?;
    let mut options = explain_options(args)?;
    // Batch mode has its own bar, one step per line.
    options.progress = (mode != Mode::Batch).then(flow_progress);
    match (mode, &args.input, &args.text) {
        (Mode::Batch, Some(input), _) => {
            let explainer = load_explainer(args, matches, &device)?;
            options.mixing = mixing_for(&explainer, args, options.mixing);
            return batch::run(
                args,
                input,
                Batch::Encoder(&explainer, &options, Grouping::of(args.batch_size)),
            );
        }
        (Mode::CausalBatch, Some(input), _) => {
            let options = causal::batch_options(&args.causal, &options);
            eprintln!("Loading {source} (causal LM: generating from each prompt)");
            let explainer = CausalExplainer::load(&source, &device)?;
            let grouping = Grouping::of(args.batch_size);
            return batch::run(args, input, Batch::Causal(&explainer, &options, grouping));
        }
        _ => {}
    }
    let shown = match (&args.attention, &args.text) {
        (Some(file), _) => {
            let report = explain_file(file, args.tokens.as_deref(), &device, &options)?;
            note_flow(&report, &options);
            view(report, args.hide_special)
        }
        (None, Some(text)) if mode == Mode::Causal => {
            causal::explain(&source, text, &args.causal, &options, &device)?
        }
        (None, Some(text)) => {
            let explainer = load_explainer(args, matches, &device)?;
            options.mixing = mixing_for(&explainer, args, options.mixing);
            let report = match explainer.reads_images() {
                true => explainer.explain_input(Input::Image(&read_image(text)?), &options)?,
                false => explainer.explain(text, &options)?,
            };
            note_flow(&report, &options);
            view(report, args.hide_special)
        }
        (None, None) => unreachable!("clap requires the text unless --attention is given"),
    };
    write_outputs(files, &shown, |path| eprintln!("Wrote {path}"))?;
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
    // Buffered: stdout's own buffer writes a report of maps a kilobyte at a time.
    let mut stdout = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    renderer
        .render(&shown, &mut stdout)
        .and_then(|()| stdout.flush())
        .context("cannot write the report to stdout")
}

/// The picture in the file at `path`, or on standard input for `-`.
fn read_image(path: &str) -> anyhow::Result<Decoded> {
    if path != "-" {
        return Ok(read_keyed(Path::new(path))?);
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(FILE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .context("cannot read the image from standard input")?;
    anyhow::ensure!(
        bytes.len() as u64 <= FILE_LIMIT,
        "the image on standard input holds more than {FILE_LIMIT} bytes, more than an image \
         may; give a smaller file"
    );
    Ok(decode_keyed(&bytes)?)
}

/// A note on stderr where flow was left out of a long text unasked.
fn note_flow(report: &Report, options: &ExplainOptions) {
    if report.relevance.flow.is_none() && options.flow == FlowChoice::Auto {
        eprintln!(
            "Note: attention flow was left out: {} tokens is more than {FLOW_AUTO_LIMIT}, and \
             flow solves {} max-flow problems there; add --flow to compute it anyway, or \
             --no-flow to leave it out without this note.",
            report.tokens.len(),
            report.layers * report.tokens.len()
        );
    }
}

/// An encoder's report as shown: every token, or with `--hide-special` (`hide`) the tokens
/// that are not special.
pub fn view(report: Report, hide: bool) -> Explained {
    match hide {
        true => View::hide_special(report),
        false => View::full(report),
    }
    .into()
}

/// The library's options for an encoder from the command line's (no progress bar).
fn explain_options(args: &Args) -> anyhow::Result<ExplainOptions> {
    Ok(ExplainOptions {
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
            discard_ratio: args.discard_ratio,
        },
        all_positions: args.all_positions,
        flow: match (args.causal.flow, args.no_flow) {
            (true, _) => FlowChoice::Always,
            (false, true) => FlowChoice::Never,
            (false, false) => FlowChoice::Auto,
        },
        progress: None,
        mixing: args.mixing.as_deref().map(Mixing::parse_list).transpose()?,
        evaluate: (args.evaluate || args.lrp).then(|| EvaluateOptions {
            word: args.importance_word.clone(),
            label: args.label.clone(),
            blank: match args.blank {
                BlankArg::Unk => Blank::Unk,
                BlankArg::Mask => Blank::Mask,
                BlankArg::Pad => Blank::Pad,
            },
            without_specials: args.correlate_without_specials,
            ig_steps: args.ig_steps,
            only: (!args.evaluate).then_some("lrp"),
        }),
    })
}

/// `--mixing all` is every method that applies to the model: the others are left out, each
/// with a note on stderr; methods named one by one stay, and fail if they cannot run.
fn mixing_for(
    explainer: &Explainer,
    args: &Args,
    mixing: Option<Vec<Mixing>>,
) -> Option<Vec<Mixing>> {
    let asked_all = args.mixing.as_deref().is_some_and(Mixing::names_all);
    match (mixing, asked_all) {
        (Some(list), true) => {
            let (kept, notes) = explainer.applicable(&list);
            notes.iter().for_each(|note| eprintln!("Note: {note}."));
            Some(kept)
        }
        (mixing, _) => mixing,
    }
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

/// Renders `shown` into each of [`output_files`]' files and puts it in place, calling
/// `wrote(path)` after each.
pub fn write_outputs(
    files: Vec<(OutputFile, Format)>,
    shown: &Explained,
    mut wrote: impl FnMut(&str),
) -> anyhow::Result<()> {
    for (file, format) in files {
        let path = file.path().display().to_string();
        file.finish(shown, format)
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
    if explainer.reads_images() {
        refuse_for_images(|id| given(matches, id), &source.to_string())?;
    }
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
    let stack = read_fused_attention_file(file, device, options.relevance.fusion)?;
    let tokens = tokens.map(|t| t.split_whitespace().map(String::from).collect());
    let name = file.display().to_string();
    Ok(explain_attention(&name, &stack, tokens, options)?)
}

/// A progress bar's style from an indicatif template, with `{rate}` for the items done a
/// second: whole numbers from 10 up, one decimal from 1, two below (indicatif's `{per_sec}`
/// prints four).
pub(crate) fn bar_style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("the progress template is valid")
        .with_key(
            "rate",
            |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = out.write_str(&rate(state.per_sec()));
            },
        )
}

/// Items a second as the bars print them (see [`bar_style`]).
fn rate(per_sec: f64) -> String {
    match per_sec {
        r if r >= 10.0 => format!("{r:.0}/s"),
        r if r >= 1.0 => format!("{r:.1}/s"),
        r => format!("{r:.2}/s"),
    }
}

/// The bar on stderr for a long flow, from one position or every position (drawn only when
/// stderr is a terminal and the flow has run for a second; cleared when the last flow is
/// done, or when the options holding it are dropped after an error).
pub fn flow_progress() -> Progress {
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden())
        .with_style(bar_style("{bar:40} {pos}/{len} flows, {rate}, {eta} left"))
        .with_finish(ProgressFinish::AndClear);
    // Shown once a flow has run for a second: a quick one leaves no trace on stderr. One
    // position's flow counts its sinks, every position's its (layer, sink) pairs, each a
    // new count.
    let started = std::sync::Mutex::new(None::<std::time::Instant>);
    Progress(Arc::new(move |done, total| {
        let mut started = started.lock().unwrap_or_else(|e| e.into_inner());
        if bar.length() != Some(total as u64) || started.is_none() {
            bar.reset();
            bar.set_length(total as u64);
            *started = Some(std::time::Instant::now());
        }
        let running = started.map_or(0.0, |s| s.elapsed().as_secs_f64());
        if bar.is_hidden() && running >= 1.0 && done < total {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_position(done as u64);
        if done == total {
            bar.finish_and_clear();
            bar.set_draw_target(ProgressDrawTarget::hidden());
            *started = None;
        }
        ControlFlow::Continue(())
    }))
}

#[cfg(test)]
mod tests {
    use super::rate;

    #[test]
    fn rates_print_with_as_many_digits_as_they_need() {
        assert_eq!(rate(115.6596), "116/s");
        assert_eq!(rate(10.0), "10/s");
        assert_eq!(rate(2.345), "2.3/s");
        assert_eq!(rate(0.4567), "0.46/s");
        assert_eq!(rate(0.0), "0.00/s");
    }
}
