//! BertForMaskedLM's forward pass, keeping every layer's attention probabilities
//! (candle-transformers' BERT discards them, and they are what the explainer needs).

mod attention;
mod embeddings;
mod head;
mod layer;
mod norm;

use candle_core::{IndexOp, Tensor};

use crate::checkpoint::{BertConfig, Weights};
use crate::error::Result;
use embeddings::Embeddings;
use head::MlmHead;
pub(crate) use layer::activate;
use layer::Layer;

/// A BERT encoder with its masked-LM head when the checkpoint has one.
pub struct BertForMaskedLm {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    head: Option<MlmHead>,
}

/// What one forward pass over a batch of b sequences yields.
pub struct MaskedLmOutput {
    /// `[b, vocab]`: the MLM logits at the target position; `None` without an MLM head.
    pub logits: Option<Tensor>,
    /// One `[b, heads, n, n]` tensor per layer, first layer first.
    pub attentions: Vec<Tensor>,
}

impl BertForMaskedLm {
    /// Builds the model from canonical tensor names (see [`Weights`]).
    pub fn load(weights: &Weights, config: &BertConfig) -> Result<Self> {
        let root = weights.pp("");
        let embeddings = Embeddings::load(&root.pp("embeddings"), config)?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(&root.pp("encoder.layer").pp(&i.to_string()), config))
            .collect::<Result<Vec<_>>>()?;
        let head_path = root.pp("cls.predictions");
        let head = if MlmHead::present(&head_path) {
            Some(MlmHead::load(&head_path, config, embeddings.word_table())?)
        } else {
            None
        };
        Ok(Self {
            embeddings,
            layers,
            head,
        })
    }

    /// The device the weights live on.
    pub fn device(&self) -> &candle_core::Device {
        self.embeddings.word_table().device()
    }

    /// Whether predictions are available.
    pub fn has_mlm_head(&self) -> bool {
        self.head.is_some()
    }

    /// `input_ids`: `[b, n]` u32 → the word embeddings, `[b, n, hidden]`, the input that
    /// gradients are taken with respect to.
    pub fn embed_words(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.embeddings.words(input_ids)
    }

    /// `input_ids`: `[b, n]` u32, each sequence filling all n positions (no padding);
    /// `target` < n is where the logits are taken.
    pub fn forward(&self, input_ids: &Tensor, target: usize) -> Result<MaskedLmOutput> {
        self.forward_words(&self.embed_words(input_ids)?, target)
    }

    /// The same from word embeddings `[b, n, hidden]`, so that gradients can reach them.
    pub fn forward_words(&self, words: &Tensor, target: usize) -> Result<MaskedLmOutput> {
        let mut hidden = self.embeddings.forward(words)?;
        let mut attentions = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let (next, probs) = layer.forward(&hidden)?;
            hidden = next;
            attentions.push(probs);
        }
        let logits = match &self.head {
            Some(head) => Some(head.forward(&hidden.i((.., target, ..))?)?),
            None => None,
        };
        Ok(MaskedLmOutput { logits, attentions })
    }
}
