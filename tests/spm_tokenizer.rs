//! DeBERTa's spm.model read by bert-explain against transformers' DebertaV2Tokenizer: every
//! text of tests/fixtures/spm/<variant>/expected.json (scripts/reference/make_spm_fixtures.py)
//! must come out with the same ids, tokens, type ids and special-token flags, exactly.

use std::path::{Path, PathBuf};

use bert_explain::tokens::spm::{ModelType, PieceType, SentencePieceModel};
use bert_explain::tokens::TextTokenizer;
use serde::Deserialize;

#[derive(Deserialize)]
struct Expected {
    transformers: String,
    vocab_size: usize,
    mask_id: u32,
    model: Option<ModelSummary>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct ModelSummary {
    pieces: usize,
    first_pieces: Vec<(String, f32, u64)>,
    piece_300: (String, f32, u64),
    last_piece: (String, f32, u64),
    types: std::collections::BTreeMap<String, usize>,
    model_type: u64,
    unk_id: i32,
    byte_fallback: bool,
    normalizer: String,
    precompiled_charsmap_bytes: usize,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    pair: Option<String>,
    ids: Vec<u32>,
    tokens: Vec<String>,
    type_ids: Vec<u32>,
    special: Vec<u8>,
}

fn spm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spm")
}

/// A variant's spm.model: its own, or tiny's, which the flag-only variants share.
fn spm_model(variant: &str) -> PathBuf {
    let own = spm_dir().join(variant).join("spm.model");
    match own.exists() {
        true => own,
        false => spm_dir().join("tiny/spm.model"),
    }
}

/// The tokenizer of a variant, its JSON files found beside it as a checkpoint folder's are.
fn tokenizer(variant: &str) -> TextTokenizer {
    let folder = spm_dir().join(variant);
    let beside = |name: &str| Some(folder.join(name)).filter(|p| p.exists());
    TextTokenizer::from_spm(&spm_model(variant), beside).unwrap()
}

