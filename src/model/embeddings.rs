//! The input embeddings: word + position (+ token type), LayerNorm, and for factorised
//! embeddings (ALBERT, ELECTRA) a projection to the hidden size.

use candle_core::{Module, Tensor};
use candle_nn::Embedding;

use crate::linalg::Dense;

use super::attention::load_linear;
use super::config::EncoderConfig;
use super::family::EmbeddingNames;
use super::norm::LayerNorm;
use crate::checkpoint::WeightPath;
use crate::error::Result;

/// What turns ids into the first layer's input in a post-norm body: BERT's [`Embeddings`], or
/// a family's own (DeBERTa's).
pub trait InputEmbeddings: Send + Sync {
    /// `input_ids`: `[b, n]` u32 → the word embeddings alone, `[b, n, width]`.
    fn words(&self, input_ids: &Tensor) -> Result<Tensor>;

    /// `words`: `[b, n, width]` (from [`Self::words`], or any input embeddings) and the token
    /// types `[b, n]` u32 (`None`: all 0) → the first layer's input, `[b, n, hidden]`.
    fn forward(&self, words: &Tensor, types: Option<&Tensor>) -> Result<Tensor>;

    /// How many tokens the positions allow.
    fn max_tokens(&self) -> usize;

    /// The word embedding table, `[vocab, width]` (tied decoders reuse it).
    fn word_table(&self) -> &Tensor;

    /// Whether only the words reach the norm ([`crate::model::Body::scale_free_words`]).
    fn scale_free(&self) -> bool {
        false
    }

    /// Whether the norm reads the words' sum unprojected
    /// ([`crate::model::Body::shift_free_words`]).
    fn shift_free(&self) -> bool;
}

pub struct Embeddings {
    word: Embedding,
    position: Embedding,
    token_type: Option<Embedding>,
    layer_norm: LayerNorm,
    projection: Option<Dense>,
    position_offset: usize,
}

/// `sum` (`[b, n, width]`) plus each position's token-type embedding from `table`, where the
/// family has token types (`types`: `[b, n]` u32; `None`: all 0).
pub fn add_types(sum: Tensor, table: Option<&Embedding>, types: Option<&Tensor>) -> Result<Tensor> {
    let Some(table) = table else {
        return Ok(sum);
    };
    let added = match types {
        Some(types) => table.forward(types)?,
        // Type 0 everywhere: its row, broadcast.
        None => table.embeddings().get(0)?.unsqueeze(0)?.unsqueeze(0)?,
    };
    Ok(sum.broadcast_add(&added)?)
}

impl Embeddings {
    pub fn load(vb: &WeightPath, names: &EmbeddingNames, config: &EncoderConfig) -> Result<Self> {
        let width = config.embedding_width();
        let table = |name: &str, rows: usize| -> Result<Embedding> {
            let weight = vb.pp(name).get("weight", &[rows, width])?;
            Ok(Embedding::new(weight, width))
        };
        // A checkpoint with token-type embeddings whose config.json says there are none is
        // checked against that count too, and refused: the two do not belong together.
        let token_type = match names.token_type {
            Some(name) if config.type_vocab_size > 0 || vb.holds(name) => {
                Some(table(name, config.type_vocab_size)?)
            }
            _ => None,
        };
        let projection = match names.projection {
            Some(name) if vb.contains(&format!("{name}.weight")) || width != config.hidden_size => {
                Some(load_linear(&vb.pp(name), width, config.hidden_size)?)
            }
            _ => None,
        };
        Ok(Self {
            word: table(names.word, config.vocab_size)?,
            position: table(names.position, config.max_position_embeddings)?,
            token_type,
            layer_norm: LayerNorm::load(&vb.pp(names.norm), width, config.layer_norm_eps)?,
            projection,
            position_offset: (names.position_offset)(config),
        })
    }
}

impl InputEmbeddings for Embeddings {
    /// The LayerNorm comes before any projection.
    fn shift_free(&self) -> bool {
        true
    }

    fn word_table(&self) -> &Tensor {
        self.word.embeddings()
    }

    fn max_tokens(&self) -> usize {
        self.position.embeddings().dims()[0].saturating_sub(self.position_offset)
    }

    fn words(&self, input_ids: &Tensor) -> Result<Tensor> {
        Ok(self.word.forward(input_ids)?)
    }

    fn forward(&self, words: &Tensor, types: Option<&Tensor>) -> Result<Tensor> {
        let (_, n, _) = words.dims3()?;
        let device = words.device();
        let start = self.position_offset as u32;
        let positions = Tensor::arange(start, start + n as u32, device)?.unsqueeze(0)?;
        let sum = words.broadcast_add(&self.position.forward(&positions)?)?;
        let sum = add_types(sum, self.token_type.as_ref(), types)?;
        let normed = self.layer_norm.forward(&sum)?;
        Ok(match &self.projection {
            Some(projection) => projection.forward(&normed)?,
            None => normed,
        })
    }
}
