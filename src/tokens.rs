//! Text to wordpieces with the checkpoint's own tokenizer, never padded or truncated.

use std::path::Path;

use tokenizers::models::wordpiece::WordPiece;
use tokenizers::normalizers::BertNormalizer;
use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
use tokenizers::processors::bert::BertProcessing;
use tokenizers::{AddedToken, Tokenizer};

use crate::error::{Error, Result};
use crate::input::{read_capped, TOKENIZER_LIMIT};

const SPECIAL: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// A text encoded exactly as given: [CLS], the wordpieces, [SEP].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
}

/// The checkpoint's wordpiece tokenizer.
pub struct TextTokenizer {
    inner: Tokenizer,
}

impl TextTokenizer {
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

    /// Encodes `text` with [CLS] and [SEP].
    pub fn encode(&self, text: &str) -> Result<Encoding> {
        let encoding = self
            .inner
            .encode(text, true)
            .map_err(|e| Error::Encode(e.to_string()))?;
        Ok(Encoding {
            ids: encoding.get_ids().to_vec(),
            tokens: encoding.get_tokens().to_vec(),
        })
    }

    /// The id of `word` when it is one wordpiece; otherwise an error naming its pieces.
    pub fn single_piece(&self, word: &str) -> Result<u32> {
        let encoding = self
            .inner
            .encode(word, false)
            .map_err(|e| Error::Encode(e.to_string()))?;
        match encoding.get_ids() {
            [id] => Ok(*id),
            _ => Err(Error::CandidateNotOneWordpiece {
                word: word.to_string(),
                pieces: format!("{:?}", encoding.get_tokens()),
            }),
        }
    }

    /// The vocabulary entry for `id`.
    pub fn token(&self, id: u32) -> String {
        self.inner
            .id_to_token(id)
            .unwrap_or_else(|| format!("[id {id}]"))
    }

    /// The id of [MASK], if the vocabulary has one.
    pub fn mask_id(&self) -> Option<u32> {
        self.token_id("[MASK]")
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
        let encoding = tokenizer.encode("The [MASK] Book.").unwrap();
        assert_eq!(
            encoding.tokens,
            ["[CLS]", "the", "[MASK]", "book", ".", "[SEP]"]
        );
        assert_eq!(encoding.ids, [2, 5, 4, 6, 9, 3]);
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