fn expected(variant: &str) -> Expected {
    let path = spm_dir().join(variant).join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Compares every case and lists every difference before failing, so one run shows them all.
fn matches_transformers(variant: &str) -> usize {
    let tokenizer = tokenizer(variant);
    let expected = expected(variant);
    assert_eq!(expected.transformers, "5.23.0");
    assert_eq!(tokenizer.mask_id(), Some(expected.mask_id), "{variant}");
    assert_eq!(
        tokenizer.token(expected.vocab_size as u32 - 1),
        tokenizer.token(expected.mask_id),
        "{variant}: the last id is the mask token's"
    );
    let mut differences = Vec::new();
    for case in &expected.cases {
        let ours = tokenizer.encode(&case.text, case.pair.as_deref()).unwrap();
        let special: Vec<u8> = ours.special.iter().map(|&s| u8::from(s)).collect();
        if (&ours.ids, &ours.tokens, &ours.type_ids, &special)
            != (&case.ids, &case.tokens, &case.type_ids, &case.special)
        {
            differences.push(format!(
                "{:?} / {:?}:\n  ours   {:?} {:?} {:?} {:?}\n  theirs {:?} {:?} {:?} {:?}",
                case.text,
                case.pair,
                ours.tokens,
                ours.ids,
                ours.type_ids,
                special,
                case.tokens,
                case.ids,
                case.type_ids,
                case.special
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{variant}: {} of {} cases differ from transformers:\n{}",
        differences.len(),
        expected.cases.len(),
        differences.join("\n")
    );
    expected.cases.len()
}

#[test]
fn deberta_v3_layout_matches_transformers() {
    assert!(matches_transformers("tiny") > 400);
}

#[test]
fn lowercase_and_punctuation_splitting_match_transformers() {
    assert!(matches_transformers("lower-punct") > 400);
}

#[test]
fn saved_fine_tune_config_matches_transformers() {
    // added_tokens_decoder, a user-defined piece, [MASK] with lstrip.
    matches_transformers("saved");
}

#[test]
fn legacy_added_tokens_match_transformers() {
    matches_transformers("legacy");
    matches_transformers("legacy-bare");
}

#[test]
fn no_prefix_space_and_split_special_tokens_match_transformers() {
    matches_transformers("first-split");
}

#[test]
fn mask_token_comes_after_the_vocabulary() {
    let tokenizer = tokenizer("tiny");
    let encoding = tokenizer.encode("a [MASK] b", None).unwrap();
    assert_eq!(tokenizer.mask_id(), Some(1500));
    assert!(encoding.ids.contains(&1500));
    assert_eq!(tokenizer.token(1500), "[MASK]");
    assert_eq!(tokenizer.token_id("[UNK]"), Some(3));
    assert_eq!(encoding.special.first(), Some(&true));
    assert_eq!(encoding.special.last(), Some(&true));
    // The explainer asks for a candidate as the word reads after a space.
    assert_eq!(
        tokenizer.single_piece("the").unwrap(),
        tokenizer.token_id("▁the").unwrap()
    );
    let pretokenized = tokenizer.encode_pretokenized("▁the [MASK]", None).unwrap();
    assert_eq!(pretokenized.tokens, ["[CLS]", "▁the", "[MASK]", "[SEP]"]);
}

#[test]
fn reads_spm_model_as_protobuf_does() {
    let model = SentencePieceModel::read(&spm_dir().join("tiny/spm.model")).unwrap();
    let summary = expected("tiny").model.unwrap();
    let as_tuple = |p: &bert_explain::tokens::spm::Piece| {
        let kind = match p.kind {
            PieceType::Normal => 1,
            PieceType::Unknown => 2,
            PieceType::Control => 3,
            PieceType::UserDefined => 4,
            PieceType::Unused => 5,
            PieceType::Byte => 6,
        };
        (p.piece.clone(), p.score, kind)
    };
    assert_eq!(model.pieces.len(), summary.pieces);
    let first: Vec<_> = model.pieces[..6].iter().map(as_tuple).collect();
    assert_eq!(first, summary.first_pieces);
    assert_eq!(as_tuple(&model.pieces[300]), summary.piece_300);
    assert_eq!(as_tuple(model.pieces.last().unwrap()), summary.last_piece);
    for (kind, count) in &summary.types {
        let n = model
            .pieces
            .iter()
            .filter(|p| as_tuple(p).2.to_string() == *kind)
            .count();
        assert_eq!(n, *count, "pieces of type {kind}");
    }
    assert_eq!(summary.model_type, 1);
    assert_eq!(model.trainer.model_type, ModelType::Unigram);
    assert_eq!(model.trainer.unk_id, summary.unk_id);
    assert_eq!(model.trainer.byte_fallback, summary.byte_fallback);
    assert_eq!(model.normalizer.name, summary.normalizer);
    assert_eq!(
        model.normalizer.precompiled_charsmap.len(),
        summary.precompiled_charsmap_bytes
    );
    assert_eq!(model.normalizer.add_dummy_prefix, summary.add_dummy_prefix);
    assert_eq!(
        model.normalizer.remove_extra_whitespaces,
        summary.remove_extra_whitespaces
    );
}

#[test]
fn garbage_or_truncated_spm_model_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spm.model");
    let real = std::fs::read(spm_dir().join("tiny/spm.model")).unwrap();
    let cases: [(&[u8], &str); 3] = [
        (b"not a model at all", "not a valid SentencePiece model"),
        (&real[..real.len() / 2], "truncated"),
        (b"", "no pieces"),
    ];
    for (bytes, says) in cases {
        std::fs::write(&path, bytes).unwrap();
        let err = TextTokenizer::from_spm(&path, |_| None)
            .err()
            .expect("an error");
        let message = err.to_string();
        assert!(message.contains(says), "{message}");
        assert!(message.contains("spm.model"), "{message}");
    }
}

#[test]
fn bpe_sentencepiece_model_is_refused() {
    // The tiny model with its trainer spec's model_type set to BPE (2): a second TrainerSpec
    // message merges into the first, as protobuf says.
    let mut bytes = std::fs::read(spm_dir().join("tiny/spm.model")).unwrap();
    bytes.extend([2 << 3 | 2, 2, 3 << 3, 2]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spm.model");
    std::fs::write(&path, bytes).unwrap();
    let err = TextTokenizer::from_spm(&path, |_| None)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("Bpe"), "{err}");
}
