//! `pytorch_model.bin`: a state dict saved by `torch.save`, in either of its formats.
//!
//! - The zip format (torch ≥ 1.6): `<archive>/data.pkl` pickles the state dict, whose
//!   tensors name their storages by key; storage `k` is the entry `<archive>/data/k`.
//! - The legacy format, which older checkpoints (rxnfp's, rxnmapper's) still use: a magic
//!   number, the protocol version and system information, the state dict, the list of
//!   storage keys in file order, each pickled; then for each key its element count (a
//!   little-endian u64) and its elements.
//!
//! Both are read with [`pickle`](super::pickle), and every size is checked against what
//! the file holds before anything is allocated.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use candle_core::{DType, Device, Tensor};

use super::pickle::{self, Id, Pickle, Value};

/// The legacy format's first pickle: protocol 2, the number 0x1950a86a20f9469cfc6c
/// (LONG1, ten bytes), STOP. Compared as bytes: the number needs 80 bits.
const MAGIC: [u8; 15] = [
    0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e,
];

/// Every tensor of the checkpoint, by its state-dict name.
pub fn read_all(path: &Path) -> Result<Vec<(String, Tensor)>, String> {
    let mut start = Vec::with_capacity(MAGIC.len());
    File::open(path)
        .and_then(|f| f.take(MAGIC.len() as u64).read_to_end(&mut start))
        .map_err(|e| e.to_string())?;
    if start == MAGIC {
        read_legacy(path)
    } else if start.starts_with(b"PK") {
        read_zip(path)
    } else {
        Err("not a PyTorch checkpoint (neither torch's zip format nor its legacy one)".into())
    }
}

/// One tensor of the state dict: a view of a storage.
struct TensorRef {
    name: String,
    key: String,
    dtype: DType,
    /// In elements of the storage.
    offset: usize,
    shape: Vec<usize>,
    stride: Vec<usize>,
}

fn read_zip(path: &Path) -> Result<Vec<(String, Tensor)>, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let length = file.metadata().map_err(|e| e.to_string())?.len();
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| e.to_string())?;
    let pkl = zip
        .file_names()
        .filter_map(|n| n.ok())
        .find(|n| n.ends_with("/data.pkl") || n == "data.pkl")
        .map(|n| n.into_owned())
        .ok_or("the zip archive has no data.pkl")?;
    let folder = pkl.trim_end_matches("data.pkl").to_string();
    let state = {
        let entry = zip.by_name(&pkl).map_err(|e| e.to_string())?;
        pickle::read(&mut BufReader::new(entry))?
    };
    let (tensors, _) = tensor_refs(&state)?;
    tensors
        .into_iter()
        .map(|t| {
            let entry = zip
                .by_name(&format!("{folder}data/{}", t.key))
                .map_err(|e| format!("{}: storage {}: {e}", t.name, t.key))?;
            // Stored uncompressed, as torch writes it: no larger than the file.
            let bytes = entry.size().min(length);
            Ok((t.name.clone(), read_tensor(entry, &t, bytes)?))
        })
        .collect()
}

fn read_legacy(path: &Path) -> Result<Vec<(String, Tensor)>, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let length = file.metadata().map_err(|e| e.to_string())?.len();
    let mut reader = BufReader::new(file);
    reader
        .seek(SeekFrom::Start(MAGIC.len() as u64))
        .map_err(|e| e.to_string())?;
    pickle::read(&mut reader)?; // protocol version
    pickle::read(&mut reader)?; // system information
    let state = pickle::read(&mut reader)?;
    let order = pickle::read(&mut reader)?;
    let (tensors, sizes) = tensor_refs(&state)?;
    let keys = order
        .items(order.root)
        .ok_or("the list of storage keys is missing")?
        .iter()
        .map(|&k| order.str(k).ok_or("a storage key is not a string"))
        .collect::<Result<Vec<_>, _>>()?;

    // Where each storage's elements start, and how many bytes they take.
    let mut storages: HashMap<&str, (u64, u64)> = HashMap::new();
    let mut at = reader.stream_position().map_err(|e| e.to_string())?;
    for (i, key) in keys.iter().enumerate() {
        let mut count = [0u8; 8];
        reader
            .read_exact(&mut count)
            .map_err(|_| "the file ends inside its storages")?;
        // A storage no tensor uses has no known element size: only the last may be so.
        let size = match sizes.get(*key) {
            Some(&size) => size,
            None if i + 1 == keys.len() => 1,
            None => return Err(format!("storage {key} belongs to no tensor")),
        };
        let bytes = u64::from_le_bytes(count)
            .checked_mul(size)
            .filter(|&b| b <= length.saturating_sub(at + 8))
            .ok_or_else(|| format!("storage {key} runs past the end of the file"))?;
        storages.insert(key, (at + 8, bytes));
        at += 8 + bytes;
        reader
            .seek(SeekFrom::Start(at))
            .map_err(|e| e.to_string())?;
    }

    let mut file = reader.into_inner();
    tensors
        .into_iter()
        .map(|t| {
            let &(start, bytes) = storages
                .get(t.key.as_str())
                .ok_or_else(|| format!("{}: storage {} is not in the file", t.name, t.key))?;
            file.seek(SeekFrom::Start(start))
                .map_err(|e| e.to_string())?;
            Ok((t.name.clone(), read_tensor(&mut file, &t, bytes)?))
        })
        .collect()
}

