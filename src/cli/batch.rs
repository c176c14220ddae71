//! `--input`: batch mode on the command line.

use std::path::Path;

use anyhow::Context;
use bert_explain::batch::{examples, run_batch};
use bert_explain::input::open_regular;
use bert_explain::report::OutputFile;
use bert_explain::{ExplainOptions, Explainer};

use super::Args;

/// `--input`: one model, every line of the file, a progress bar on stderr, and with
/// `--evaluate` the summary table (on stderr when the reports go to stdout).
pub fn run(
    args: &Args,
    input: &Path,
    explainer: Explainer,
    options: &ExplainOptions,
) -> anyhow::Result<()> {
    let open = || {
        open_regular(input)
            .map(std::io::BufReader::new)
            .with_context(|| format!("cannot read {}", input.display()))
    };
    let mut output = match &args.output {
        Some(path) => Some(
            OutputFile::create(path, &[input])
                .with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => None,
    };
    let total = examples(open()?).count();
    let bar = indicatif::ProgressBar::new(total as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} sentences, {per_sec}, {eta} left",
        )
        .expect("the progress template is valid"),
    );
    let start = std::time::Instant::now();
    let progress = |done: usize| bar.set_position(done as u64);
    let outcome = match &mut output {
        Some(file) => {
            let mut writer = std::io::BufWriter::new(file.writer());
            run_batch(&explainer, open()?, &mut writer, options, progress)?
        }
        None => run_batch(
            &explainer,
            open()?,
            &mut std::io::stdout().lock(),
            options,
            progress,
        )?,
    };
    if let Some(file) = output {
        let path = file.path().display().to_string();
        file.commit()
            .with_context(|| format!("cannot write {path}"))?;
    }
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let mut summary = String::new();
    if options.evaluate.is_some() {
        summary += &outcome.summary.to_string();
    }
    summary += &format!(
        "{} sentences ({} failed) in {seconds:.2} s: {:.1} sentences/s (forward passes {:.2} s on {}: the model {:.2} s, attention to the host {:.2} s; reports {:.2} s on the host, over {} threads)\n",
        outcome.examples,
        outcome.failed,
        outcome.examples as f64 / seconds.max(1e-9),
        outcome.forward_seconds,
        explainer.device_name(),
        outcome.stages.model,
        outcome.stages.to_host,
        outcome.finish_seconds,
        outcome.workers,
    );
    match &args.output {
        Some(_) => print!("{summary}"),
        None => eprint!("{summary}"),
    }
    Ok(())
}
