//! The masked-LM head: transform, LayerNorm, and the decoder onto the vocabulary.

use candle_core::{Module, Tensor};
use candle_nn::Linear;

use super::attention::load_linear;
use super::layer::activate;
use super::norm::LayerNorm;
use crate::checkpoint::{Activation, BertConfig, WeightPath};
use crate::error::Result;

/// `cls.predictions.*`.
pub struct MlmHead {
    dense: Linear,
    layer_norm: LayerNorm,
    decoder: Linear,
    activation: Activation,
}

impl MlmHead {
    /// Whether the checkpoint has a masked-LM head at all.
    pub fn present(vb: &WeightPath) -> bool {
        vb.contains("bias") || vb.contains("transform.dense.weight")
    }

    /// `word_table` (`[vocab, hidden]`) is the decoder weight when the checkpoint ties it
    /// to the word embeddings and so does not store `decoder.weight` (bert-base-uncased).
    pub fn load(vb: &WeightPath, config: &BertConfig, word_table: &Tensor) -> Result<Self> {
        let (hidden, vocab) = (config.hidden_size, config.vocab_size);
        let transform = vb.pp("transform");
        let decoder = vb.pp("decoder");
        let weight = if decoder.contains("weight") {
            decoder.get("weight", &[vocab, hidden])?
        } else {
            word_table.clone()
        };
        // transformers adds decoder.bias when it exists; otherwise it is tied to `bias`.
        let bias = if decoder.contains("bias") {
            decoder.get("bias", &[vocab])?
        } else {
            vb.get("bias", &[vocab])?
        };
        Ok(Self {
            dense: load_linear(&transform.pp("dense"), hidden, hidden)?,
            layer_norm: LayerNorm::load(&transform.pp("LayerNorm"), hidden, config.layer_norm_eps)?,
            decoder: Linear::new(weight, Some(bias)),
            activation: config.hidden_act,
        })
    }

    /// `hidden`: `[b, hidden]` → logits `[b, vocab]`.
    pub fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let x = activate(self.activation, &self.dense.forward(hidden)?)?;
        Ok(self.decoder.forward(&self.layer_norm.forward(&x)?)?)
    }
}
