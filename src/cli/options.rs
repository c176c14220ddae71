//! Which options apply in which mode: every option given on the command line is either used
//! or refused with a message, never silently ignored.

use clap::parser::ValueSource;
use clap::ArgMatches;

use bert_explain::model::Task;
use bert_explain::Error;

/// What the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A masked-LM (or encoder) checkpoint explains one text.
    Masked,
    /// `--attention FILE`: a saved attention stack, no model.
    Attention,
    /// `--input FILE.jsonl`: many texts through one encoder checkpoint.
    Batch,
    /// A causal checkpoint (GPT-2, Llama, ...) continues the prompt.
    Causal,
    /// `--input FILE.jsonl` with a causal checkpoint: many prompts continued.
    CausalBatch,
}

use Mode::{Attention, Batch, Causal, CausalBatch, Masked};

/// The options of one encoder text besides its outputs (clap's ids, which are Python's
/// keywords and the explorer API's keys).
pub const ENCODER_OPTIONS: &[&str] = &[
    "target",
    "pair",
    "pretokenized",
    "candidates",
    "top_k",
    "all_positions",
    "flow",
    "no_flow",
    "mixing",
    "fusion",
    "residual",
    "discard_ratio",
    "evaluate",
    "lrp",
    "importance_word",
    "label",
    "blank",
    "correlate_without_specials",
    "ig_steps",
];

/// The options of one causal prompt besides its outputs.
pub const CAUSAL_OPTIONS: &[&str] = &[
    "evaluate",
    "lrp",
    "blank",
    "ig_steps",
    "generate",
    "sample",
    "seed",
    "temperature",
    "top_prompt",
    "correction",
    "flow",
    "skip_common",
    "mixing",
    "fusion",
    "residual",
];

/// Each option (clap's id: the field name) and the modes that use it; options missing from
/// the table apply everywhere.
const APPLIES: &[(&str, &[Mode])] = &[
    ("model", &[Masked, Batch, Causal, CausalBatch]),
    ("revision", &[Masked, Batch, Causal, CausalBatch]),
    ("target", &[Masked, Attention, Batch]),
    ("candidates", &[Masked, Batch]),
    ("top_k", &[Masked, Batch]),
    ("evaluate", &[Masked, Batch, Causal, CausalBatch]),
    ("lrp", &[Masked, Batch, Causal, CausalBatch]),
    ("importance_word", &[Masked, Batch]),
    ("blank", &[Masked, Batch, Causal, CausalBatch]),
    ("correlate_without_specials", &[Masked, Batch]),
    ("label", &[Masked, Batch]),
    ("pair", &[Masked, Batch]),
    ("pretokenized", &[Masked, Batch]),
    ("tokens", &[Attention]),
    ("output", &[Batch, CausalBatch]),
    ("batch_size", &[Batch, CausalBatch]),
    ("json", &[Masked, Attention, Causal]),
    ("layers", &[Masked, Attention, Causal]),
    ("all_positions", &[Masked, Attention, Batch]),
    ("mixing", &[Masked, Batch, Causal, CausalBatch]),
    ("figure", &[Masked, Attention, Causal]),
    ("html", &[Masked, Attention, Causal]),
    ("hide_special", &[Masked, Attention]),
    ("color", &[Masked, Attention]),
    ("generate", &[Causal, CausalBatch]),
    ("sample", &[Causal, CausalBatch]),
    ("seed", &[Causal, CausalBatch]),
    ("temperature", &[Causal, CausalBatch]),
    ("top_prompt", &[Causal, CausalBatch]),
    ("correction", &[Causal, CausalBatch]),
    ("no_flow", &[Masked, Attention, Batch]),
    ("skip_common", &[Causal, CausalBatch]),
    ("figure_token", &[Causal]),
    ("discard_ratio", &[Masked, Attention, Batch]),
];

/// The options of an encoder that an image model does not take: a text's, and the blank
/// token (an image is blanked by its mean pixel).
const TEXT_ONLY_OPTIONS: &[&str] = &["pair", "pretokenized", "blank"];

