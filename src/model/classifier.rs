//! Heads that score one position against a few labels: sequence classification (on the
//! first token) and ELECTRA's replaced-token discriminator (on any token).

use crate::linalg::Dense;
use candle_core::{Module, Tensor};

use super::attention::load_linear;
use super::config::{Activation, EncoderConfig};
use super::family::{ClassifierNames, DiscriminatorNames};
use super::layer::activate;
use crate::checkpoint::WeightPath;
use crate::error::Result;

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

    pub fn labels(&self) -> usize {
        self.labels
    }

    /// `hidden`: `[b, hidden]` → logits `[b, labels]`.
    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let x = activate(self.activation, &self.dense.forward(hidden)?)?;
        Ok(self.output.forward(&x)?)
    }
}

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

    /// `hidden`: `[b, hidden]` → logits `[b, 2]`: `[0, d]`, whose softmax is
    /// (p(original), p(replaced)) = (1 - sigmoid(d), sigmoid(d)).
    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let x = activate(self.activation, &self.dense.forward(hidden)?)?;
        let d = self.prediction.forward(&x)?;
        Ok(Tensor::cat(&[d.zeros_like()?, d], 1)?)
    }
}
