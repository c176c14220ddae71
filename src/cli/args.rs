//! The command line's options, as clap parses them.

use std::path::{Path, PathBuf};

use bert_explain::explain::{Grouping, MAX_IG_STEPS};
use bert_explain::methods::Mixing;
use bert_explain::report::Format;
use bert_explain::DeviceChoice;
use clap::{ArgGroup, Parser, ValueEnum};

use super::causal;

/// Explain which input tokens a BERT's prediction at [MASK] rests on: raw attention,
/// attention rollout and attention flow (Abnar & Zuidema, ACL 2020).
#[derive(Parser, Debug)]
#[command(name = "bert-explain", version, about)]
#[command(group(ArgGroup::new("scoring").args(["evaluate", "lrp"]).multiple(true)))]
pub struct Args {
    /// The sentence, with one [MASK] where the word to predict goes; for a GPT-2 model
    /// (config.json model_type "gpt2"), the prompt to continue.
    #[arg(
        required_unless_present_any = ["attention", "input"],
        conflicts_with_all = ["attention", "input"]
    )]
    pub text: Option<String>,

    /// Batch mode: explain every line of a JSON-lines file ({"text": …, optional "target"
    /// and "candidates"}) with one loaded model; one JSON report per line comes out.
    /// `-` reads standard input.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "attention")]
    pub input: Option<PathBuf>,

    /// With --input: write the reports here instead of stdout (`-`: stdout).
    #[arg(long, value_name = "FILE.jsonl", requires = "input")]
    pub output: Option<PathBuf>,

    /// With --input: the most lines of near lengths that share one forward pass (a causal
    /// model's: the prompts that generate together; 1: a line at a time). Long lines make
    /// smaller groups, so that a group's attention stays under 1 GiB.
    #[arg(long, value_name = "N", default_value_t = Grouping::DEFAULT_SIZE,
          value_parser = parse_batch_size, requires = "input")]
    pub batch_size: usize,

    /// Score each token's importance for the predicted word (input gradients, blank-out,
    /// integrated gradients, AttnLRP and CP-LRP), report the Spearman correlation of every
    /// layer of every method with each score, and each map's ERASER faithfulness.
    #[arg(long)]
    pub evaluate: bool,

    /// Score each token's relevance for the explained logit by AttnLRP and CP-LRP alone
    /// (one forward and one backward pass each), and correlate the maps with them.
    #[arg(long)]
    pub lrp: bool,

    /// With --evaluate or --lrp: explain this word instead of the top prediction.
    #[arg(long, value_name = "WORD", requires = "scoring")]
    pub importance_word: Option<String>,

    /// With --evaluate or --lrp on a classifier: explain this label (its name from id2label,
    /// or its id) instead of the top label.
    #[arg(long, value_name = "NAME|ID", requires = "scoring")]
    pub label: Option<String>,

    /// The second text of a pair (NLI, paraphrase), joined as the tokenizer joins pairs.
    #[arg(long, value_name = "TEXT")]
    pub pair: Option<String>,

    /// The text is tokens separated by spaces, each looked up in the vocabulary as it is
    /// (SMILES, protein or DNA tokens); one not in the vocabulary is an error.
    #[arg(long)]
    pub pretokenized: bool,

    /// With --evaluate: the token that blank-out puts in place of each token.
    #[arg(long, value_enum, default_value_t = BlankArg::Unk, requires = "evaluate")]
    pub blank: BlankArg,

    /// With --evaluate or --lrp: leave special tokens ([CLS], [SEP], <s>, ...) out of every
    /// correlation (JSON: evaluation.without_specials); by default every token counts, as in
    /// the paper's code.
    #[arg(long, requires = "scoring")]
    pub correlate_without_specials: bool,

    /// With --evaluate: the points of integrated gradients' Gauss–Legendre rule (more: a
    /// closer completeness check, proportionally slower).
    #[arg(long, value_name = "N", default_value_t = bert_explain::explain::DEFAULT_IG_STEPS,
          value_parser = parse_steps, requires = "evaluate")]
    pub ig_steps: usize,

    /// Explain an attention stack saved by another framework instead of running a model:
    /// a .npy or .safetensors file of shape [layers, heads, n, n] or [layers, n, n].
    #[arg(long, value_name = "FILE")]
    pub attention: Option<PathBuf>,

    /// With --attention: the n tokens, separated by spaces (default: their positions).
    #[arg(long, requires = "attention")]
    pub tokens: Option<String>,

    /// Hugging Face Hub id or a local checkpoint folder.
    #[arg(long, default_value = "bert-base-uncased")]
    pub model: String,

    /// Hub revision (branch, tag or commit).
    #[arg(long, default_value = "main")]
    pub revision: String,

    /// Position to explain (default: the [MASK]).
    #[arg(long)]
    pub target: Option<usize>,

    /// Comma-separated words whose probability to report.
    /// [default: his,her, when the vocabulary has both]
    #[arg(long, value_delimiter = ',')]
    pub candidates: Option<Vec<String>>,

    /// How many top predictions to report.
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,

    /// Print the JSON report on stdout and nothing else there.
    #[arg(long)]
    pub json: bool,

    /// Print every layer's relevance, not just the last layer's.
    #[arg(long)]
    pub layers: bool,

    /// Also compute raw attention, rollout and flow from every position, as the reference's
    /// compute_flows does (JSON: "all_positions").
    #[arg(long)]
    pub all_positions: bool,

    /// Leave attention flow out: the report has raw attention and rollout (and each
    /// --mixing method's layer and rollout maps). Without --flow or --no-flow, an encoder
    /// computes flow for texts of up to 1,024 tokens.
    #[arg(long, conflicts_with = "flow")]
    pub no_flow: bool,

    // Methods beyond attention (SPEC §8), as the registry names them.
    #[arg(long, value_name = "M,M..", help = mixing_help())]
    pub mixing: Option<String>,

    /// How to fuse the heads of a layer.
    #[arg(long, value_enum, default_value_t = Fusion::Mean)]
    pub fusion: Fusion,

    /// Weight α of the residual connection: Â = (1-α)·Ā + α·I.
    #[arg(long, default_value_t = 0.5, value_parser = parse_alpha)]
    pub residual: f64,

    /// Before rollout and flow, set this fraction of each fused layer's entries to zero, the
    /// smallest first, the class token's own entry kept (vit-explain's discard_ratio).
    #[arg(long, default_value_t = 0.0, value_name = "R", value_parser = parse_ratio)]
    pub discard_ratio: f64,

    /// Where the model runs.
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,

    /// Also write the paper's figure (raw, rollout and flow heatmaps and the prediction):
    /// PATH ending in .svg or .png; may be given more than once.
    #[arg(long, value_name = "PATH", value_parser = figure_path, conflicts_with = "input")]
    pub figure: Vec<PathBuf>,

    /// Also write a self-contained interactive HTML report to PATH (.html).
    #[arg(long, value_name = "PATH", value_parser = html_path, conflicts_with = "input")]
    pub html: Option<PathBuf>,

    /// Leave [CLS], [SEP] and punctuation out of every output (JSON too) and renormalise
    /// each layer over the remaining tokens.
    #[arg(long, conflicts_with = "input")]
    pub hide_special: bool,

    /// Colour the --layers grids: auto (when stdout is a terminal and NO_COLOR is unset),
    /// always or never.
    #[arg(long, value_enum, default_value_t = ColorArg::Auto, value_name = "WHEN")]
    pub color: ColorArg,

    #[command(flatten)]
    pub causal: causal::CausalArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

