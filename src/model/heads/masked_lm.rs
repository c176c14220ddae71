//! The masked-LM head (`*ForMaskedLM`): a word at the mask, through dense, activation,
//! LayerNorm, and the decoder onto the vocabulary.

use candle_core::{Module, Tensor};

use super::{Head, HeadKind, Predicts, Reads, Task};
use crate::checkpoint::WeightPath;
use crate::error::Result;
use crate::linalg::Dense;
use crate::model::attention::load_linear_with;
use crate::model::config::{Activation, EncoderConfig};
use crate::model::family::MaskedLmNames;
use crate::model::layer::activate;
use crate::model::norm::LayerNorm;

pub const TASK: Task = Task {
    name: "masked-lm",
    predicts: Predicts::Words,
    reads: Reads::Target,
    options: &["candidates", "top_k", "importance_word"],
    models: "masked-LM models (a word at the mask)",
};

/// Wanted where the checkpoint holds any of the head's tensors.
pub const KIND: HeadKind = HeadKind {
    task: TASK,
    wanted: |found| MaskedLmHead::present(found.root, found.family.masked_lm),
    load: |found| {
        let names = MaskedLmHead::held(found.root, found.family.masked_lm)
            .unwrap_or(&found.family.masked_lm[0]);
        let head = MaskedLmHead::load(found.root, names, found.config, found.word_table)?;
        Ok(Box::new(head))
    },
};

pub struct MaskedLmHead {
    dense: Dense,
    layer_norm: LayerNorm,
    decoder: Dense,
    activation: Activation,
}

impl MaskedLmHead {
    /// Whether the checkpoint holds any of this head's tensors, under any of the family's
    /// names: then [`Self::load`] wants all of them, so that a head cut short is refused
    /// instead of left out.
    pub fn present(vb: &WeightPath, names: &[MaskedLmNames]) -> bool {
        Self::held(vb, names).is_some()
    }

    /// The first of the family's names under which the checkpoint holds any of the head's
    /// tensors.
    fn held<'a>(vb: &WeightPath, names: &'a [MaskedLmNames]) -> Option<&'a MaskedLmNames> {
        names.iter().find(|names| {
            [names.dense, names.norm, names.decoder, names.bias]
                .iter()
                .any(|name| vb.holds(name))
        })
    }

    /// `word_table` (`[vocab, width]`) is the decoder weight when the checkpoint ties it to
    /// the word embeddings and so does not store it (bert-base-uncased, DistilBERT, ALBERT).
    pub fn load(
        vb: &WeightPath,
        names: &MaskedLmNames,
        config: &EncoderConfig,
        word_table: &Tensor,
    ) -> Result<Self> {
        let (hidden, width, vocab) = (
            config.hidden_size,
            config.embedding_width(),
            config.vocab_size,
        );
        let decoder = vb.pp(names.decoder);
        let weight = if decoder.contains("weight") {
            decoder.get("weight", &[vocab, width])?
        } else {
            word_table.clone()
        };
        // transformers adds decoder.bias when it exists; otherwise it is tied to `bias`.
        let bias = if decoder.contains("bias") {
            decoder.get("bias", &[vocab])?
        } else {
            vb.get(names.bias, &[vocab])?
        };
        Ok(Self {
            dense: load_linear_with(
                &vb.pp(names.dense),
                hidden,
                width,
                config.classifier_bias.unwrap_or(true),
            )?,
            layer_norm: LayerNorm::load_with(
                &vb.pp(names.norm),
                width,
                config.layer_norm_eps,
                config.norm_bias.unwrap_or(true),
            )?,
            decoder: Dense::new(weight, Some(bias)),
            activation: names.activation.unwrap_or(config.hidden_act),
        })
    }
}

impl Head for MaskedLmHead {
    fn task(&self) -> Task {
        TASK
    }

    /// `hidden`: `[b, hidden]` → logits `[b, vocab]`.
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let x = activate(self.activation, &self.dense.forward(hidden)?)?;
        Ok(self.decoder.forward(&self.layer_norm.forward(&x)?)?)
    }
}
