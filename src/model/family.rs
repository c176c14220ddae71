//! A model family: how one kind of checkpoint spells its tensors and what sets it apart.
//! Every encoder family's layers compute the same post-LayerNorm block, so an encoder family
//! is data (its names, in the style of candle's `vb.pp(...)`) plus a few config defaults;
//! adding one is one file in `families/` and one line in `FAMILIES` (families/mod.rs). A
//! decoder family brings its own body (`causal::Decoder`), one file and one line in `DECODERS`.

use std::path::Path;

use super::body::Body;
use super::config::{Activation, EncoderConfig};
pub use super::heads::{ImageClassifierNames, Pool};
use crate::checkpoint::Weights;
use crate::error::Result;

/// Which body a family's checkpoints have.
#[derive(Clone, Copy)]
pub enum BodyKind {
    /// BERT's post-LayerNorm block, with the family's names ([`Family::embeddings`],
    /// [`Family::layer`]).
    PostNorm,
    /// A block of its own, built from the tensors and the config.json at the path; the
    /// family's embedding and layer names are then unused.
    Own(fn(&Weights, &Path) -> Result<Box<dyn Body>>),
}

/// One family of encoder checkpoints. Tensor names are relative to the body, after the
/// `base` prefix that task checkpoints put before it (`bert.`, `roberta.`, ...).
pub struct Family {
    /// What the report calls it (its main `model_type`).
    pub name: &'static str,
    pub model_types: &'static [&'static str],
    pub base: &'static str,
    /// Family defaults that config.json leaves out.
    pub adjust: fn(&mut EncoderConfig),
    pub body: BodyKind,
    pub embeddings: EmbeddingNames,
    pub layer: LayerNames,
    /// The masked-LM head's names, in the order tried: the first the checkpoint holds.
    pub masked_lm: &'static [MaskedLmNames],
    pub classifier: ClassifierNames,
    /// ELECTRA's replaced-token detector.
    pub discriminator: Option<DiscriminatorNames>,
    /// An image family's (`None`: the family reads text).
    pub image: Option<ImageNames>,
}

/// What an image family's checkpoints may classify with, tried in order.
pub struct ImageNames {
    pub classifiers: &'static [ImageClassifierNames],
}

pub struct EmbeddingNames {
    pub word: &'static str,
    pub position: &'static str,
    /// `None`: the family has no token types (DistilBERT).
    pub token_type: Option<&'static str>,
    pub norm: &'static str,
    /// From the embedding width to the hidden size, where they differ (ALBERT, ELECTRA).
    pub projection: Option<&'static str>,
    /// The first position id (RoBERTa counts from padding_idx + 1).
    pub position_offset: fn(&EncoderConfig) -> usize,
}

pub struct LayerNames {
    /// Where layer i's tensors are (ALBERT: the same shared layer for every i).
    pub prefix: fn(usize) -> String,
    pub query: &'static str,
    pub key: &'static str,
    pub value: &'static str,
    pub attention_output: &'static str,
    pub attention_norm: &'static str,
    pub ffn_in: &'static str,
    pub ffn_out: &'static str,
    pub output_norm: &'static str,
}

/// dense (hidden → embedding width), activation, LayerNorm, decoder onto the vocabulary.
pub struct MaskedLmNames {
    pub dense: &'static str,
    pub norm: &'static str,
    /// `<decoder>.weight` may be missing (tied to the word embeddings).
    pub decoder: &'static str,
    /// The output bias when `<decoder>.bias` is missing.
    pub bias: &'static str,
    /// `None`: the config's `hidden_act`.
    pub activation: Option<Activation>,
}

/// dense on one token's hidden state, activation, then the output projection.
pub struct ClassifierNames {
    /// `None`: the projection reads the hidden state itself (a decoder's `score`).
    pub dense: Option<&'static str>,
    pub activation: Activation,
    /// A LayerNorm after the activation (ModernBERT's `head.norm`).
    pub norm: Option<&'static str>,
    /// With a bias where there is a dense layer.
    pub output: &'static str,
    /// The token read: the first (an encoder's [CLS]) or the last (a decoder's).
    pub reads: super::Reads,
}

pub struct DiscriminatorNames {
    pub dense: &'static str,
    pub prediction: &'static str,
}

/// The first position id 0.
pub fn from_zero(_: &EncoderConfig) -> usize {
    0
}

/// BERT's embedding names, which every family but DistilBERT shares.
pub const BERT_EMBEDDINGS: EmbeddingNames = EmbeddingNames {
    word: "embeddings.word_embeddings",
    position: "embeddings.position_embeddings",
    token_type: Some("embeddings.token_type_embeddings"),
    norm: "embeddings.LayerNorm",
    projection: None,
    position_offset: from_zero,
};

/// BERT's layer names, which RoBERTa and ELECTRA share.
pub const BERT_LAYER: LayerNames = LayerNames {
    prefix: |i| format!("encoder.layer.{i}"),
    query: "attention.self.query",
    key: "attention.self.key",
    value: "attention.self.value",
    attention_output: "attention.output.dense",
    attention_norm: "attention.output.LayerNorm",
    ffn_in: "intermediate.dense",
    ffn_out: "output.dense",
    output_norm: "output.LayerNorm",
};

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family").field("name", &self.name).finish()
    }
}
