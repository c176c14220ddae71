//! The library's error type: every failure says what was wrong and what to do about it.

use std::path::PathBuf;

/// Everything that can go wrong between a command line and a report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the tokenizer gives token type {id}, but the model's token-type table has {rows} rows; the tokenizer does not belong to this checkpoint")]
    TokenTypeOutsideEmbeddings { id: u32, rows: usize },

    #[error("--mixing {given:?} is not a method; choose from {known}, or all")]
    UnknownMixing { given: String, known: String },

    #[error("the text is empty; give a sentence with one [MASK], e.g. \"The author talked to Sara about [MASK] book\"")]
    EmptyText,

    #[error("the text has no {mask} token; put {mask} where the word to predict goes, or choose the position to explain with --target INDEX (tokens: {tokens})")]
    NoMask { mask: String, tokens: String },

    #[error("the text has {count} [MASK] tokens (at positions {positions}); keep one, or choose the position to explain with --target INDEX")]
    SeveralMasks { count: usize, positions: String },

    #[error("--target {target} is out of range: the text encodes to {len} tokens (positions 0 to {last}: {tokens}); pass a position in that range")]
    TargetOutOfRange {
        target: usize,
        len: usize,
        last: usize,
        tokens: String,
    },

    #[error("the candidate {word:?} is not a single wordpiece of this model's vocabulary (it splits into {pieces}); choose words that are one token each")]
    CandidateNotOneWordpiece { word: String, pieces: String },

    #[error("--candidates has an empty word in {given:?}; give comma-separated words, e.g. --candidates his,her")]
    EmptyCandidate { given: String },

    #[error(
        "the text encodes to {len} tokens but the model has only {max} positions; shorten the text"
    )]
    TextTooLong { len: usize, max: usize },

    #[error("the model folder {0} does not exist; pass an existing checkpoint folder, or a Hugging Face Hub id such as bert-base-uncased")]
    FolderNotFound(PathBuf),

    #[error(
        "{path} is not a folder; --model takes a checkpoint folder (with config.json) or a Hub id"
    )]
    NotAFolder { path: PathBuf },

    #[error("{folder} has no {file}; a checkpoint folder needs {needs}")]
    MissingFile {
        folder: PathBuf,
        file: &'static str,
        needs: &'static str,
    },

    #[error("cannot read {path}: {message}; check that it is a valid config.json of its family")]
    Config { path: PathBuf, message: String },

    #[error("{path} describes a {found:?} model, but bert-explain explains the model types {supported}; pick a checkpoint of one of those")]
    UnsupportedArchitecture {
        path: PathBuf,
        found: String,
        supported: String,
    },

    #[error("--pretokenized: the token {token:?} is not in the model's vocabulary; give tokens exactly as the vocabulary spells them, separated by spaces")]
    UnknownToken { token: String },

    #[error("{0}")]
    Request(String),

    #[error("layer {layer} is out of range: the model has layers 1 to {layers}")]
    LayerOutOfRange { layer: usize, layers: usize },

    #[error("{path} describes a causal language model (GPT-2, Llama, Qwen, Gemma, ...), not an encoder; load it as a causal model (the command line and Python's Explainer choose by config.json's model_type)")]
    CausalModelInBertMode { path: PathBuf },

    #[error("cannot read the weights in {path}: {message}; the file may be truncated or corrupt, so download it again")]
    Weights { path: PathBuf, message: String },

    #[error("{path} has no tensor {name}; the checkpoint is incomplete, or not of the family its config.json names")]
    MissingTensor { path: PathBuf, name: String },

    #[error("the tensor {name} in {path} has shape {found:?} but config.json implies {expected:?}; the weights and config.json do not belong together")]
    TensorShape {
        path: PathBuf,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },

    #[error("cannot load the tokenizer from {path}: {message}; check that the file is a valid tokenizer for this model")]
    Tokenizer { path: PathBuf, message: String },

    #[error("the tokenizer cannot encode the text: {0}")]
    Encode(String),

    #[error("{model} (revision {revision}) is not in the Hugging Face cache at {cache} (no {file}), and HF_HUB_OFFLINE is set, so it cannot be downloaded; unset HF_HUB_OFFLINE on a machine with network access, point HF_HOME or HF_HUB_CACHE at a cache that has the model, or pass a local folder with --model")]
    NotInCache {
        model: String,
        revision: String,
        cache: PathBuf,
        file: String,
    },

    #[error("cannot fetch {file} of {model} (revision {revision}) from the Hugging Face Hub: {message}; check the model id and your network, or pass a local folder with --model")]
    Hub {
        model: String,
        revision: String,
        file: String,
        message: String,
    },

    #[error("{0}")]
    Device(String),

    #[error("{what} needs a checkpoint with a prediction head (a masked LM or a classifier), and {model} has none; use one that has, such as bert-base-uncased (for images, google/vit-base-patch16-224)")]
    NeedsMlmHead { what: &'static str, model: String },

    #[error("--label {given:?} is not one of this classifier's labels ({labels}); give a label's name or id")]
    UnknownLabel { given: String, labels: String },

    #[error("{option} applies to {applies}, but {model} is {} {task} model; leave {option} out", article(.task))]
    OptionForOtherTask {
        option: String,
        applies: String,
        model: String,
        task: &'static str,
    },

    #[error(
        "the vocabulary has no {0} token, which blank-out needs; choose another blank token with --blank (unk, mask, or pad: config.json's pad_token_id, for a decoder's classifier)"
    )]
    NoBlankToken(&'static str),

    #[error("--blank pad blanks with config.json's pad_token_id, but the config has none inside the vocabulary; choose --blank unk or mask")]
    NoPadToken,

    #[error("--blank pad is a decoder classifier's blank (config.json's pad_token_id); a causal language model blanks with --blank unk (its unknown token, or end-of-text where it has none) or --blank mask")]
    PadBlankForCausal,

    #[error("--fusion min leaves layer {layer} row {row} with no attention at all (its heads attend to disjoint tokens), so nothing can flow through it; use --fusion mean or max")]
    EmptyFusedRow { layer: usize, row: usize },

    #[error("the attention stack is not usable: {0}")]
    Attention(String),

    #[error("cannot use the attention in {path}: {message}")]
    AttentionFile { path: PathBuf, message: String },

    #[error("--tokens gives {given} tokens but the attention stack has {expected} positions; give one token per position, separated by spaces")]
    TokenCount { given: usize, expected: usize },

    #[error("--attention needs --target INDEX (or a single [MASK] among --tokens) to know which position to explain")]
    NoTargetForAttention,

    #[error(
        "the prompt is empty; give the text to continue, e.g. \"The author talked to Sara about\""
    )]
    EmptyPrompt,

    #[error(
        "--generate 0 asks for no new tokens; give the number of tokens to generate (at least 1)"
    )]
    NothingToGenerate,

    #[error("--figure-token {token} is out of range: --generate {generate} makes tokens 0 to {}; choose one of those", generate.saturating_sub(1))]
    FigureTokenOutOfRange { token: usize, generate: usize },

    #[error("--figure-token {token} is out of range: generation stopped at the end-of-text token after {generated} tokens (0 to {}); choose one of those", generated.saturating_sub(1))]
    FigureTokenPastEnd { token: usize, generated: usize },

    #[error("the prompt encodes to {len} tokens but the model's context holds only {max}; shorten the prompt")]
    PromptTooLong { len: usize, max: usize },

    #[error("the prompt ({prompt} tokens) plus --generate {generate} is more than the model's context of {max} tokens; generate at most {} tokens or shorten the prompt", max.saturating_sub(*prompt))]
    GenerationTooLong {
        prompt: usize,
        generate: usize,
        max: usize,
    },

    #[error("{path} describes a {found:?} model, but generation needs a causal language model (model_type one of {supported}); pick one of those")]
    NotCausal {
        path: PathBuf,
        found: String,
        supported: String,
    },

    #[error("{path} describes a sequence classifier (its architectures), not a language model that generates; it is explained as a classifier is (its labels, --label): load it without --generate")]
    ClassifierAsCausal { path: PathBuf },

    #[error("{option} applies to causal language models (GPT-2, Llama, Qwen, Mistral, Gemma, Phi-3), but {model} is not one (it is a masked LM, a classifier or a bare encoder); leave {option} out, or pass a causal checkpoint with --model")]
    CausalOptionForBert { option: String, model: String },

    #[error("{option} applies to encoders (BERT, RoBERTa and the other masked LMs and classifiers), but {model} is a causal language model (the text is a prompt to continue); leave {option} out")]
    BertOptionForCausal { option: String, model: String },

    #[error("cannot read {path} as a causal LM config: {message}; check that it is a valid config.json of its family")]
    CausalConfig { path: PathBuf, message: String },

    #[error("{what} needs about {needed:.1} GB more memory, and {available:.1} GB is available; {remedy}")]
    Memory {
        what: String,
        needed: f64,
        available: f64,
        remedy: &'static str,
    },

    #[error("{what} is not finite (NaN or infinite); the checkpoint's weights hold NaN or values that overflow: check or download the checkpoint again")]
    NotFinite { what: String },

    #[error("{option} is not used {why}; leave it out")]
    OptionNotUsed { option: String, why: &'static str },

    #[error("this model's vocabulary has no mask token ([MASK] or <mask>), so the text cannot mark the word to predict (tokens: {tokens}); choose the position to explain with --target INDEX")]
    NoMaskToken { tokens: String },

    #[error("the token {token:?} has id {id}, but the model's embedding table has only {rows} rows; the tokenizer and the weights do not belong together")]
    TokenOutsideEmbeddings { token: String, id: u32, rows: usize },

    #[error("the flow was stopped before it was done, as its caller asked")]
    Interrupted,

    #[error("the tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),

    #[error("input/output failed: {0}")]
    Io(#[from] std::io::Error),

    #[error("the image is not a PNG, JPEG, WebP or GIF file (it starts with the bytes {start}); convert it to one of those formats")]
    ImageFormat { start: String },

    #[error("the {format} image cannot be decoded: {message}; the file may be truncated or corrupt: save or download it again, or convert it to PNG")]
    ImageDecode { format: String, message: String },

    #[error("the image is {size}, more than bert-explain takes ({} pixels a side, {} pixels in all); scale it down first (the models see 224 to 518 pixels a side)", crate::image::MAX_SIDE, crate::image::MAX_PIXELS)]
    ImageTooLarge { size: String },

    #[error(
        "cannot read the image {path}: {message}; give the path of a PNG, JPEG, WebP or GIF file"
    )]
    ImageRead { path: PathBuf, message: String },

    #[error("{path}: {source}")]
    InImage { path: PathBuf, source: Box<Error> },

    #[error("this processor would resize the {width}×{height} image to {to_width}×{to_height}, which {problem}; crop the image to a less extreme shape first")]
    ImageResize {
        width: u32,
        height: u32,
        to_width: u32,
        to_height: u32,
        problem: &'static str,
    },

    #[error("cannot read {path} as an image processor config: {message}; check that it is the checkpoint's preprocessor_config.json")]
    ImageProcessorConfig { path: PathBuf, message: String },

    /// What was given does not suit what the model reads (a text for an image model, a
    /// text's option for an image); the message says what to give instead.
    #[error("{0}")]
    InputKind(String),
}

