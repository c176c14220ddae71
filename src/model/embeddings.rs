//! BERT's input embeddings: word + position + token type, then LayerNorm.

use candle_core::{Module, Tensor};
use candle_nn::{Embedding, LayerNorm};

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
            layer_norm: load_layer_norm(&vb.pp("LayerNorm"), hidden, config.layer_norm_eps)?,
        })
    }

    /// The word embedding table, `[vocab, hidden]` (the tied MLM decoder reuses it).
    pub fn word_table(&self) -> &Tensor {
        self.word.embeddings()
    }

    /// `input_ids`: `[1, n]` u32 → `[1, n, hidden]`, one sentence of token type 0.
    pub fn forward(&self, input_ids: &Tensor) -> Result<Tensor> {
        let (_, n) = input_ids.dims2()?;
        let device = input_ids.device();
        let positions = Tensor::arange(0u32, n as u32, device)?.unsqueeze(0)?;
        let types = positions.zeros_like()?;
        let sum = self
            .word
            .forward(input_ids)?
            .add(&self.position.forward(&positions)?)?
            .add(&self.token_type.forward(&types)?)?;
        Ok(self.layer_norm.forward(&sum)?)
    }
}

/// A `LayerNorm` with `weight` and `bias` of width `size`.
pub fn load_layer_norm(vb: &WeightPath, size: usize, eps: f64) -> Result<LayerNorm> {
    Ok(LayerNorm::new(
        vb.get("weight", &[size])?,
        vb.get("bias", &[size])?,
        eps,
    ))
}
