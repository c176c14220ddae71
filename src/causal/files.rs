//! A causal checkpoint's files (local folder or the Hub; weights in one file or sharded) and
//! its byte-level BPE tokenizer (tokenizer.json, or GPT-2's vocab.json + merges.txt).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use crate::checkpoint::{shard_names, HubRepo, ModelSource};
use crate::error::{Error, Result};
use crate::input::{read_text_capped, TOKENIZER_LIMIT};
use crate::model::config::model_type;
use crate::model::families::is_causal_model_type;
use crate::tokens::tokenizer_json;

/// One file, or the index of a sharded checkpoint (its shards beside it).
const WEIGHT_FILES: [&str; 3] = [
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
];
const EOS: &str = "<|endoftext|>";

/// The files of one causal checkpoint, found on disk (downloaded if needed).
#[derive(Debug, Clone)]
pub struct CausalFiles {
    pub config: PathBuf,
    pub tokenizer: TokenizerFiles,
    pub weights: PathBuf,
}

/// tokenizer.json, or GPT-2's original vocab.json + merges.txt.
#[derive(Debug, Clone)]
pub enum TokenizerFiles {
    Json(PathBuf),
    VocabMerges { vocab: PathBuf, merges: PathBuf },
}

/// Whether `source` is a causal LM this crate explains (config.json says model_type "gpt2").
/// Unreadable or missing configs say no: the BERT path then reports what is wrong.
pub fn is_causal(source: &ModelSource) -> bool {
    let config = match source {
        ModelSource::Folder(folder) => Some(folder.join("config.json")),
        ModelSource::Hub { id, revision } => {
            HubRepo::from_env(id, revision).file("config.json").ok()
        }
    };
    config
        .and_then(|path| model_type(&path))
        .is_some_and(|t| is_causal_model_type(&t))
}

impl CausalFiles {
    /// Finds (or downloads) config.json, the tokenizer and the weights.
    pub fn locate(source: &ModelSource) -> Result<Self> {
        match source {
            ModelSource::Folder(folder) => Self::in_folder(folder),
            ModelSource::Hub { id, revision } => {
                let hub = HubRepo::from_env(id, revision);
                let tokenizer = match hub.file("tokenizer.json") {
                    Ok(path) => TokenizerFiles::Json(path),
                    Err(json_error) => match (hub.file("vocab.json"), hub.file("merges.txt")) {
                        (Ok(vocab), Ok(merges)) => TokenizerFiles::VocabMerges { vocab, merges },
                        _ => return Err(json_error),
                    },
                };
                let weights = hub.first_of(&WEIGHT_FILES)?;
                if weights.to_string_lossy().ends_with(".index.json") {
                    for shard in shard_names(&weights)? {
                        hub.file(&shard)?;
                    }
                }
                Ok(Self {
                    config: hub.file("config.json")?,
                    tokenizer,
                    weights,
                })
            }
        }
    }

    fn in_folder(folder: &Path) -> Result<Self> {
        if !folder.is_dir() {
            return Err(Error::FolderNotFound(folder.to_path_buf()));
        }
        let missing = |file: &'static str, needs: &'static str| Error::MissingFile {
            folder: folder.to_path_buf(),
            file,
            needs,
        };
        let config = folder.join("config.json");
        if !config.exists() {
            return Err(missing("config.json", "a config.json describing the model"));
        }
        let (json, vocab, merges) = (
            folder.join("tokenizer.json"),
            folder.join("vocab.json"),
            folder.join("merges.txt"),
        );
        let tokenizer = if json.exists() {
            TokenizerFiles::Json(json)
        } else if vocab.exists() && merges.exists() {
            TokenizerFiles::VocabMerges { vocab, merges }
        } else {
            return Err(missing(
                "tokenizer.json",
                "tokenizer.json or vocab.json + merges.txt",
            ));
        };
        let weights = WEIGHT_FILES
            .iter()
            .map(|name| folder.join(name))
            .find(|path| path.exists())
            .ok_or_else(|| {
                missing(
                    "model.safetensors",
                    "model.safetensors, model.safetensors.index.json with its shards, or pytorch_model.bin",
                )
            })?;
        Ok(Self {
            config,
            tokenizer,
            weights,
        })
    }

    /// Loads the tokenizer, never padding or truncating.
    pub fn load_tokenizer(&self) -> Result<CausalTokenizer> {
        let inner = match &self.tokenizer {
            TokenizerFiles::Json(path) => tokenizer_json(path)?,
            TokenizerFiles::VocabMerges { vocab, merges } => vocab_merges(vocab, merges)?,
        };
        Ok(CausalTokenizer { inner })
    }
}

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

    /// The text of each token on its own.
    pub fn token_texts(&self, ids: &[u32]) -> Result<Vec<String>> {
        ids.iter().map(|&id| self.decode(&[id])).collect()
    }
}