/// The first option given on the command line that `mode` would not use, as a usage error.
pub fn refuse_unused(matches: &ArgMatches, mode: Mode, model: &str) -> Result<(), Error> {
    let given = |id: &str| given(matches, id);
    let unused = APPLIES
        .iter()
        .find(|(id, modes)| given(id) && !modes.contains(&mode));
    if let Some((id, modes)) = unused {
        let option = format!("--{}", id.replace('_', "-"));
        let model = model.to_string();
        return Err(match mode {
            Masked | Batch if modes.iter().all(|m| matches!(m, Causal | CausalBatch)) => {
                Error::CausalOptionForBert { option, model }
            }
            Causal | CausalBatch if !modes.iter().any(|m| matches!(m, Causal | CausalBatch)) => {
                Error::BertOptionForCausal { option, model }
            }
            Causal => Error::OptionNotUsed {
                option,
                why: "without --input",
            },
            CausalBatch => Error::OptionNotUsed {
                option,
                why: "in batch mode (--input), which writes one JSON report per prompt",
            },
            Attention => Error::OptionNotUsed {
                option,
                why: "with --attention, which explains a saved attention stack without running a model",
            },
            Batch => Error::OptionNotUsed {
                option,
                why: "in batch mode (--input), which writes one JSON report per line",
            },
            Masked => Error::OptionNotUsed {
                option,
                why: "without --input or --attention",
            },
        });
    }
    if given("figure_token") && !given("figure") && !given("html") {
        return Err(Error::OptionNotUsed {
            option: "--figure-token".into(),
            why: "without --figure or --html, whose map it chooses",
        });
    }
    Ok(())
}

/// Whether the option with clap's id `id` (the field name) was given on the command line.
pub fn given(matches: &ArgMatches, id: &str) -> bool {
    matches.value_source(id) == Some(ValueSource::CommandLine)
}

/// The first of [`TEXT_ONLY_OPTIONS`] given (`given(id)`), refused for an image model.
pub fn refuse_for_images(given: impl Fn(&str) -> bool, model: &str) -> Result<(), Error> {
    match TEXT_ONLY_OPTIONS.iter().find(|id| given(id)) {
        Some(id) => Err(Error::OptionForOtherTask {
            option: format!("--{}", id.replace('_', "-")),
            applies: "text models (an image is blanked by its mean pixel)".into(),
            model: model.to_string(),
            task: "vision",
        }),
        None => Ok(()),
    }
}

/// Options that only some tasks use (SPEC §7: each task's `options`), refused for the loaded
/// model's task; `given(id)` says whether the option (clap's id, which is also the Python
/// keyword) was given.
pub fn refuse_for_task(given: impl Fn(&str) -> bool, task: Task, model: &str) -> Result<(), Error> {
    let mut others = Task::all().flat_map(|t| t.options.iter().copied());
    match others.find(|id| given(id) && !task.options.contains(id)) {
        Some(id) => Err(Error::OptionForOtherTask {
            option: format!("--{}", id.replace('_', "-")),
            applies: (Task::all().filter(|t| t.options.contains(&id)))
                .map(|t| t.models)
                .collect::<Vec<_>>()
                .join(" and "),
            model: model.to_string(),
            task: task.name,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::cli::args::Args;

    fn task(name: &str) -> Task {
        Task::all().find(|t| t.name == name).unwrap()
    }

    #[test]
    fn every_task_option_is_a_command_line_option() {
        let command = Args::command();
        for task in Task::all() {
            for id in task.options {
                let known = command.get_arguments().any(|a| a.get_id() == *id);
                assert!(known, "{}: {id}", task.name);
            }
        }
    }

    #[test]
    fn an_option_of_other_tasks_is_refused_naming_them() {
        let given = |id: &str| id == "label";
        let masked = task("masked-lm");
        let message = refuse_for_task(given, masked, "m").unwrap_err().to_string();
        assert_eq!(
            message,
            "--label applies to classifiers (labels) and ELECTRA discriminators (original or \
             replaced) and image classifiers (labels), but m is a masked-lm model; leave \
             --label out"
        );
        assert!(refuse_for_task(given, task("sequence-classification"), "m").is_ok());
        assert!(refuse_for_task(|id| id == "top_k", task("encoder"), "m").is_err());
        assert!(refuse_for_task(|id| id == "fusion", task("encoder"), "m").is_ok());
    }
}
