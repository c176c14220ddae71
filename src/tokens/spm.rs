//! SentencePiece's model file (spm.model) read without a protobuf library: the pieces with
//! their scores and types, and the trainer and normaliser settings of its `ModelProto`.
//!
//! The format is protobuf (sentencepiece_model.proto); only the fields a tokenizer needs are
//! kept and every other field is skipped by its wire type (`super::protobuf`), as any
//! protobuf reader does. The file is not trusted: a truncated or foreign file is an error
//! naming the byte where it went wrong, never a panic.

use std::path::Path;

use super::protobuf::{Field, Fields, Value};
use crate::error::{Error, Result};
use crate::input::{read_capped, TOKENIZER_LIMIT};

/// What a piece is for (`SentencePiece.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceType {
    Normal,
    /// The unknown piece (`<unk>`, deberta-v3's `[UNK]`).
    Unknown,
    /// Never produced from text: `[CLS]`, `[SEP]`, `[PAD]`.
    Control,
    /// Always kept whole in the text.
    UserDefined,
    Unused,
    /// One of the 256 `<0xNN>` pieces of byte fallback.
    Byte,
}

impl PieceType {
    fn from_proto(value: u64) -> Option<Self> {
        Some(match value {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => return None,
        })
    }
}

/// One vocabulary entry; its id is its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Piece {
    pub piece: String,
    /// The log probability of a Unigram piece.
    pub score: f32,
    pub kind: PieceType,
}

/// The segmentation algorithm the model was trained for (`TrainerSpec.ModelType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelType {
    Unigram,
    Bpe,
    Word,
    Char,
    Other(u64),
}

/// The `TrainerSpec` fields a tokenizer reads, with protobuf's defaults where absent.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainerSpec {
    pub model_type: ModelType,
    pub unk_id: i32,
    pub byte_fallback: bool,
}

/// The `NormalizerSpec`: the rule's name (`nmt_nfkc`), its compiled table, and the
/// whitespace handling SentencePiece applies before segmenting.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizerSpec {
    pub name: String,
    pub precompiled_charsmap: Vec<u8>,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
}

/// A SentencePiece model: `ModelProto` fields 1 (pieces), 2 (trainer) and 3 (normaliser).
#[derive(Debug, Clone, PartialEq)]
pub struct SentencePieceModel {
    pub pieces: Vec<Piece>,
    pub trainer: TrainerSpec,
    pub normalizer: NormalizerSpec,
}

impl SentencePieceModel {
    /// Reads spm.model (at most [`TOKENIZER_LIMIT`] bytes).
    pub fn read(path: &Path) -> Result<Self> {
        let bad = |message: String| Error::Tokenizer {
            path: path.to_path_buf(),
            message,
        };
        let bytes = read_capped(path, TOKENIZER_LIMIT).map_err(|e| bad(e.to_string()))?;
        Self::parse(&bytes).map_err(|e| bad(format!("it is not a valid SentencePiece model ({e})")))
    }

    /// Parses the bytes of a `ModelProto`; the error says what is wrong and where.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let mut model = Self {
            pieces: Vec::new(),
            trainer: TrainerSpec {
                model_type: ModelType::Unigram,
                unk_id: 0,
                byte_fallback: false,
            },
            normalizer: NormalizerSpec {
                name: String::new(),
                precompiled_charsmap: Vec::new(),
                add_dummy_prefix: true,
                remove_extra_whitespaces: true,
            },
        };
        let mut fields = Fields::new(bytes, 0);
        while let Some(Field { number, value, at }) = fields.next_field()? {
            // A trainer or normaliser spec given twice merges into one, as in protobuf.
            match (number, value) {
                (1, Value::Bytes(b, start)) => {
                    model.pieces.push(piece(b, start, model.pieces.len())?)
                }
                (2, Value::Bytes(b, start)) => trainer(b, start, &mut model.trainer)?,
                (3, Value::Bytes(b, start)) => normalizer(b, start, &mut model.normalizer)?,
                (1..=3, _) => return Err(wrong_type(at, number, "ModelProto")),
                _ => {}
            }
        }
        if model.pieces.is_empty() {
            return Err("it has no pieces".into());
        }
        Ok(model)
    }
}

fn piece(bytes: &[u8], base: usize, id: usize) -> std::result::Result<Piece, String> {
    let mut piece = Piece {
        piece: String::new(),
        score: 0.0,
        kind: PieceType::Normal,
    };
    let mut fields = Fields::new(bytes, base);
    while let Some(Field { number, value, at }) = fields.next_field()? {
        match (number, value) {
            (1, Value::Bytes(b, start)) => piece.piece = text(b, start, "a piece")?,
            (2, Value::Fixed32(bits)) => piece.score = f32::from_bits(bits),
            (3, Value::Varint(v)) => {
                piece.kind = PieceType::from_proto(v)
                    .ok_or_else(|| format!("piece {id} has type {v}, which SentencePiece lacks"))?
            }
            (1..=3, _) => return Err(wrong_type(at, number, "SentencePiece")),
            _ => {}
        }
    }
    Ok(piece)
}

fn trainer(bytes: &[u8], base: usize, spec: &mut TrainerSpec) -> std::result::Result<(), String> {
    let mut fields = Fields::new(bytes, base);
    while let Some(Field { number, value, at }) = fields.next_field()? {
        match (number, value) {
            (3, Value::Varint(v)) => {
                spec.model_type = match v {
                    1 => ModelType::Unigram,
                    2 => ModelType::Bpe,
                    3 => ModelType::Word,
                    4 => ModelType::Char,
                    other => ModelType::Other(other),
                }
            }
            (35, Value::Varint(v)) => spec.byte_fallback = v != 0,
            // int32 is sent as a 64-bit two's complement varint: the low 32 bits are the value.
            (40, Value::Varint(v)) => spec.unk_id = v as u32 as i32,
            (3 | 35 | 40, _) => return Err(wrong_type(at, number, "TrainerSpec")),
            _ => {}
        }
    }
    Ok(())
}

