//! Checkpoint tensors by name, with bert-base-uncased's old names mapped to the modern ones,
//! from one file or from the shards a `*.index.json` lists (bf16/f16 read as f32).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use super::torch_file;
use crate::error::{Error, Result};
use crate::input::{open_regular, read_text_capped, METADATA_LIMIT};

/// Every tensor of a checkpoint, renamed to one convention: without the body's prefix that
/// task checkpoints carry (`bert.`, `roberta.`, ...) and with `LayerNorm.weight` /
/// `LayerNorm.bias` (bert-base-uncased says `gamma` / `beta`).
pub struct Weights {
    path: PathBuf,
    tensors: HashMap<String, Tensor>,
    device: Device,
}

impl Weights {
    /// Reads model.safetensors or pytorch_model.bin (chosen by extension), or every shard
    /// that `model.safetensors.index.json` lists; `base` is the prefix to drop from the
    /// body's tensor names (`"bert"`; `""` for none).
    pub fn load(path: &Path, device: &Device, base: &str) -> Result<Self> {
        let mut raw = Vec::new();
        for file in files_of(path)? {
            raw.extend(read_file(&file)?);
        }
        let tensors = raw
            .into_iter()
            .map(|(name, tensor)| (canonical_name(&name, base), tensor))
            .collect();
        Ok(Self {
            path: path.to_path_buf(),
            tensors,
            device: device.clone(),
        })
    }

    /// The file the tensors came from (the index, for shards).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A view of the tensors under `prefix`, as candle's `VarBuilder::pp` gives.
    pub fn pp(&self, prefix: &str) -> WeightPath<'_> {
        WeightPath {
            weights: self,
            prefix: prefix.to_string(),
        }
    }

    /// Whether a tensor of this (canonical) name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The tensor `name` as f32 on the model's device, after checking its shape.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let tensor = self.tensors.get(name).ok_or_else(|| Error::MissingTensor {
            path: self.path.clone(),
            name: name.to_string(),
        })?;
        if tensor.dims() != shape {
            return Err(Error::TensorShape {
                path: self.path.clone(),
                name: name.to_string(),
                expected: shape.to_vec(),
                found: tensor.dims().to_vec(),
            });
        }
        Ok(tensor.to_dtype(DType::F32)?.to_device(&self.device)?)
    }
}

/// A prefix into [`Weights`], so that model code spells the checkpoint's names.
pub struct WeightPath<'a> {
    weights: &'a Weights,
    prefix: String,
}

impl WeightPath<'_> {
    /// Goes one level deeper: `pp("attention")` under `encoder.layer.0`.
    pub fn pp(&self, name: &str) -> Self {
        self.weights.pp(&self.join(name))
    }

    /// The tensor `<prefix>.<name>` with the given shape.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.weights.get(&self.join(name), shape)
    }

    /// Whether `<prefix>.<name>` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.weights.contains(&self.join(name))
    }

    /// Whether the tensor `<prefix>.<name>` or any under it (`<prefix>.<name>.weight`, …)
    /// exists.
    pub fn holds(&self, name: &str) -> bool {
        let name = self.join(name);
        let under = format!("{name}.");
        self.weights
            .tensors
            .keys()
            .any(|key| *key == name || key.starts_with(&under))
    }

    fn join(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }
}

/// One weight file's tensors, as stored (any dtype, on the CPU).
fn read_file(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let unreadable = |e: candle_core::Error| Error::Weights {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    // A FIFO or a device would hang or never end: only regular files are read.
    open_regular(path).map_err(|e| Error::Weights {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let raw: Vec<(String, Tensor)> = if path.extension().is_some_and(|e| e == "safetensors") {
        candle_core::safetensors::load(path, &Device::Cpu)
            .map_err(unreadable)?
            .into_iter()
            .collect()
    } else {
        torch_file::read_all(path).map_err(|message| Error::Weights {
            path: path.to_path_buf(),
            message,
        })?
    };
    Ok(raw)
}

/// The weight files behind `path`: itself, or the shards its `*.index.json` maps tensors to
/// (plain file names beside the index).
fn files_of(path: &Path) -> Result<Vec<PathBuf>> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !name.ends_with(".index.json") {
        return Ok(vec![path.to_path_buf()]);
    }
    let bad = |message: String| Error::Weights {
        path: path.to_path_buf(),
        message,
    };
    let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| bad(e.to_string()))?;
    let index: ShardIndex = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let shards: BTreeSet<String> = index.weight_map.into_values().collect();
    if shards.is_empty() {
        return Err(bad("its weight_map lists no shard files".into()));
    }
    let folder = path.parent().unwrap_or(Path::new("."));
    shards
        .into_iter()
        .map(|shard| match shard_name_is_plain(&shard) {
            true => Ok(folder.join(shard)),
            false => Err(bad(format!(
                "shard {shard:?} is not a plain file name beside the index"
            ))),
        })
        .collect()
}

/// The shard files an index lists, for downloading them (plain names only).
pub fn shard_names(index: &Path) -> Result<Vec<String>> {
    Ok(files_of(index)?
        .iter()
        .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(String::from))
        .collect())
}