/// The state dict's tensors, and the element size of every storage the pickle names.
/// Entries that are not tensors (or of a type candle has no dtype for) are skipped.
fn tensor_refs(state: &Pickle) -> Result<(Vec<TensorRef>, HashMap<String, u64>), String> {
    let Value::Dict(entries) = state.get(state.root) else {
        return Err("the checkpoint holds no state dict".into());
    };
    let mut sizes = HashMap::new();
    for value in &state.values {
        if let Value::Persistent(id) = value {
            if let Some((key, size, _)) = storage(state, *id) {
                sizes.insert(key.to_string(), size);
            }
        }
    }
    let tensors = entries
        .iter()
        .filter_map(|&(name, value)| Some((state.str(name)?, value)))
        .filter_map(|(name, value)| tensor_ref(state, name, value, 0))
        .collect::<Result<_, _>>()?;
    Ok((tensors, sizes))
}

/// `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`, possibly inside
/// `_rebuild_parameter(tensor, ...)` or `_rebuild_from_type_v2(function, type, args, ...)`.
fn tensor_ref(p: &Pickle, name: &str, id: Id, depth: u8) -> Option<Result<TensorRef, String>> {
    match *p.get(id) {
        Value::Call(callable, args) => call_ref(p, name, callable, args, depth),
        _ => None,
    }
}

fn call_ref(
    p: &Pickle,
    name: &str,
    callable: Id,
    args: Id,
    depth: u8,
) -> Option<Result<TensorRef, String>> {
    let Value::Global(module, function) = p.get(callable) else {
        return None;
    };
    let args = p.items(args)?;
    match (module.as_str(), function.as_str()) {
        _ if depth > 2 => None,
        ("torch._utils", "_rebuild_parameter") => tensor_ref(p, name, *args.first()?, depth + 1),
        ("torch._tensor", "_rebuild_from_type_v2") => {
            let &[function, _, inner, ..] = args else {
                return None;
            };
            call_ref(p, name, function, inner, depth + 1)
        }
        ("torch._utils", "_rebuild_tensor_v2") => Some(rebuild(p, name, args)),
        _ => None,
    }
}

fn rebuild(p: &Pickle, name: &str, args: &[Id]) -> Result<TensorRef, String> {
    let bad = || format!("{name}: the tensor's description is damaged");
    let &[storage_id, offset, shape, stride, ..] = args else {
        return Err(bad());
    };
    let Value::Persistent(storage_id) = *p.get(storage_id) else {
        return Err(bad());
    };
    let (key, _, dtype) = storage(p, storage_id).ok_or_else(bad)?;
    let dtype = dtype.ok_or_else(|| format!("{name}: its element type is not supported"))?;
    let numbers = |id: Id| -> Option<Vec<usize>> {
        p.items(id)?
            .iter()
            .map(|&i| usize::try_from(p.int(i)?).ok())
            .collect()
    };
    Ok(TensorRef {
        name: name.to_string(),
        key: key.to_string(),
        dtype,
        offset: p
            .int(offset)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(bad)?,
        shape: numbers(shape).ok_or_else(bad)?,
        stride: numbers(stride).ok_or_else(bad)?,
    })
}

/// `('storage', torch.FloatStorage, key, location, count, ...)`: the key, the element
/// size, and the dtype where candle has one.
fn storage(p: &Pickle, id: Id) -> Option<(&str, u64, Option<DType>)> {
    let items = p.items(id)?;
    let Value::Global(_, class) = p.get(*items.get(1)?) else {
        return None;
    };
    let (size, dtype) = match class.as_str() {
        "FloatStorage" => (4, Some(DType::F32)),
        "DoubleStorage" => (8, Some(DType::F64)),
        "HalfStorage" => (2, Some(DType::F16)),
        "BFloat16Storage" => (2, Some(DType::BF16)),
        "LongStorage" => (8, Some(DType::I64)),
        "ByteStorage" | "BoolStorage" => (1, Some(DType::U8)),
        "IntStorage" => (4, None),
        "ShortStorage" => (2, None),
        "CharStorage" => (1, None),
        _ => return None,
    };
    Some((p.str(*items.get(2)?)?, size, dtype))
}

