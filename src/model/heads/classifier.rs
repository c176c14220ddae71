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

/// The same task read at the last token (a decoder's classifier).
const LAST_TOKEN: Task = Task {
    reads: Reads::Last,
    ..TASK
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

/// dense + activation on one hidden state (where the family has them), then the projection
/// onto the labels.
pub struct ClassificationHead {
    dense: Option<Dense>,
    activation: Activation,
    output: Dense,
    labels: usize,
    reads: Reads,
}

impl ClassificationHead {
    pub fn present(vb: &WeightPath, names: &ClassifierNames) -> bool {
        vb.pp(names.output).contains("weight")
    }

    pub fn load(vb: &WeightPath, names: &ClassifierNames, config: &EncoderConfig) -> Result<Self> {
        let hidden = config.hidden_size;
        let labels = config.num_labels.unwrap_or(config.id2label.len().max(2));
        let output = vb.pp(names.output);
        // An encoder's projection has a bias; a decoder's `score` has none.
        let bias = match names.dense {
            Some(_) => Some(output.get("bias", &[labels])?),
            None => None,
        };
        Ok(Self {
            dense: names
                .dense
                .map(|dense| load_linear(&vb.pp(dense), hidden, hidden))
                .transpose()?,
            activation: names.activation,
            output: Dense::new(output.get("weight", &[labels, hidden])?, bias),
            labels,
            reads: names.reads,
        })
    }
}

impl Head for ClassificationHead {
    fn task(&self) -> Task {
        match self.reads {
            Reads::Last => LAST_TOKEN,
            _ => TASK,
        }
    }

    fn labels(&self) -> usize {
        self.labels
    }

    /// `hidden`: `[b, hidden]` → logits `[b, labels]`.
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let x = match &self.dense {
            Some(dense) => activate(self.activation, &dense.forward(hidden)?)?,
            None => hidden.clone(),
        };
        Ok(self.output.forward(&x)?)
    }
}
