//! Where a checkpoint comes from (a local folder or the Hub) and what it is made of:
//! config.json, the tokenizer, and the weights.

mod hub;
mod pickle;
mod torch_file;
mod weights;

use std::path::{Path, PathBuf};

pub use hub::HubRepo;
pub use weights::{shard_names, WeightPath, Weights};

use crate::error::{Error, Result};

/// The tokenizer files a checkpoint may have in one file, best first; else GPT-2's original
/// two, vocab.json + merges.txt; else [`SPM_FILE`].
const TOKENIZER_FILES: [&str; 2] = ["tokenizer.json", "vocab.txt"];
/// DeBERTa-v2/v3's SentencePiece model, the last resort: deberta-v3-base ships no
/// tokenizer.json, and where a fine-tune has one, it is what transformers loads.
const SPM_FILE: &str = "spm.model";
/// An image model's preprocessing (resize, crop, normalise), where it has no tokenizer.
const IMAGE_PROCESSOR_FILE: &str = "preprocessor_config.json";
/// The weight files a checkpoint may have, best first: one file, or the index of a sharded
/// checkpoint (its shards beside it).
const WEIGHT_FILES: [&str; 3] = [
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
];

/// The `--model` argument: a folder on disk or a Hub repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    Folder(PathBuf),
    Hub { id: String, revision: String },
}

impl ModelSource {
    /// A folder when `model` exists on disk or is spelled as a path (`./x`, `/x`, `~/x`,
    /// `a/b/c`); otherwise a Hub id such as `bert-base-uncased` or `org/name`.
    pub fn parse(model: &str, revision: &str) -> Self {
        let looks_like_path = model.starts_with(['.', '/', '~'])
            || model.ends_with('/')
            || model.matches('/').count() > 1
            || model.contains('\\');
        if looks_like_path || Path::new(model).exists() {
            Self::Folder(PathBuf::from(model))
        } else {
            Self::Hub {
                id: model.to_string(),
                revision: revision.to_string(),
            }
        }
    }

    /// A file the checkpoint may or may not have (tokenizer_config.json), downloaded if
    /// needed; `None` when it has none or it cannot be had.
    pub fn optional_file(&self, name: &str) -> Option<PathBuf> {
        match self {
            Self::Folder(folder) => Some(folder.join(name)).filter(|path| path.exists()),
            Self::Hub { id, revision } => HubRepo::from_env(id, revision).file(name).ok(),
        }
    }
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder(path) => write!(f, "{}", path.display()),
            Self::Hub { id, .. } => write!(f, "{id}"),
        }
    }
}

/// The files of one checkpoint, found on disk (downloaded if needed), an encoder's or a
/// causal model's alike.
#[derive(Debug, Clone)]
pub struct CheckpointFiles {
    pub config: PathBuf,
    pub tokenizer: TokenizerFiles,
    /// One file, or the index of a sharded checkpoint with its shards beside it.
    pub weights: PathBuf,
}

/// A checkpoint's tokenizer, best first: tokenizer.json, BERT's vocab.txt, GPT-2's
/// original vocab.json + merges.txt, or DeBERTa's spm.model; for an image model, what reads
/// its input in a tokenizer's stead: preprocessor_config.json.
#[derive(Debug, Clone)]
pub enum TokenizerFiles {
    Json(PathBuf),
    WordPieces(PathBuf),
    VocabMerges { vocab: PathBuf, merges: PathBuf },
    SentencePiece(PathBuf),
    ImageProcessor(PathBuf),
}

impl TokenizerFiles {
    /// tokenizer.json or vocab.txt, whichever was found.
    fn one(path: PathBuf) -> Self {
        match path.file_name().is_some_and(|name| name == "vocab.txt") {
            true => Self::WordPieces(path),
            false => Self::Json(path),
        }
    }
}

impl CheckpointFiles {
    /// Finds (or downloads) config.json, the tokenizer and the weights (every shard).
    pub fn locate(source: &ModelSource) -> Result<Self> {
        match source {
            ModelSource::Folder(folder) => Self::in_folder(folder),
            ModelSource::Hub { id, revision } => {
                let hub = HubRepo::from_env(id, revision);
                let config = hub.file("config.json")?;
                let tokenizer = match hub.first_of(&TOKENIZER_FILES) {
                    Ok(path) => TokenizerFiles::one(path),
                    Err(error) => match (hub.file("vocab.json"), hub.file("merges.txt")) {
                        (Ok(vocab), Ok(merges)) => TokenizerFiles::VocabMerges { vocab, merges },
                        _ => match (hub.file(SPM_FILE), hub.file(IMAGE_PROCESSOR_FILE)) {
                            (Ok(spm), _) => TokenizerFiles::SentencePiece(spm),
                            (_, Ok(image)) => TokenizerFiles::ImageProcessor(image),
                            _ => return Err(error),
                        },
                    },
                };
                let weights = hub.first_of(&WEIGHT_FILES)?;
                if weights.to_string_lossy().ends_with(".index.json") {
                    for shard in shard_names(&weights)? {
                        hub.file(&shard)?;
                    }
                }
                Ok(Self {
                    config,
                    tokenizer,
                    weights,
                })
            }
        }
    }