fn normalizer(
    bytes: &[u8],
    base: usize,
    spec: &mut NormalizerSpec,
) -> std::result::Result<(), String> {
    let mut fields = Fields::new(bytes, base);
    while let Some(Field { number, value, at }) = fields.next_field()? {
        match (number, value) {
            (1, Value::Bytes(b, start)) => spec.name = text(b, start, "the normaliser's name")?,
            (2, Value::Bytes(b, _)) => spec.precompiled_charsmap = b.to_vec(),
            (3, Value::Varint(v)) => spec.add_dummy_prefix = v != 0,
            (4, Value::Varint(v)) => spec.remove_extra_whitespaces = v != 0,
            (1..=4, _) => return Err(wrong_type(at, number, "NormalizerSpec")),
            _ => {}
        }
    }
    Ok(())
}

fn text(bytes: &[u8], at: usize, what: &str) -> std::result::Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| format!("byte {at}: {what} is not UTF-8"))
}

fn wrong_type(at: usize, number: u32, message: &str) -> String {
    format!("byte {at}: field {number} of {message} has the wrong wire type")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn message(number: u32, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint(u64::from(number) << 3 | 2, &mut out);
        varint(body.len() as u64, &mut out);
        out.extend_from_slice(body);
        out
    }

    fn number(number: u32, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(u64::from(number) << 3, &mut out);
        varint(value, &mut out);
        out
    }

    fn piece(text: &str, score: f32, kind: u64) -> Vec<u8> {
        let mut body = message(1, text.as_bytes());
        body.push(2 << 3 | 5);
        body.extend_from_slice(&score.to_le_bytes());
        body.extend(number(3, kind));
        message(1, &body)
    }

    /// Three pieces, a trainer spec (with fields it skips: a fixed64 and a string) and a
    /// normaliser spec, as SentencePiece writes them.
    fn model() -> Vec<u8> {
        let mut bytes = piece("[UNK]", 0.0, 2);
        bytes.extend(piece("[CLS]", 0.0, 3));
        bytes.extend(piece("▁the", -3.5, 1));
        let mut trainer = number(3, 1);
        trainer.extend([9 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8]);
        trainer.extend(message(45, b"[UNK]"));
        trainer.extend(number(35, 1));
        // int32 -1 as protobuf sends it, then 0: the last value of a field wins.
        trainer.extend(number(40, u64::MAX));
        trainer.extend(number(40, 0));
        bytes.extend(message(2, &trainer));
        let mut normalizer = message(1, b"nmt_nfkc");
        normalizer.extend(message(2, &[1, 2, 3]));
        normalizer.extend(number(3, 0));
        bytes.extend(message(3, &normalizer));
        bytes
    }

    #[test]
    fn reads_pieces_trainer_and_normalizer() {
        let model = SentencePieceModel::parse(&model()).unwrap();
        let kinds: Vec<_> = model.pieces.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [PieceType::Unknown, PieceType::Control, PieceType::Normal]
        );
        assert_eq!(model.pieces[2].piece, "▁the");
        assert_eq!(model.pieces[2].score, -3.5);
        assert_eq!(
            model.trainer,
            TrainerSpec {
                model_type: ModelType::Unigram,
                unk_id: 0,
                byte_fallback: true
            }
        );
        assert_eq!(model.normalizer.name, "nmt_nfkc");
        assert_eq!(model.normalizer.precompiled_charsmap, [1, 2, 3]);
        assert!(!model.normalizer.add_dummy_prefix);
        assert!(model.normalizer.remove_extra_whitespaces);
    }

    #[test]
    fn truncated_files_are_errors_not_panics() {
        let bytes = model();
        for end in 0..bytes.len() {
            // A cut between two fields leaves a shorter valid model (or none).
            if let Err(e) = SentencePieceModel::parse(&bytes[..end]) {
                assert!(
                    e.contains("truncated") || e.contains("no pieces") || e.contains("byte"),
                    "{end}: {e}"
                );
            }
        }
        let e = SentencePieceModel::parse(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn random_bytes_are_errors_not_panics() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut refused = 0;
        for round in 0..4000 {
            let len = round % 300;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            refused += usize::from(SentencePieceModel::parse(&bytes).is_err());
        }
        assert!(refused > 3900, "only {refused} of 4000 refused");
    }

    #[test]
    fn names_what_is_wrong() {
        let err = |bytes: &[u8]| SentencePieceModel::parse(bytes).unwrap_err();
        assert!(err(b"").contains("no pieces"));
        assert!(err(&number(1, 5)).contains("field 1 of ModelProto"));
        assert!(
            err(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
                .contains("longer than 10 bytes")
        );
        assert!(err(&piece("x", 0.0, 9)).contains("type 9"));
        assert!(err(&message(1, &message(1, &[0xff, 0xfe]))).contains("not UTF-8"));
        let e = SentencePieceModel::parse(b"{\"model\": {\"type\": \"Unigram\"}}").unwrap_err();
        assert!(e.contains("byte"), "{e}");
    }

    #[test]
    fn a_file_that_is_not_a_model_is_a_tokenizer_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spm.model");
        std::fs::write(&path, b"version https://git-lfs.github.com/spec/v1\n").unwrap();
        let err = SentencePieceModel::read(&path).unwrap_err();
        assert!(matches!(err, Error::Tokenizer { .. }), "{err}");
        assert!(
            err.to_string().contains("not a valid SentencePiece model"),
            "{err}"
        );
    }
}
