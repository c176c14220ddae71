//! Sequence classification (`*ForSequenceClassification`): one label for the text, read
//! at its first token through dense + activation and the projection onto the labels.

use candle_core::{Module, Tensor};

use super::{Head, HeadKind, Predicts, Reads, Task};
use crate::checkpoint::WeightPath;
use crate::error::Result;
use crate::linalg::Dense;
use crate::model::attention::load_linear_with;
use crate::model::config::{Activation, EncoderConfig};
use crate::model::family::ClassifierNames;
use crate::model::layer::activate;
use crate::model::norm::LayerNorm;

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

/// The same task read from every token's average (ModernBERT's mean pooling).
const MEAN_POOLED: Task = Task {
    reads: Reads::Mean,
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
                && !super::masked_lm::MaskedLmHead::present(found.root, found.family.masked_lm))
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
    norm: Option<LayerNorm>,
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
        let dense_bias = config.classifier_bias.unwrap_or(true);
        let norm_bias = config.norm_bias.unwrap_or(true);
        let eps = config.layer_norm_eps;
        let reads = match config.classifier_pooling.as_deref() {
            Some("mean") => Reads::Mean,
            _ => names.reads,
        };
        Ok(Self {
            dense: names
                .dense
                .map(|dense| load_linear_with(&vb.pp(dense), hidden, hidden, dense_bias))
                .transpose()?,
            activation: names.activation,
            norm: names
                .norm
                .map(|norm| LayerNorm::load_with(&vb.pp(norm), hidden, eps, norm_bias))
                .transpose()?,
            output: Dense::new(output.get("weight", &[labels, hidden])?, bias),
            labels,
            reads,
        })
    }
}

impl Head for ClassificationHead {
    fn task(&self) -> Task {
        match self.reads {
            Reads::Last => LAST_TOKEN,
            Reads::Mean => MEAN_POOLED,
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
        let x = match &self.norm {
            Some(norm) => norm.forward(&x)?,
            None => x,
        };
        Ok(self.output.forward(&x)?)
    }
}