/// Reads one tensor from its storage (`reader` at the storage's start, `bytes` long). The
/// tensor must be contiguous in C or Fortran order, as saved state dicts are.
fn read_tensor(mut reader: impl Read, t: &TensorRef, bytes: u64) -> Result<Tensor, String> {
    let size = t.dtype.size_in_bytes() as u64;
    let count = t
        .shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        .ok_or_else(|| format!("{}: its shape {:?} is too large", t.name, t.shape))?;
    let fortran: Vec<usize> = t.shape.iter().rev().copied().collect();
    let reversed_stride: Vec<usize> = t.stride.iter().rev().copied().collect();
    let order = if t.stride == contiguous_strides(&t.shape) || count == 0 {
        Order::C
    } else if reversed_stride == contiguous_strides(&fortran) {
        Order::Fortran
    } else {
        return Err(format!("{}: a strided tensor is not supported", t.name));
    };
    let start = (t.offset as u64).checked_mul(size);
    let end = count.checked_mul(size).and_then(|b| b.checked_add(start?));
    if end.is_none_or(|end| end > bytes) {
        return Err(format!("{}: the tensor runs past its storage", t.name));
    }
    std::io::copy(
        &mut (&mut reader).take(start.unwrap_or(0)),
        &mut std::io::sink(),
    )
    .map_err(|e| e.to_string())?;
    let mut data = vec![0u8; (count * size) as usize];
    reader
        .read_exact(&mut data)
        .map_err(|_| format!("{}: the file ends inside the tensor", t.name))?;
    let tensor = match order {
        Order::C => Tensor::from_raw_buffer(&data, t.dtype, &t.shape, &Device::Cpu),
        Order::Fortran => Tensor::from_raw_buffer(&data, t.dtype, &fortran, &Device::Cpu)
            .and_then(|x| x.permute((0..fortran.len()).rev().collect::<Vec<_>>())),
    };
    tensor.map_err(|e| format!("{}: {e}", t.name))
}

enum Order {
    C,
    Fortran,
}

fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}
#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torch-legacy")
    }

    /// Every tensor of a state dict torch saved in the legacy format
    /// (scripts/reference/make_legacy_torch_fixture.py), against the values torch wrote
    /// beside it: f32, i64, f16, two views of one storage, a transposed matrix.
    #[test]
    fn reads_what_torch_saved() {
        let path = fixture().join("state.bin");
        assert!(read_all(&path).is_ok());
        let want: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture().join("state.json")).unwrap())
                .unwrap();
        let got: HashMap<String, Tensor> = read_all(&path).unwrap().into_iter().collect();
        let want = want.as_object().unwrap();
        assert_eq!(got.len(), want.len());
        for (name, expected) in want {
            let tensor = &got[name];
            let shape: Vec<usize> = serde_json::from_value(expected["shape"].clone()).unwrap();
            assert_eq!(tensor.dims(), shape.as_slice(), "{name}");
            // Every value is an f32, f16 or small integer: exact in f32, whatever the last
            // bit of serde's f64 parse.
            let values: Vec<f32> = serde_json::from_value(expected["values"].clone()).unwrap();
            let read: Vec<f32> = tensor
                .to_dtype(DType::F32)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            assert_eq!(read, values, "{name}");
        }
        assert_eq!(got["embeddings.position_ids"].dtype(), DType::I64);
        assert_eq!(got["half"].dtype(), DType::F16);
    }

    /// Cut anywhere, the file gives an error, never a panic or a huge allocation.
    #[test]
    fn truncated_files_are_errors() {
        let bytes = std::fs::read(fixture().join("state.bin")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cut.bin");
        for end in [
            MAGIC.len(),
            40,
            bytes.len() / 2,
            bytes.len() - 9,
            bytes.len() - 1,
        ] {
            std::fs::write(&path, &bytes[..end]).unwrap();
            assert!(read_all(&path).is_err(), "cut at {end}");
        }
    }

    #[test]
    fn a_broken_zip_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zip.bin");
        std::fs::write(&path, b"PK\x03\x04rest").unwrap();
        assert!(read_all(&path).is_err());
    }
}
