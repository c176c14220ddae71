//! `--input`: batch mode on the command line.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use bert_explain::{batch::run_batch, ExplainOptions};

use crate::{load_explainer, Args};

/// `--input`: one model, every line of the file, a progress bar on stderr, and with
/// `--evaluate` the summary table (on stderr when the reports go to stdout).
pub fn run(
    args: &Args,
    input: &Path,
    device: &candle_core::Device,
    options: &ExplainOptions,
) -> anyhow::Result<()> {
    let reader = std::fs::File::open(input)
        .map(std::io::BufReader::new)
        .with_context(|| format!("cannot read {}", input.display()))?;
    let explainer = load_explainer(args, device)?;
    let mut output: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} sentences, {per_sec}, {eta} left",
        )
        .expect("the progress template is valid"),
    );
    let start = std::time::Instant::now();
    let outcome = run_batch(&explainer, reader, &mut output, options, |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let mut summary = String::new();
    if options.evaluate.is_some() {
        summary += &outcome.summary.to_string();
    }
    summary += &format!(
        "{} sentences ({} failed) in {seconds:.2} s: {:.1} sentences/s\n",
        outcome.examples,
        outcome.failed,
        outcome.examples as f64 / seconds.max(1e-9)
    );
    match &args.output {
        Some(_) => print!("{summary}"),
        None => eprint!("{summary}"),
    }
    Ok(())
}
