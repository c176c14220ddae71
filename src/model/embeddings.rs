//! BERT's input embeddings: word + position + token type, then LayerNorm.

use candle_core::{Module, Tensor};
use candle_nn::Embedding;

use super::norm::LayerNorm;
use crate::checkpoint::{BertConfig, WeightPath};
use crate::error::Result;

/// `embeddings.*` of a BERT checkpoint.
pub struct Embeddings {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    layer_norm: LayerNorm,
}

impl Embeddings {
    pub fn load(vb: &WeightPath, config: &BertConfig) -> Result<Self> {
        let hidden = config.hidden_size;
        let table = |name: &str, rows: usize| -> Result<Embedding> {
            let weight = vb.pp(name).get("weight", &[rows, hidden])?;
            Ok(Embedding::new(weight, hidden))
        };
        Ok(Self {
            word: table("word_embeddings", config.vocab_size)?,
            position: table("position_embeddings", config.max_position_embeddings)?,
            token_type: table("token_type_embeddings", config.type_vocab_size)?,
            layer_norm: LayerNorm::load(&vb.pp("LayerNorm"), hidden, config.layer_norm_eps)?,
        })
    }

    /// The word embedding table, `[vocab, hidden]` (the tied MLM decoder reuses it).
    pub fn word_table(&self) -> &Tensor {
        self.word.embeddings()
    }

    /// `input_ids`: `[b, n]` u32 → the word embeddings alone, `[b, n, hidden]`.
    pub fn words(&self, input_ids: &Tensor) -> Result<Tensor> {
        Ok(self.word.forward(input_ids)?)
    }

    /// `words`: `[b, n, hidden]` (from [`Self::words`], or any input embeddings) → the
    /// layer input, `[b, n, hidden]`: plus positions and token type 0, then LayerNorm.
    pub fn forward(&self, words: &Tensor) -> Result<Tensor> {
        let (_, n, _) = words.dims3()?;
        let device = words.device();
        let positions = Tensor::arange(0u32, n as u32, device)?.unsqueeze(0)?;
        let types = positions.zeros_like()?;
        let sum = words
            .broadcast_add(&self.position.forward(&positions)?)?
            .broadcast_add(&self.token_type.forward(&types)?)?;
        self.layer_norm.forward(&sum)
    }
}
