//! Text to tokens with the checkpoint's own tokenizer (WordPiece, byte-level BPE or
//! SentencePiece as tokenizer.json says; BERT's vocab.txt and DeBERTa's spm.model too), never
//! padded or truncated. Special tokens and the mask token are the tokenizer's, not BERT's
//! spellings.

pub mod causal;
mod deberta;
mod protobuf;
pub mod spm;

use std::path::{Path, PathBuf};

use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{AddedToken, ModelWrapper, Token, Tokenizer};

use crate::error::{Error, Result};
use crate::input::{read_capped, read_text_capped, METADATA_LIMIT, TOKENIZER_LIMIT};

const SPECIAL: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
/// How mask tokens are spelled: BERT's and the SentencePiece/BPE families'.
const MASKS: [&str; 2] = ["[MASK]", "<mask>"];
/// The unknown token, as BERT-like and RoBERTa-like vocabularies spell it.
pub const UNKNOWN: [&str; 2] = ["[UNK]", "<unk>"];

/// A text encoded exactly as given, with the tokenizer's special tokens around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
    /// The token type of each position (1 for the second text of a pair, where the
    /// tokenizer says so).
    pub type_ids: Vec<u32>,
    /// Whether each position is a special token the tokenizer added ([CLS], `</s>`, ...).
    pub special: Vec<bool>,
}

impl Encoding {
    /// Tokens are spelled as the vocabulary has them: the tokenizers library keeps the
    /// space that a token such as RoBERTa's `<mask>` (lstrip) took from the text.
    fn from_tokenizer(encoding: &tokenizers::Encoding, tokenizer: &Tokenizer) -> Self {
        let tokens = encoding
            .get_ids()
            .iter()
            .zip(encoding.get_tokens())
            .map(|(&id, token)| tokenizer.id_to_token(id).unwrap_or_else(|| token.clone()))
            .collect();
        Self {
            ids: encoding.get_ids().to_vec(),
            tokens,
            type_ids: encoding.get_type_ids().to_vec(),
            special: encoding
                .get_special_tokens_mask()
                .iter()
                .map(|&m| m == 1)
                .collect(),
        }
    }
}

/// The checkpoint's tokenizer.
pub struct TextTokenizer {
    inner: Tokenizer,
}

impl TextTokenizer {
    /// A checkpoint's tokenizer: `tokenizer` is its tokenizer.json, or a vocab.txt for
    /// BERT's tokenizer, lowercasing unless `tokenizer_config` (tokenizer_config.json) says
    /// `"do_lower_case": false`.
    pub fn load(tokenizer: &Path, tokenizer_config: Option<&Path>) -> Result<Self> {
        if tokenizer.file_name().is_some_and(|n| n == "vocab.txt") {
            Self::from_vocab(tokenizer, lowercase(tokenizer_config)?)
        } else {
            Self::from_tokenizer_json(tokenizer)
        }
    }

    /// Loads tokenizer.json, dropping any padding or truncation it asks for: the
    /// explainer must see exactly the given text.
    pub fn from_tokenizer_json(path: &Path) -> Result<Self> {
        Ok(Self {
            inner: tokenizer_json(path)?,
        })
    }

    /// Builds BERT's tokenizer from a vocab.txt, as the original BertTokenizer does.
    pub fn from_vocab(path: &Path, lowercase: bool) -> Result<Self> {
        let bad = |message: String| Error::Tokenizer {
            path: path.to_path_buf(),
            message,
        };
        let bytes = read_capped(path, TOKENIZER_LIMIT).map_err(|e| bad(e.to_string()))?;
        let vocab = WordPiece::read_bytes(&bytes).map_err(|e| bad(e.to_string()))?;
        let model = WordPiece::builder()
            .vocab(vocab)
            .unk_token("[UNK]".into())
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let mut inner = Tokenizer::new(model);
        let ids: Vec<Option<u32>> = SPECIAL.iter().map(|t| inner.token_to_id(t)).collect();
        let (Some(cls), Some(sep)) = (ids[2], ids[3]) else {
            return Err(bad("the vocabulary lacks [CLS] or [SEP]".into()));
        };
        inner
            .with_normalizer(Some(BertNormalizer::new(true, true, None, lowercase)))
            .map_err(|e| bad(e.to_string()))?
            .with_pre_tokenizer(Some(BertPreTokenizer))
            .with_post_processor(Some(BertProcessing::new(
                ("[SEP]".into(), sep),
                ("[CLS]".into(), cls),
            )));
        let special = SPECIAL
            .iter()
            .zip(&ids)
            .filter(|(_, id)| id.is_some())
            .map(|(t, _)| AddedToken::from(*t, true));
        inner
            .add_special_tokens(special)
            .map_err(|e| bad(e.to_string()))?;
        Ok(Self { inner })
    }