impl Error {
    /// True for mistakes in the command-line input itself (the text, the target, the
    /// candidates), as opposed to problems with files, models or the machine.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::EmptyText
                | Error::NoMask { .. }
                | Error::SeveralMasks { .. }
                | Error::TargetOutOfRange { .. }
                | Error::CandidateNotOneWordpiece { .. }
                | Error::EmptyCandidate { .. }
                | Error::TextTooLong { .. }
                | Error::TokenCount { .. }
                | Error::NoTargetForAttention
                | Error::EmptyPrompt
                | Error::NothingToGenerate
                | Error::FigureTokenOutOfRange { .. }
                | Error::PromptTooLong { .. }
                | Error::GenerationTooLong { .. }
                | Error::CausalOptionForBert { .. }
                | Error::LayerOutOfRange { .. }
                | Error::Request(_)
                | Error::BertOptionForCausal { .. }
                | Error::OptionNotUsed { .. }
                | Error::NoMaskToken { .. }
                | Error::PadBlankForCausal
                | Error::UnknownToken { .. }
                | Error::NeedsMlmHead { .. }
                | Error::UnknownLabel { .. }
                | Error::OptionForOtherTask { .. }
                | Error::UnknownMixing { .. }
                | Error::CausalModelInBertMode { .. }
                | Error::ImageFormat { .. }
                | Error::ImageDecode { .. }
                | Error::ImageTooLarge { .. }
                | Error::ImageRead { .. }
                | Error::ImageResize { .. }
                | Error::InputKind(_)
        ) || matches!(self, Error::InImage { source, .. } if source.is_usage())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// "a" or "an" before `word` (a task's name: masked-lm, encoder, image-classification…).
fn article(word: &str) -> &'static str {
    match word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        true => "an",
        false => "a",
    }
}
