//! Sequence classification (`*ForSequenceClassification`): one label for the text, read
//! at its first token through dense + activation and the projection onto the labels.

use candle_core::{Module, Tensor};

use super::{Head, HeadKind, Predicts, Reads, Task};
use crate::checkpoint::WeightPath;
use crate::error::Result;
use crate::linalg::Dense;
use crate::model::attention::load_linear;
use crate::model::config::{Activation, EncoderConfig};
use crate::model::family::ClassifierNames;
use crate::model::layer::activate;

pub const TASK: Task = Task {
    name: "sequence-classification",
    predicts: Predicts::Labels,
    reads: Reads::First,
    options: &["label"],
    models: "classifiers (labels)",
};

/// Wanted where `architectures` names a sequence classifier, or, without `architectures`,
/// where the tensors hold a classifier and no masked-LM head.
pub const KIND: HeadKind = HeadKind {
    task: TASK,
    wanted: |found| {
        found
            .config
            .architecture_ends_with("ForSequenceClassification")
            || (found.config.architectures.is_empty()
                && ClassificationHead::present(found.root, &found.family.classifier)
                && !super::masked_lm::MaskedLmHead::present(found.root, &found.family.masked_lm))
    },
    load: |found| {
        let head = ClassificationHead::load(found.root, &found.family.classifier, found.config)?;
        Ok(Box::new(head))
    },
};

/// dense + activation on one hidden state, then the projection onto the labels.
pub struct ClassificationHead {
    dense: Dense,
    activation: Activation,
    output: Dense,
    labels: usize,
}

impl ClassificationHead {
    pub fn present(vb: &WeightPath, names: &ClassifierNames) -> bool {
        vb.pp(names.output).contains("weight")
    }

    pub fn load(vb: &WeightPath, names: &ClassifierNames, config: &EncoderConfig) -> Result<Self> {
        let hidden = config.hidden_size;
        let labels = config.num_labels.unwrap_or(config.id2label.len().max(2));
        Ok(Self {
            dense: load_linear(&vb.pp(names.dense), hidden, hidden)?,
            activation: names.activation,
            output: load_linear(&vb.pp(names.output), hidden, labels)?,
            labels,
        })
    }
}

impl Head for ClassificationHead {
    fn task(&self) -> Task {
        TASK
    }

    fn labels(&self) -> usize {
        self.labels
    }

    /// `hidden`: `[b, hidden]` → logits `[b, labels]`.
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let x = activate(self.activation, &self.dense.forward(hidden)?)?;
        Ok(self.output.forward(&x)?)
    }
}