    fn in_folder(folder: &Path) -> Result<Self> {
        let metadata =
            std::fs::metadata(folder).map_err(|_| Error::FolderNotFound(folder.to_path_buf()))?;
        if !metadata.is_dir() {
            return Err(Error::NotAFolder {
                path: folder.to_path_buf(),
            });
        }
        let missing = |file: &'static str, needs: &'static str| Error::MissingFile {
            folder: folder.to_path_buf(),
            file,
            needs,
        };
        let first = |names: &[&str]| {
            names
                .iter()
                .map(|name| folder.join(name))
                .find(|path| path.exists())
        };
        let config = first(&["config.json"])
            .ok_or_else(|| missing("config.json", "a config.json describing the model"))?;
        let tokenizer = match (
            first(&TOKENIZER_FILES),
            first(&["vocab.json"]),
            first(&["merges.txt"]),
            first(&[SPM_FILE]),
            first(&[IMAGE_PROCESSOR_FILE]),
        ) {
            (Some(path), ..) => TokenizerFiles::one(path),
            (None, Some(vocab), Some(merges), ..) => TokenizerFiles::VocabMerges { vocab, merges },
            (None, _, _, Some(spm), _) => TokenizerFiles::SentencePiece(spm),
            (None, _, _, None, Some(image)) => TokenizerFiles::ImageProcessor(image),
            _ => {
                let needs = "tokenizer.json, vocab.txt, vocab.json + merges.txt, or spm.model \
                             (an image model: preprocessor_config.json)";
                return Err(missing("tokenizer.json", needs));
            }
        };
        let needs =
            "model.safetensors, model.safetensors.index.json with its shards, or pytorch_model.bin";
        let weights = first(&WEIGHT_FILES).ok_or_else(|| missing("model.safetensors", needs))?;
        Ok(Self {
            config,
            tokenizer,
            weights,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_folders_from_hub_ids() {
        let hub = |id: &str| ModelSource::Hub {
            id: id.into(),
            revision: "main".into(),
        };
        assert_eq!(
            ModelSource::parse("bert-base-uncased", "main"),
            hub("bert-base-uncased")
        );
        assert_eq!(
            ModelSource::parse("sentence-transformers/all-MiniLM-L6-v2", "main"),
            hub("sentence-transformers/all-MiniLM-L6-v2")
        );
        for path in ["./m", "/no/such", "~/m", "a/b/c", "models/"] {
            assert_eq!(
                ModelSource::parse(path, "main"),
                ModelSource::Folder(path.into())
            );
        }
    }

    fn folder_with(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for file in files {
            std::fs::write(dir.path().join(file), "{}").unwrap();
        }
        dir
    }

    #[test]
    fn finds_spm_model_when_there_is_no_other_tokenizer() {
        let files = [
            "config.json",
            "spm.model",
            "tokenizer_config.json",
            "pytorch_model.bin",
        ];
        let dir = folder_with(&files);
        let found = CheckpointFiles::in_folder(dir.path()).unwrap();
        assert!(
            matches!(&found.tokenizer, TokenizerFiles::SentencePiece(p) if p.ends_with("spm.model")),
            "{:?}",
            found.tokenizer
        );
        assert!(found.weights.ends_with("pytorch_model.bin"));
    }

    #[test]
    fn prefers_tokenizer_json_and_vocab_txt_to_spm_model() {
        let dir = folder_with(&[
            "config.json",
            "spm.model",
            "tokenizer.json",
            "model.safetensors",
        ]);
        let found = CheckpointFiles::in_folder(dir.path()).unwrap();
        assert!(matches!(found.tokenizer, TokenizerFiles::Json(_)));
        let dir = folder_with(&["config.json", "spm.model", "vocab.txt", "model.safetensors"]);
        let found = CheckpointFiles::in_folder(dir.path()).unwrap();
        assert!(matches!(found.tokenizer, TokenizerFiles::WordPieces(_)));
    }

    #[test]
    fn names_spm_model_among_the_tokenizers_it_needs() {
        let dir = folder_with(&["config.json", "model.safetensors"]);
        let err = CheckpointFiles::in_folder(dir.path()).unwrap_err();
        assert!(err.to_string().contains("or spm.model"), "{err}");
    }
}
