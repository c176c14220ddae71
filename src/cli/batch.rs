//! `--input`: batch mode on the command line.

use std::path::Path;

use anyhow::Context;
use bert_explain::batch::{examples, run_batch, Batch, BatchOutcome};
use bert_explain::input::open_regular;
use bert_explain::report::OutputFile;

use super::Args;

/// `--input`: one model, every line of the file (`-`: standard input), a progress bar on
/// stderr, and with `--evaluate` the summary table (on stderr when the reports go to stdout,
/// which `--output -` also means).
pub fn run(args: &Args, input: &Path, batch: Batch) -> anyhow::Result<()> {
    let stdin = is_dash(input);
    let open = || -> anyhow::Result<Box<dyn std::io::BufRead + Send>> {
        if stdin {
            return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
        }
        let file =
            open_regular(input).with_context(|| format!("cannot read {}", input.display()))?;
        Ok(Box::new(std::io::BufReader::new(file)))
    };
    let to_file = args.output.as_deref().filter(|path| !is_dash(path));
    let mut output = match to_file {
        Some(path) => Some(
            OutputFile::create(path, &[input])
                .with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => None,
    };
    let noun = match batch {
        Batch::Encoder(..) => "sentences",
        Batch::Causal(..) => "prompts",
    };
    // A file is read twice, first to count its lines for the bar; standard input once.
    let bar = match stdin {
        true => indicatif::ProgressBar::no_length()
            .with_style(super::bar_style(&format!("{{pos}} {noun}, {{rate}}"))),
        false => indicatif::ProgressBar::new(examples(open()?).count() as u64).with_style(
            super::bar_style(&format!(
                "{{bar:40}} {{pos}}/{{len}} {noun}, {{rate}}, {{eta}} left"
            )),
        ),
    };
    let start = std::time::Instant::now();
    let progress = |done: usize| bar.set_position(done as u64);
    let outcome = match &mut output {
        Some(file) => {
            let mut writer = std::io::BufWriter::new(file.writer());
            run_batch(batch, open()?, &mut writer, progress)?
        }
        None => run_batch(batch, open()?, &mut std::io::stdout().lock(), progress)?,
    };
    if let Some(file) = output {
        let path = file.path().display().to_string();
        file.commit()
            .with_context(|| format!("cannot write {path}"))?;
    }
    bar.finish_and_clear();
    let summary = summary(batch, &outcome, start.elapsed().as_secs_f64());
    match to_file {
        Some(_) => print!("{summary}"),
        None => eprint!("{summary}"),
    }
    Ok(())
}

/// What the run did: with `--evaluate` the correlation table, then the lines, the time and
/// where it went.
fn summary(batch: Batch, outcome: &BatchOutcome, seconds: f64) -> String {
    let (lines, failed) = (outcome.examples, outcome.failed);
    let rate = lines as f64 / seconds.max(1e-9);
    match batch {
        Batch::Encoder(explainer, options, _) => {
            let table = match options.evaluate {
                Some(_) => outcome.summary.to_string(),
                None => String::new(),
            };
            let unit = match explainer.reads_images() {
                true => "images",
                false => "sentences",
            };
            format!(
                "{table}{lines} {unit} ({failed} failed) in {seconds:.2} s: {rate:.1} {unit}/s (forward passes {:.2} s on {}: the model {:.2} s, attention to the host {:.2} s; reports {:.2} s on the host, over {} threads)\n",
                outcome.forward_seconds,
                batch.device_name(),
                outcome.stages.model,
                outcome.stages.to_host,
                outcome.finish_seconds,
                outcome.workers,
            )
        }
        Batch::Causal(_, options, _) => format!(
            "{}{lines} prompts ({failed} failed) in {seconds:.2} s: {rate:.1} prompts/s (generating {:.2} s on {}; explaining {:.2} s on the host, over {} threads)\n",
            match options.evaluate {
                // Each example a generated token.
                Some(_) => format!("Every generated token of every prompt:\n{}", outcome.summary),
                None => String::new(),
            },
            outcome.forward_seconds,
            batch.device_name(),
            outcome.finish_seconds,
            outcome.workers,
        ),
    }
}

/// `-`, which stands for standard input or output.
fn is_dash(path: &Path) -> bool {
    path.as_os_str() == "-"
}