fn shard_name_is_plain(name: &str) -> bool {
    !name.is_empty() && name != ".." && name != "." && !name.contains(['/', '\\'])
}

#[derive(serde::Deserialize)]
struct ShardIndex {
    weight_map: HashMap<String, String>,
}

fn canonical_name(name: &str, base: &str) -> String {
    let name = name
        .strip_prefix(base)
        .and_then(|rest| rest.strip_prefix('.'))
        .unwrap_or(name);
    if let Some(stem) = name.strip_suffix("LayerNorm.gamma") {
        format!("{stem}LayerNorm.weight")
    } else if let Some(stem) = name.strip_suffix("LayerNorm.beta") {
        format!("{stem}LayerNorm.bias")
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_old_and_prefixed_names_to_one_convention() {
        let cases = [
            (
                "bert.encoder.layer.0.output.LayerNorm.gamma",
                "encoder.layer.0.output.LayerNorm.weight",
            ),
            (
                "bert.embeddings.LayerNorm.beta",
                "embeddings.LayerNorm.bias",
            ),
            (
                "cls.predictions.transform.LayerNorm.gamma",
                "cls.predictions.transform.LayerNorm.weight",
            ),
            ("cls.predictions.bias", "cls.predictions.bias"),
            (
                "embeddings.word_embeddings.weight",
                "embeddings.word_embeddings.weight",
            ),
        ];
        for (given, canonical) in cases {
            assert_eq!(canonical_name(given, "bert"), canonical);
        }
    }

    #[test]
    fn names_the_missing_tensor_and_the_wrong_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        let t = Tensor::zeros((2, 3), DType::F32, &Device::Cpu).unwrap();
        candle_core::safetensors::save(&HashMap::from([("bert.a.weight", t)]), &path).unwrap();
        let weights = Weights::load(&path, &Device::Cpu, "bert").unwrap();
        assert_eq!(
            weights.pp("a").get("weight", &[2, 3]).unwrap().dims(),
            &[2, 3]
        );
        let missing = weights.get("b.weight", &[2, 3]).unwrap_err();
        assert!(
            missing.to_string().contains("no tensor b.weight"),
            "{missing}"
        );
        let shape = weights.get("a.weight", &[3, 2]).unwrap_err();
        assert!(shape.to_string().contains("shape [2, 3]"), "{shape}");
    }

    #[test]
    fn shards_in_half_precision_load_as_f32() {
        let dir = tempfile::tempdir().unwrap();
        let values = [1.5f32, -2.25, 0.125];
        let tensor = Tensor::new(&values, &Device::Cpu).unwrap();
        for (file, name, dtype) in [
            ("a.safetensors", "x.weight", DType::F16),
            ("b.safetensors", "y.weight", DType::BF16),
        ] {
            let t = tensor.to_dtype(dtype).unwrap();
            candle_core::safetensors::save(&HashMap::from([(name, t)]), dir.path().join(file))
                .unwrap();
        }
        let index = dir.path().join("model.safetensors.index.json");
        let map = r#"{"weight_map": {"x.weight": "a.safetensors", "y.weight": "b.safetensors"}}"#;
        std::fs::write(&index, map).unwrap();
        assert_eq!(
            shard_names(&index).unwrap(),
            ["a.safetensors", "b.safetensors"]
        );
        let weights = Weights::load(&index, &Device::Cpu, "").unwrap();
        for name in ["x.weight", "y.weight"] {
            let got: Vec<f32> = weights.get(name, &[3]).unwrap().to_vec1().unwrap();
            assert_eq!(got, values);
        }
        std::fs::write(
            &index,
            r#"{"weight_map": {"x.weight": "../a.safetensors"}}"#,
        )
        .unwrap();
        let err = Weights::load(&index, &Device::Cpu, "").err().unwrap();
        assert!(err.to_string().contains("plain file name"), "{err}");
    }
}
