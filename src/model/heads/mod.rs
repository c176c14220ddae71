//! Task heads (SPEC §7): what an encoder predicts from its last hidden states, and what that
//! means for explaining it. A task is one file here (its [`Task`], when a checkpoint wants
//! its head, and the head) and one line in [`HEADS`].

mod classifier;
mod discriminator;
mod image_classifier;
mod masked_lm;

use candle_core::Tensor;

use super::config::EncoderConfig;
use super::family::Family;
use crate::checkpoint::WeightPath;
use crate::error::Result;

/// Every head, in the order they are tried: the first one a checkpoint wants is loaded.
pub const HEADS: [HeadKind; 4] = [
    classifier::KIND,
    discriminator::KIND,
    masked_lm::KIND,
    image_classifier::KIND,
];

pub use image_classifier::{ImageClassifierNames, Pool};

/// What a head predicts, as the report names it, and what that means for explaining it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// The report's `task`.
    pub name: &'static str,
    pub predicts: Predicts,
    pub reads: Reads,
    /// The options (clap's ids, Python's keywords) that only this task's models take.
    pub options: &'static [&'static str],
    /// This task's models, as messages name them.
    pub models: &'static str,
}

/// What a prediction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Predicts {
    /// Nothing: a checkpoint without a head.
    Nothing,
    /// A word of the vocabulary (candidates and top words).
    Words,
    /// One of a few labels.
    Labels,
}

/// Where the head reads the hidden states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// At the explained position: a mask token unless one is given.
    Target,
    /// At the first token, whatever position is explained (the first one unless given); a
    /// mask token in the text is just a token.
    First,
    /// At the last token, as First otherwise (a decoder's classifier: the last token is the
    /// one that has seen the whole text).
    Last,
    /// The average of every token's (ModernBERT's `classifier_pooling: mean`), as First
    /// otherwise: the maps are the first token's unless another position is given.
    Mean,
    /// Every token's: the head pools them its own way (an image classifier), as First
    /// otherwise.
    Whole,
}

impl Task {
    /// A checkpoint with no head: relevances only.
    pub const ENCODER: Task = Task {
        name: "encoder",
        predicts: Predicts::Nothing,
        reads: Reads::Target,
        options: &[],
        models: "encoders with no head",
    };

    /// Every task an encoder can have.
    pub fn all() -> impl Iterator<Item = Task> {
        HEADS.iter().map(|kind| kind.task).chain([Task::ENCODER])
    }

    pub fn has_head(self) -> bool {
        self.predicts != Predicts::Nothing
    }
}

/// A loaded head.
pub trait Head: Send + Sync {
    fn task(&self) -> Task;

    /// `hidden`: `[b, hidden]`, where the head reads (`[b, n, hidden]`, every token's, for
    /// [`Reads::Whole`]) → logits `[b, classes]`.
    fn forward(&self, hidden: &Tensor) -> Result<Tensor>;

    /// How many labels it chooses from (0 for words).
    fn labels(&self) -> usize {
        0
    }

    /// The name of label `id`: config.json's `id2label`, unless the task fixes its labels.
    fn label(&self, id: usize, config: &EncoderConfig) -> String {
        config.label_name(id)
    }
}

/// What a checkpoint holds, as a head's kind looks at it.
pub struct Found<'a> {
    /// The checkpoint's tensors, from the top.
    pub root: &'a WeightPath<'a>,
    pub family: &'static Family,
    pub config: &'a EncoderConfig,
    /// `[vocab, width]`: the word embeddings, which a head may share.
    pub word_table: &'a Tensor,
}

/// How a task's head is found in a checkpoint and loaded.
pub struct HeadKind {
    pub task: Task,
    /// Whether the checkpoint asks for this head (`architectures`, else its tensors).
    pub wanted: fn(&Found) -> bool,
    pub load: fn(&Found) -> Result<Box<dyn Head>>,
}

/// The head the checkpoint wants, loaded; `None` where it wants none.
pub fn load_head(found: &Found) -> Result<Option<Box<dyn Head>>> {
    HEADS
        .iter()
        .find(|kind| (kind.wanted)(found))
        .map(|kind| (kind.load)(found))
        .transpose()
}