pub(super) fn figure_path(text: &str) -> Result<PathBuf, String> {
    Format::of_figure(Path::new(text)).map(|_| PathBuf::from(text))
}

pub(super) fn html_path(text: &str) -> Result<PathBuf, String> {
    Format::of_html(Path::new(text)).map(|_| PathBuf::from(text))
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum BlankArg {
    Unk,
    Mask,
    /// config.json's pad_token_id (a decoder's classifier).
    Pad,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Fusion {
    Mean,
    Max,
    Min,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum DeviceArg {
    Auto,
    Cpu,
    Cuda,
    Metal,
}

impl From<DeviceArg> for DeviceChoice {
    fn from(device: DeviceArg) -> Self {
        match device {
            DeviceArg::Auto => DeviceChoice::Auto,
            DeviceArg::Cpu => DeviceChoice::Cpu,
            DeviceArg::Cuda => DeviceChoice::Cuda,
            DeviceArg::Metal => DeviceChoice::Metal,
        }
    }
}

pub(super) fn parse_steps(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_IG_STEPS).contains(&n) => Ok(n),
        _ => Err(format!(
            "{text:?} is not a whole number from 1 to {MAX_IG_STEPS}"
        )),
    }
}

pub(super) fn parse_batch_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=Grouping::MAX_SIZE).contains(&n) => Ok(n),
        _ => Err(format!(
            "{text:?} is not a whole number from 1 to {}",
            Grouping::MAX_SIZE
        )),
    }
}

pub(super) fn parse_alpha(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(alpha) if (0.0..=1.0).contains(&alpha) => Ok(alpha),
        _ => Err(format!("{text:?} is not a number between 0 and 1")),
    }
}

/// A fraction in [0, 1): `--discard-ratio`.
pub(super) fn parse_ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(ratio) if (0.0..1.0).contains(&ratio) => Ok(ratio),
        _ => Err(format!(
            "{text:?} is not a fraction from 0 up to (not including) 1"
        )),
    }
}

/// `--mixing`'s help, naming every method there is.
fn mixing_help() -> String {
    format!(
        "Methods beyond attention (SPEC §8), comma-separated: {}, or all; each gets layer, \
         rollout and flow maps (JSON: \"methods\")",
        Mixing::names()
    )
}
