//! ELECTRA's discriminator (`ElectraForPreTraining`): was the token at the explained
//! position replaced? One logit d, `replaced` with probability sigmoid(d).

use candle_core::{Module, Tensor};

use super::{Head, HeadKind, Predicts, Reads, Task};
use crate::checkpoint::WeightPath;
use crate::error::Result;
use crate::linalg::Dense;
use crate::model::attention::load_linear;
use crate::model::config::{Activation, EncoderConfig};
use crate::model::family::DiscriminatorNames;
use crate::model::layer::activate;

pub const TASK: Task = Task {
    name: "replaced-token-detection",
    predicts: Predicts::Labels,
    reads: Reads::Target,
    options: &["label"],
    models: "ELECTRA discriminators (original or replaced)",
};

/// Wanted where the family has a discriminator and `architectures` names one, or, without
/// `architectures`, where the tensors hold one.
pub const KIND: HeadKind = HeadKind {
    task: TASK,
    wanted: |found| {
        found.family.discriminator.as_ref().is_some_and(|names| {
            found.config.architecture_ends_with("ForPreTraining")
                || (found.config.architectures.is_empty()
                    && Discriminator::present(found.root, names))
        })
    },
    load: |found| {
        let names = found.family.discriminator.as_ref().ok_or_else(|| {
            candle_core::Error::Msg(format!("{} has no discriminator", found.family.name))
        })?;
        Ok(Box::new(Discriminator::load(
            found.root,
            names,
            found.config,
        )?))
    },
};

/// ELECTRA's discriminator: one logit d per token, `replaced` with probability sigmoid(d).
pub struct Discriminator {
    dense: Dense,
    activation: Activation,
    prediction: Dense,
}

impl Discriminator {
    pub fn present(vb: &WeightPath, names: &DiscriminatorNames) -> bool {
        vb.pp(names.prediction).contains("weight")
    }

    pub fn load(
        vb: &WeightPath,
        names: &DiscriminatorNames,
        config: &EncoderConfig,
    ) -> Result<Self> {
        let hidden = config.hidden_size;
        Ok(Self {
            dense: load_linear(&vb.pp(names.dense), hidden, hidden)?,
            activation: config.hidden_act,
            prediction: load_linear(&vb.pp(names.prediction), hidden, 1)?,
        })
    }
}

impl Head for Discriminator {
    fn task(&self) -> Task {
        TASK
    }

    fn labels(&self) -> usize {
        2
    }

    fn label(&self, id: usize, _: &EncoderConfig) -> String {
        ["original", "replaced"][id].to_string()
    }

    /// `hidden`: `[b, hidden]` → logits `[b, 2]`: `[0, d]`, whose softmax is
    /// (p(original), p(replaced)) = (1 - sigmoid(d), sigmoid(d)).
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let x = activate(self.activation, &self.dense.forward(hidden)?)?;
        let d = self.prediction.forward(&x)?;
        Ok(Tensor::cat(&[d.zeros_like()?, d], 1)?)
    }
}
