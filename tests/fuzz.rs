//! A fuzz harness that runs in `cargo test` within bounded time: random and mutated input
//! for the readers that take files from users (.npy, .safetensors, the batch JSONL) and
//! for the tokenizer front end. Whatever the bytes, the answer is a value or an error:
//! never a panic, a hang or an allocation the input did not pay for.
//!
//! More cases: `PROPTEST_CASES=20000 cargo test --release --test fuzz`.

mod common;

use std::io::Cursor;
use std::sync::OnceLock;

use bert_explain::attention::read_attention_file;
use bert_explain::batch::{examples, Example};
use bert_explain::checkpoint::Weights;
use bert_explain::{ExplainOptions, Explainer, ModelSource};
use candle_core::Device;
use proptest::prelude::*;

/// 256 cases each unless PROPTEST_CASES says otherwise.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok());
    ProptestConfig {
        cases: cases.unwrap_or(256),
        ..ProptestConfig::default()
    }
}

/// Writes `bytes` under `name` in a fresh folder and reads it as an attention file; the
/// result must be a usable stack or an error, and a stack is always finite.
fn read_attention(name: &str, bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    if let Ok(stack) = read_attention_file(&path, &Device::Cpu) {
        let values: Vec<f64> = stack.tensor().flatten_all().unwrap().to_vec1().unwrap();
        assert!(values.iter().all(|v| v.is_finite() && *v >= 0.0));
    }
}

/// A .npy header as numpy writes it, with the given fields (possibly nonsense).
fn npy_bytes(descr: &str, fortran: bool, shape: &[u64], version: u8, data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let fortran = if fortran { "True" } else { "False" };
    let header =
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}\n");
    let mut bytes = b"\x93NUMPY".to_vec();
    bytes.push(version);
    bytes.push(0);
    match version {
        1 => bytes.extend((header.len() as u16).to_le_bytes()),
        _ => bytes.extend((header.len() as u32).to_le_bytes()),
    }
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    bytes
}

/// A .safetensors file: an 8-byte header length, a JSON header, the data.
fn safetensors_bytes(dtype: &str, shape: &[u64], offsets: (u64, u64), data: &[u8]) -> Vec<u8> {
    let header = serde_json::json!({
        "attention": {"dtype": dtype, "shape": shape, "data_offsets": [offsets.0, offsets.1]}
    })
    .to_string();
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    bytes
}

fn dims() -> impl Strategy<Value = Vec<u64>> {
    let dim = prop_oneof![
        0u64..6,
        Just(u32::MAX as u64 + 1),
        Just(u64::MAX),
        any::<u64>()
    ];
    prop::collection::vec(dim, 0..6)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn npy_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        read_attention("a.npy", &bytes);
        let mut with_magic = b"\x93NUMPY\x01\x00".to_vec();
        with_magic.extend(&bytes);
        read_attention("a.npy", &with_magic);
    }

    #[test]
    fn npy_headers(
        descr in prop_oneof![
            Just("<f4".to_string()), Just(">f8".to_string()), Just("<f2".to_string()),
            Just("|u1".to_string()), Just("<c16".to_string()), "[<>=|]?[a-zA-Z][0-9]{0,3}"
        ],
        fortran in any::<bool>(),
        shape in dims(),
        version in 0u8..5,
        data in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        read_attention("a.npy", &npy_bytes(&descr, fortran, &shape, version, &data));
    }

    #[test]
    fn npy_valid_shapes_with_random_values(
        layers in 1u64..3, heads in 1u64..3, n in 1u64..5, fortran in any::<bool>(),
        seed in prop::collection::vec(any::<u32>(), 64),
    ) {
        let count = (layers * heads * n * n) as usize;
        let data: Vec<u8> = seed.iter().cycle().take(count).flat_map(|v| f32::from_bits(*v).to_le_bytes()).collect();
        read_attention("a.npy", &npy_bytes("<f4", fortran, &[layers, heads, n, n], 1, &data));
    }

    #[test]
    fn safetensors_random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        read_attention("a.safetensors", &bytes);
        let mut with_length = (bytes.len() as u64).to_le_bytes().to_vec();
        with_length.extend(&bytes);
        read_attention("a.safetensors", &with_length);
    }

    #[test]
    fn safetensors_headers(
        dtype in prop_oneof![Just("F32"), Just("F64"), Just("BF16"), Just("F16"), Just("I64"), Just("U8"), Just("X")],
        shape in dims(),
        offsets in (0u64..700, 0u64..700),
        data in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        read_attention("a.safetensors", &safetensors_bytes(dtype, &shape, offsets, &data));
    }

    /// pytorch_model.bin in torch's legacy and zip formats, with bytes changed or cut.
    #[test]
    fn torch_checkpoint_mutations(
        file in prop_oneof![
            Just("tests/fixtures/torch-legacy/state.bin"),
            Just("models/tiny-bert-legacy/pytorch_model.bin"),
        ],
        changes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = std::fs::read(common::repo().join(file)).unwrap();
        for (at, value) in changes {
            let at = at.index(bytes.len());
            bytes[at] = value;
        }
        let end = cut.index(bytes.len() * 2).min(bytes.len());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pytorch_model.bin");
        std::fs::write(&path, &bytes[..end]).unwrap();
        let _ = Weights::load(&path, &Device::Cpu, "");
    }

    #[test]
    fn jsonl_lines(bytes in prop::collection::vec(
        prop_oneof![any::<u8>(), Just(b'\n'), Just(b'{'), Just(b'"'), Just(0xEF), Just(0xBB), Just(0xBF)],
        0..400,
    )) {
        for line in examples(Cursor::new(&bytes)) {
            let (number, line) = line.unwrap();
            prop_assert!(number >= 1);
            let _ = Example::parse(&line);
        }
    }

    #[test]
    fn jsonl_objects(text in ".{0,40}", target in proptest::option::of(any::<i64>()), extra in "[a-z]{0,6}") {
        let mut object = serde_json::json!({"text": text});
        if let Some(target) = target {
            object["target"] = target.into();
        }
        if !extra.is_empty() {
            object[extra.as_str()] = 1.into();
        }
        let line = format!("{object}\n");
        for parsed in examples(Cursor::new(line.as_bytes())) {
            let _ = Example::parse(&parsed.unwrap().1);
        }
    }

    #[test]
    fn tokenizer_front_end(
        text in prop_oneof![
            ".{0,60}",
            "(\\[MASK\\]|\\[CLS\\]|\\[SEP\\]|##|[a-z]{1,8}| |\\x00|\\x1b|\u{fffe}|\u{202e}){0,20}",
        ],
        target in proptest::option::of(0usize..80),
    ) {
        let options = ExplainOptions { target, ..ExplainOptions::default() };
        if let Ok(report) = explainer().explain(&text, &options) {
            let r = &report.relevance;
            for map in [&r.raw, &r.rollout, r.flow.as_ref().unwrap()] {
                prop_assert!(map.iter().flatten().all(|v| v.is_finite()));
            }
        }
    }
}

fn explainer() -> &'static Explainer {
    static EXPLAINER: OnceLock<Explainer> = OnceLock::new();
    EXPLAINER.get_or_init(|| {
        let folder = common::repo().join("models/tiny-bert-modern");
        Explainer::load(&ModelSource::Folder(folder), &Device::Cpu).unwrap()
    })
}
