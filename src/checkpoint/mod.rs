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

/// The tokenizer files a checkpoint may have, best first.
const TOKENIZER_FILES: [&str; 2] = ["tokenizer.json", "vocab.txt"];
/// The weight files a checkpoint may have, best first.
const WEIGHT_FILES: [&str; 2] = ["model.safetensors", "pytorch_model.bin"];

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
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder(path) => write!(f, "{}", path.display()),
            Self::Hub { id, .. } => write!(f, "{id}"),
        }
    }
}

/// The files of one checkpoint, found on disk (downloaded if needed).
#[derive(Debug, Clone)]
pub struct CheckpointFiles {
    pub config: PathBuf,
    pub tokenizer: PathBuf,
    pub tokenizer_config: Option<PathBuf>,
    pub weights: PathBuf,
}

impl CheckpointFiles {
    /// Finds (or downloads) config.json, the tokenizer and the weights.
    pub fn locate(source: &ModelSource) -> Result<Self> {
        match source {
            ModelSource::Folder(folder) => Self::in_folder(folder),
            ModelSource::Hub { id, revision } => {
                let hub = HubRepo::from_env(id, revision);
                let config = hub.file("config.json")?;
                let tokenizer = hub.first_of(&TOKENIZER_FILES)?;
                let tokenizer_config = hub.file("tokenizer_config.json").ok();
                let weights = hub.first_of(&WEIGHT_FILES)?;
                Ok(Self {
                    config,
                    tokenizer,
                    tokenizer_config,
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
        let first = |names: &[&'static str], needs: &'static str| {
            names
                .iter()
                .map(|name| folder.join(name))
                .find(|path| path.exists())
                .ok_or(Error::MissingFile {
                    folder: folder.to_path_buf(),
                    file: names[0],
                    needs,
                })
        };
        Ok(Self {
            config: first(&["config.json"], "a config.json describing the model")?,
            tokenizer: first(&TOKENIZER_FILES, "tokenizer.json or vocab.txt")?,
            tokenizer_config: Some(folder.join("tokenizer_config.json")).filter(|p| p.exists()),
            weights: first(&WEIGHT_FILES, "model.safetensors or pytorch_model.bin")?,
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
}
