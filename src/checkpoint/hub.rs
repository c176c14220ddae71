//! Hugging Face Hub checkpoints: the standard cache, offline mode, and downloads with progress.

use std::path::{Path, PathBuf};

use hf_hub::api::sync::ApiBuilder;
use hf_hub::{Cache, Repo, RepoType};

use crate::error::{Error, Result};

/// One model repository at one revision, resolved file by file.
pub struct HubRepo {
    pub id: String,
    pub revision: String,
    cache_dir: PathBuf,
    offline: bool,
}

impl HubRepo {
    /// Reads HF_HUB_CACHE, HF_HOME and HF_HUB_OFFLINE as huggingface_hub does.
    pub fn from_env(id: &str, revision: &str) -> Self {
        let cache_dir = match (
            std::env::var_os("HF_HUB_CACHE"),
            std::env::var_os("HF_HOME"),
        ) {
            (Some(cache), _) => PathBuf::from(cache),
            (None, Some(home)) => PathBuf::from(home).join("hub"),
            (None, None) => Cache::default().path().clone(),
        };
        let offline = std::env::var("HF_HUB_OFFLINE")
            .map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
            .unwrap_or(false);
        Self {
            id: id.to_string(),
            revision: revision.to_string(),
            cache_dir,
            offline,
        }
    }

    /// The local path of `file`: from the cache when it is there, else downloaded with a
    /// progress bar on stderr (or an error when offline).
    pub fn file(&self, file: &str) -> Result<PathBuf> {
        if let Some(path) = self.cached(file) {
            return Ok(path);
        }
        if self.offline {
            return Err(Error::NotInCache {
                model: self.id.clone(),
                revision: self.revision.clone(),
                cache: self.cache_dir.clone(),
                file: file.to_string(),
            });
        }
        let hub_error = |message: String| Error::Hub {
            model: self.id.clone(),
            revision: self.revision.clone(),
            file: file.to_string(),
            message,
        };
        let mut builder =
            ApiBuilder::from_cache(Cache::new(self.cache_dir.clone())).with_progress(true);
        if let Ok(endpoint) = std::env::var("HF_ENDPOINT") {
            builder = builder.with_endpoint(endpoint);
        }
        if let Ok(token) = std::env::var("HF_TOKEN") {
            builder = builder.with_token(Some(token));
        }
        let api = builder.build().map_err(|e| hub_error(e.to_string()))?;
        let repo = Repo::with_revision(self.id.clone(), RepoType::Model, self.revision.clone());
        api.repo(repo)
            .download(file)
            .map_err(|e| hub_error(e.to_string()))
    }

    /// The first of `files` that the repository has.
    pub fn first_of(&self, files: &[&'static str]) -> Result<PathBuf> {
        if let Some(path) = files.iter().find_map(|f| self.cached(f)) {
            return Ok(path);
        }
        let mut last = None;
        for file in files {
            match self.file(file) {
                Ok(path) => return Ok(path),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("first_of is called with at least one file"))
    }

    /// The cached copy of `file`, for a branch (through refs/) or a commit hash.
    pub fn cached(&self, file: &str) -> Option<PathBuf> {
        let repo_dir = self
            .cache_dir
            .join(format!("models--{}", self.id.replace('/', "--")));
        let commit = std::fs::read_to_string(repo_dir.join("refs").join(&self.revision))
            .map(|c| c.trim().to_string())
            .unwrap_or_else(|_| self.revision.clone());
        let path = repo_dir.join("snapshots").join(commit).join(file);
        is_file(&path).then_some(path)
    }
}

fn is_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(cache: &Path, offline: bool) -> HubRepo {
        HubRepo {
            id: "org/tiny".into(),
            revision: "main".into(),
            cache_dir: cache.to_path_buf(),
            offline,
        }
    }

    #[test]
    fn finds_files_through_refs_and_by_commit() {
        let cache = tempfile::tempdir().unwrap();
        let snapshot = cache.path().join("models--org--tiny/snapshots/abc123");
        std::fs::create_dir_all(&snapshot).unwrap();
        std::fs::create_dir_all(cache.path().join("models--org--tiny/refs")).unwrap();
        std::fs::write(cache.path().join("models--org--tiny/refs/main"), "abc123").unwrap();
        std::fs::write(snapshot.join("config.json"), "{}").unwrap();
        let hub = repo(cache.path(), true);
        assert_eq!(
            hub.file("config.json").unwrap(),
            snapshot.join("config.json")
        );
        let by_commit = HubRepo {
            revision: "abc123".into(),
            ..repo(cache.path(), true)
        };
        assert!(by_commit.cached("config.json").is_some());
        let first = hub.first_of(&["tokenizer.json", "config.json"]).unwrap();
        assert_eq!(first, snapshot.join("config.json"));
    }

    #[test]
    fn offline_and_uncached_is_a_clear_error() {
        let cache = tempfile::tempdir().unwrap();
        let err = repo(cache.path(), true).file("config.json").unwrap_err();
        assert!(matches!(err, Error::NotInCache { .. }), "{err}");
        assert!(err.to_string().contains("HF_HUB_OFFLINE"), "{err}");
    }
}
