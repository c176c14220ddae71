//! The causal-LM part of the command line: causal checkpoints (config.json model_type "gpt2",
//! "llama", "qwen2" or "mistral") generate from the prompt and explain each generated token (issue 6).

use bert_explain::causal::{CausalExplainer, CausalMethods, CausalOptions, Decoding};
use bert_explain::report::{Explained, GeneratedView};
use bert_explain::{Error, ExplainOptions, ModelSource};

/// Options for causal language models; a causal `--model` selects this mode.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(
    next_help_heading = "Causal language models (GPT-2, Llama, Qwen, Mistral, Gemma, Phi-3: the text is the prompt)"
)]
pub struct CausalArgs {
    /// How many tokens to generate after the prompt [default: 10]. Generation stops early at
    /// the end-of-text token.
    #[arg(long, value_name = "N")]
    pub generate: Option<usize>,

    /// Sample the next token instead of taking the most probable one (greedy).
    #[arg(long)]
    pub sample: bool,

    /// With --sample: the seed (the same seed gives the same tokens) [default: from the clock,
    /// printed in the report].
    #[arg(long, value_name = "S", requires = "sample")]
    pub seed: Option<u64>,

    /// With --sample: divide the logits by T before the softmax [default: 1].
    #[arg(long, value_name = "T", requires = "sample", value_parser = parse_temperature)]
    pub temperature: Option<f64>,

    /// How many prompt tokens to list for each generated token [default: 3].
    #[arg(long, value_name = "K")]
    pub top_prompt: Option<usize>,

    /// Correct rollout for the causal mask's receptive fields: divide by the rollout of
    /// uniform causal attention and renormalise over the prompt; rankings use it.
    #[arg(long)]
    pub correction: bool,

    /// Compute attention flow: a causal model's for every generated token (slow for long
    /// texts), an encoder's at any length (without it, only up to 1,024 tokens).
    #[arg(long)]
    pub flow: bool,

    /// Leave common words and punctuation out of the rankings.
    #[arg(long)]
    pub skip_common: bool,

    /// With --figure or --html: the generated token (0-based) whose layer × prompt map is
    /// drawn [default: the last].
    #[arg(long, value_name = "K")]
    pub figure_token: Option<usize>,
}

impl CausalArgs {
    /// The library's options for these choices, with those it shares with an encoder's
    /// (`shared`: head fusion, residual, the `--mixing` methods); with `--sample` and no
    /// `--seed`, the seed comes from the clock.
    pub fn options(&self, shared: &ExplainOptions) -> CausalOptions {
        let decoding = match self.sample {
            true => Decoding::Sample {
                seed: self.seed.unwrap_or_else(clock_seed),
                temperature: self.temperature.unwrap_or(1.0),
            },
            false => Decoding::Greedy,
        };
        let defaults = CausalOptions::default();
        CausalOptions {
            generate: self.generate.unwrap_or(defaults.generate),
            decoding,
            methods: CausalMethods {
                relevance: shared.relevance,
                correction: self.correction,
                flow: self.flow,
            },
            top_prompt: self.top_prompt.unwrap_or(defaults.top_prompt),
            skip_common: self.skip_common,
            mixings: shared.mixing.clone().unwrap_or_default(),
            progress: None,
            evaluate: shared.evaluate.clone(),
        }
    }
}

/// The options every line of a batch starts from; with --sample and no --seed, says on
/// stderr which seed the clock gave.
pub fn batch_options(args: &CausalArgs, shared: &ExplainOptions) -> CausalOptions {
    let options = args.options(shared);
    say_seed(args, &options);
    options
}

/// With --sample and no --seed: the seed the clock gave, for running the same again.
fn say_seed(args: &CausalArgs, options: &CausalOptions) {
    if let (Decoding::Sample { seed, .. }, None) = (options.decoding, args.seed) {
        eprintln!("Sampling with seed {seed}; pass --seed {seed} to get the same tokens again.");
    }
}

/// Generates from `prompt` with the causal checkpoint `source` and explains each generated
/// token with attention and the `--mixing` methods (the options were checked against the
/// mode already): the report, shown at `--figure-token`.
pub fn explain(
    source: &ModelSource,
    prompt: &str,
    args: &CausalArgs,
    shared: &ExplainOptions,
    device: &candle_core::Device,
) -> anyhow::Result<Explained> {
    // Once: the default seed comes from the clock.
    let options = CausalOptions {
        progress: Some(super::flow_progress()),
        ..args.options(shared)
    };
    let generate = options.generate;
    if let Some(token) = args.figure_token.filter(|&k| k >= generate) {
        return Err(Error::FigureTokenOutOfRange { token, generate }.into());
    }
    eprintln!("Loading {source} (causal LM: generating from the prompt)");
    let explainer = CausalExplainer::load(source, device)?;
    let report = explainer.explain(prompt, &options)?;
    say_seed(args, &options);
    Ok(Explained::from(GeneratedView::new(
        report,
        args.figure_token,
    )?))
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn parse_temperature(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(t) if t > 0.0 && t.is_finite() => Ok(t),
        _ => Err(format!("{text:?} is not a positive number")),
    }
}
