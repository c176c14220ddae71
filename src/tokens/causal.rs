//! A causal model's tokenizer: byte-level BPE (tokenizer.json, or GPT-2's vocab.json +
//! merges.txt), found as every checkpoint's files are (`CheckpointFiles`).

use std::collections::HashMap;
use std::path::Path;

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use super::tokenizer_json;
use crate::checkpoint::TokenizerFiles;
use crate::error::{Error, Result};
use crate::input::{read_text_capped, TOKENIZER_LIMIT};

const EOS: &str = "<|endoftext|>";

/// GPT-2's tokenizer from its two original files: byte-level pre-tokenizer and decoder.
fn vocab_merges(vocab: &Path, merges: &Path) -> Result<Tokenizer> {
    let bad = |path: &Path, message: String| Error::Tokenizer {
        path: path.to_path_buf(),
        message,
    };
    let text =
        |path: &Path| read_text_capped(path, TOKENIZER_LIMIT).map_err(|e| bad(path, e.to_string()));
    let words: HashMap<String, u32> =
        serde_json::from_str(&text(vocab)?).map_err(|e| bad(vocab, e.to_string()))?;
    let pairs = text(merges)?
        .lines()
        .filter(|line| !line.starts_with("#version"))
        .enumerate()
        .map(
            |(rank, line)| match line.split(' ').collect::<Vec<_>>()[..] {
                [a, b] => Ok((a.to_string(), b.to_string())),
                _ => Err(bad(
                    merges,
                    format!(
                        "merge {} is not two tokens separated by one space",
                        rank + 1
                    ),
                )),
            },
        )
        .collect::<Result<Vec<_>>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(words.into_iter().collect::<Vocab>(), pairs)
        .build()
        .map_err(|e| bad(vocab, e.to_string()))?;
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer
        .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
        .with_decoder(Some(ByteLevel::default()));
    if tokenizer.token_to_id(EOS).is_some() {
        tokenizer
            .add_special_tokens([AddedToken::from(EOS, true)])
            .map_err(|e| bad(vocab, e.to_string()))?;
    }
    Ok(tokenizer)
}

/// A causal LM's tokenizer: prompt to ids, ids back to text.
pub struct CausalTokenizer {
    inner: Tokenizer,
}

impl CausalTokenizer {
    /// Loads the tokenizer, never padding or truncating.
    pub fn load(files: &TokenizerFiles) -> Result<Self> {
        let inner = match files {
            TokenizerFiles::Json(path) => tokenizer_json(path)?,
            TokenizerFiles::VocabMerges { vocab, merges } => vocab_merges(vocab, merges)?,
            TokenizerFiles::WordPieces(path) => {
                return Err(Error::Tokenizer {
                    path: path.clone(),
                    message: "a causal model reads tokenizer.json or vocab.json + merges.txt, \
                              and vocab.txt is a BERT tokenizer"
                        .into(),
                })
            }
            TokenizerFiles::SentencePiece(path) => {
                return Err(Error::Tokenizer {
                    path: path.clone(),
                    message: "a causal model reads tokenizer.json or vocab.json + merges.txt, \
                              and spm.model is read for DeBERTa's tokenizer only; give the \
                              checkpoint's tokenizer.json"
                        .into(),
                })
            }
            TokenizerFiles::ImageProcessor(path) => {
                return Err(Error::Tokenizer {
                    path: path.clone(),
                    message: "a causal model reads tokenizer.json or vocab.json + merges.txt, \
                              and preprocessor_config.json is an image model's"
                        .into(),
                })
            }
        };
        Ok(Self { inner })
    }

    /// The ids of `text`, exactly as given, with the special tokens the tokenizer's
    /// post-processor adds (none for GPT-2; Llama 3's BOS).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, true)
            .map_err(|e| Error::Encode(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The text of `ids` (one token: its own text, e.g. " book").
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| Error::Encode(e.to_string()))
    }

    /// The id of `token` in the vocabulary (special tokens included).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The text of each token on its own.
    pub fn token_texts(&self, ids: &[u32]) -> Result<Vec<String>> {
        ids.iter().map(|&id| self.decode(&[id])).collect()
    }
}