    /// DeBERTa-v2/v3's tokenizer from its spm.model (a SentencePiece Unigram), as transformers'
    /// DebertaV2Tokenizer builds it; `beside` finds the checkpoint's other tokenizer files
    /// (tokenizer_config.json, special_tokens_map.json, added_tokens.json) where it has them.
    pub fn from_spm(path: &Path, beside: impl Fn(&str) -> Option<PathBuf>) -> Result<Self> {
        Ok(Self {
            inner: deberta::tokenizer(path, &beside)?,
        })
    }

    /// Encodes `text` (and the second text of a pair) with the tokenizer's special tokens. An
    /// empty second text is no pair, as in transformers (`tokenizer(text, "")` is
    /// `tokenizer(text)`), so no empty segment and second separator appear.
    pub fn encode(&self, text: &str, pair: Option<&str>) -> Result<Encoding> {
        let encoding = match pair.filter(|p| !p.is_empty()) {
            None => self.inner.encode(text, true),
            Some(pair) => self.inner.encode((text, pair), true),
        }
        .map_err(|e| Error::Encode(e.to_string()))?;
        Ok(Encoding::from_tokenizer(&encoding, &self.inner))
    }

    /// `--pretokenized`: `text` is whitespace-separated tokens, each looked up in the
    /// vocabulary as it is (no normalising, no splitting: SMILES, protein or DNA tokens);
    /// the tokenizer's special tokens go around them as for [`Self::encode`].
    pub fn encode_pretokenized(&self, text: &str, pair: Option<&str>) -> Result<Encoding> {
        let sequence = |text: &str, type_id: u32| -> Result<tokenizers::Encoding> {
            let tokens = text
                .split_whitespace()
                .map(|token| match self.inner.token_to_id(token) {
                    Some(id) => Ok(Token::new(id, token.to_string(), (0, 0))),
                    None => Err(Error::UnknownToken {
                        token: token.to_string(),
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(tokenizers::Encoding::from_tokens(tokens, type_id))
        };
        let first = sequence(text, 0)?;
        let second = pair.map(|p| sequence(p, 1)).transpose()?;
        let encoding = self
            .inner
            .post_process(first, second, true)
            .map_err(|e| Error::Encode(e.to_string()))?;
        Ok(Encoding::from_tokenizer(&encoding, &self.inner))
    }

    /// The id of `word` when it is one token; otherwise an error naming its pieces. For
    /// BPE and SentencePiece vocabularies the word is looked up as it reads after a space
    /// (`Ġhis`, `▁his`), the form a word in a sentence takes, then as typed.
    pub fn single_piece(&self, word: &str) -> Result<u32> {
        let wordpiece = matches!(self.inner.get_model(), ModelWrapper::WordPiece(_));
        let spaced = format!(" {word}");
        let forms: &[&str] = match wordpiece {
            true => &[word],
            false => &[&spaced, word],
        };
        let mut pieces = Vec::new();
        for form in forms {
            let encoding = self
                .inner
                .encode(*form, false)
                .map_err(|e| Error::Encode(e.to_string()))?;
            match encoding.get_ids() {
                [_] if UNKNOWN.contains(&encoding.get_tokens()[0].as_str())
                    && !UNKNOWN.contains(&word) =>
                {
                    pieces.push(format!("{:?}, the unknown token", encoding.get_tokens()))
                }
                [id] => return Ok(*id),
                _ => pieces.push(format!("{:?}", encoding.get_tokens())),
            }
        }
        Err(Error::CandidateNotOneWordpiece {
            word: word.to_string(),
            pieces: pieces.join(" or "),
        })
    }

    /// The vocabulary entry for `id`.
    pub fn token(&self, id: u32) -> String {
        self.inner
            .id_to_token(id)
            .unwrap_or_else(|| format!("[id {id}]"))
    }

    /// The id of the mask token ([MASK] or `<mask>`), if the vocabulary has one.
    pub fn mask_id(&self) -> Option<u32> {
        MASKS.iter().find_map(|m| self.token_id(m))
    }

    /// The id of a vocabulary entry such as `[UNK]`.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

/// A tokenizer.json (read within [`TOKENIZER_LIMIT`]) without the padding and truncation
/// it may ask for.
pub fn tokenizer_json(path: &Path) -> Result<Tokenizer> {
    let bad = |message: String| Error::Tokenizer {
        path: path.to_path_buf(),
        message,
    };
    let bytes = read_capped(path, TOKENIZER_LIMIT).map_err(|e| bad(e.to_string()))?;
    let mut inner = Tokenizer::from_bytes(bytes).map_err(|e| bad(e.to_string()))?;
    inner.with_padding(None);
    inner
        .with_truncation(None)
        .map_err(|e| bad(e.to_string()))?;
    Ok(inner)
}

/// Whether a vocab.txt tokenizer lowercases: tokenizer_config.json's `do_lower_case`, else
/// yes. A tokenizer_config.json that cannot be read is an error, not a default: the casing
/// would be a guess.
fn lowercase(tokenizer_config: Option<&Path>) -> Result<bool> {
    let Some(path) = tokenizer_config else {
        return Ok(true);
    };
    match json_object(path)?.get("do_lower_case") {
        None => Ok(true),
        Some(setting) => setting.as_bool().ok_or_else(|| Error::Tokenizer {
            path: path.to_path_buf(),
            message: format!("do_lower_case is {setting}, not true or false"),
        }),
    }
}

/// A tokenizer's JSON settings file (tokenizer_config.json and the like), which must hold
/// one object; read within [`METADATA_LIMIT`].
fn json_object(path: &Path) -> Result<serde_json::Map<String, serde_json::Value>> {
    let wrong = |message: String| Error::Tokenizer {
        path: path.to_path_buf(),
        message,
    };
    let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| wrong(e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| wrong(format!("not valid JSON ({e})")))?;
    match value {
        serde_json::Value::Object(map) => Ok(map),
        _ => Err(wrong("not a JSON object".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab_tokenizer() -> (tempfile::TempDir, TextTokenizer) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vocab.txt");
        let words = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nbook\nback\n##ache\n.\n";
        std::fs::write(&path, words).unwrap();
        let tokenizer = TextTokenizer::from_vocab(&path, true).unwrap();
        (dir, tokenizer)
    }

    #[test]
    fn vocab_tokenizer_keeps_mask_whole_and_lowercases() {
        let (_dir, tokenizer) = vocab_tokenizer();
        let encoding = tokenizer.encode("The [MASK] Book.", None).unwrap();
        assert_eq!(
            encoding.tokens,
            ["[CLS]", "the", "[MASK]", "book", ".", "[SEP]"]
        );
        assert_eq!(encoding.ids, [2, 5, 4, 6, 9, 3]);
        assert_eq!(encoding.special, [true, false, false, false, false, true]);
        let pair = tokenizer.encode("the", Some("book")).unwrap();
        assert_eq!(pair.tokens, ["[CLS]", "the", "[SEP]", "book", "[SEP]"]);
        assert_eq!(pair.type_ids, [0, 0, 0, 1, 1]);
    }

    #[test]
    fn pretokenized_text_is_looked_up_as_it_is() {
        let (_dir, tokenizer) = vocab_tokenizer();
        let encoding = tokenizer
            .encode_pretokenized(" ##ache  the\tback ", None)
            .unwrap();
        assert_eq!(encoding.tokens, ["[CLS]", "##ache", "the", "back", "[SEP]"]);
        assert_eq!(encoding.ids, [2, 8, 5, 7, 3]);
        let err = tokenizer.encode_pretokenized("the Book", None).unwrap_err();
        assert!(err.to_string().contains("\"Book\""), "{err}");
        let pair = tokenizer.encode_pretokenized("the", Some("book")).unwrap();
        assert_eq!(pair.type_ids, [0, 0, 0, 1, 1]);
    }

    #[test]
    fn names_the_pieces_of_a_split_candidate() {
        let (_dir, tokenizer) = vocab_tokenizer();
        assert_eq!(tokenizer.single_piece("book").unwrap(), 6);
        let err = tokenizer.single_piece("backache").unwrap_err();
        assert!(
            err.to_string().contains(r###"["back", "##ache"]"###),
            "{err}"
        );
    }
}
