//! transformers' `DebertaV2Tokenizer` rebuilt from spm.model and the JSON files beside it,
//! for checkpoints (microsoft/deberta-v3-base and its fine-tunes) with no tokenizer.json.
//!
//! transformers 5 builds this tokenizer itself rather than running SentencePiece: a Unigram
//! over every piece of spm.model (byte fallback off, whatever the model says), its own
//! normaliser (lowercase if `do_lower_case`; `\s{2,}` and `[\n\r\t]` to one space; NFC; strip
//! the right end; SentencePiece's precompiled charsmap is not used), optional punctuation
//! splitting, Metaspace `▁`, and `[CLS] A [SEP] B [SEP]`. The added tokens (the named special
//! tokens, the model's control and user-defined pieces, added_tokens_decoder or the legacy
//! added_tokens.json) are added in transformers' order, so one missing from the vocabulary
//! (deberta-v3's `[MASK]`) gets the id after it, as there.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::replace::ReplacePattern;
use tokenizers::normalizers::{Lowercase, Replace, Sequence, Strip, NFC};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::punctuation::Punctuation;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::Tokenizer;
use tokenizers::{AddedToken, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior};

use super::json_object;
use super::spm::{ModelType, PieceType, SentencePieceModel};
use crate::error::{Error, Result};

/// The named special tokens in transformers' order (`SPECIAL_TOKENS_ATTRIBUTES`) with
/// DebertaV2Tokenizer's defaults.
const NAMED: [(&str, &str); 7] = [
    ("bos_token", "[CLS]"),
    ("eos_token", "[SEP]"),
    ("unk_token", "[UNK]"),
    ("sep_token", "[SEP]"),
    ("pad_token", "[PAD]"),
    ("cls_token", "[CLS]"),
    ("mask_token", "[MASK]"),
];

/// The tokenizer of spm.model at `spm`; `beside` finds the other files of the checkpoint
/// (tokenizer_config.json, special_tokens_map.json, added_tokens.json) when it has them.
pub fn tokenizer(spm: &Path, beside: &dyn Fn(&str) -> Option<PathBuf>) -> Result<Tokenizer> {
    let bad = |message: String| Error::Tokenizer {
        path: spm.to_path_buf(),
        message,
    };
    let model = SentencePieceModel::read(spm)?;
    if model.trainer.model_type != ModelType::Unigram {
        return Err(bad(format!(
            "it is a SentencePiece {:?} model, and bert-explain builds the Unigram tokenizer \
             of DeBERTa-v2/v3 from spm.model; give the checkpoint's tokenizer.json instead",
            model.trainer.model_type
        )));
    }
    let settings = Settings::read(beside)?;
    let unk = settings.named("unk_token").map(|t| t.content.clone());
    // transformers takes the unknown token's position when it is a piece of score 0, and the
    // trainer's unk_id otherwise.
    let unk_id = model
        .pieces
        .iter()
        .position(|p| Some(&p.piece) == unk.as_ref() && p.score == 0.0)
        .or_else(|| usize::try_from(model.trainer.unk_id).ok())
        .filter(|&id| id < model.pieces.len())
        .ok_or_else(|| bad(format!("unk_id {} is not a piece", model.trainer.unk_id)))?;
    let vocab = model
        .pieces
        .iter()
        .map(|p| (p.piece.clone(), f64::from(p.score)))
        .collect();
    let unigram = Unigram::from(vocab, Some(unk_id), false).map_err(|e| bad(e.to_string()))?;
    let mut inner = Tokenizer::new(unigram);

    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if settings.flag("do_lower_case", false)? {
        normalizers.push(Lowercase.into());
    }
    let spaces = Replace::new(ReplacePattern::Regex(r"\s{2,}|[\n\r\t]".into()), " ")
        .map_err(|e| bad(e.to_string()))?;
    normalizers.extend([spaces.into(), NFC.into(), Strip::new(false, true).into()]);
    let prepend = match settings.flag("add_prefix_space", true)? {
        true => PrependScheme::Always,
        false => PrependScheme::First,
    };
    let metaspace = Metaspace::new('▁', prepend, true);
    let mut pre_tokenizers: Vec<PreTokenizerWrapper> = Vec::new();
    if settings.flag("split_by_punct", false)? {
        pre_tokenizers.push(Punctuation::new(SplitDelimiterBehavior::Isolated).into());
    }
    pre_tokenizers.push(metaspace.clone().into());
    inner
        .with_normalizer(Some(Sequence::new(normalizers)))
        .map_err(|e| bad(e.to_string()))?
        .with_pre_tokenizer(Some(PreSequence::new(pre_tokenizers)))
        .with_decoder(Some(metaspace));

    let added = settings.added_tokens(&model);
    inner.add_tokens(added).map_err(|e| bad(e.to_string()))?;
    inner.set_encode_special_tokens(settings.flag("split_special_tokens", false)?);

    let special = |key: &str| -> Result<(String, u32)> {
        let token = settings
            .named(key)
            .ok_or_else(|| bad(format!("tokenizer_config.json sets no {key}")))?;
        // 0 is transformers' fallback; every named token was added above, so none needs it.
        let id = inner.token_to_id(&token.content).unwrap_or(0);
        Ok((token.content.clone(), id))
    };
    let (cls, sep) = (special("cls_token")?, special("sep_token")?);
    let template = TemplateProcessing::builder()
        .try_single(format!("{}:0 $A:0 {}:0", cls.0, sep.0))
        .and_then(|t| t.try_pair(format!("{0}:0 $A:0 {1}:0 $B:1 {1}:1", cls.0, sep.0)))
        .map_err(|e| bad(e.to_string()))?
        .special_tokens(vec![cls, sep])
        .build()
        .map_err(|e| bad(e.to_string()))?;
    inner.with_post_processor(Some(template));
    Ok(inner)
}

/// The JSON files beside spm.model, as transformers merges them.
struct Settings {
    path: PathBuf,
    config: Map<String, Value>,
    named: Vec<(&'static str, Option<AddedToken>)>,
    /// added_tokens_decoder, or the legacy added_tokens.json, in id order.
    decoder: Vec<AddedToken>,
    /// The extra special tokens the config lists, which replace the model's.
    extras: Option<Vec<AddedToken>>,
}

impl Settings {
    fn read(beside: &dyn Fn(&str) -> Option<PathBuf>) -> Result<Self> {
        let object = |name: &str| -> Result<Option<(PathBuf, Map<String, Value>)>> {
            beside(name)
                .map(|path| json_object(&path).map(|map| (path, map)))
                .transpose()
        };
        let (path, config) = object("tokenizer_config.json")?
            .unwrap_or_else(|| ("tokenizer_config.json".into(), Map::new()));
        let token = |path: &Path, value: &Value, force: bool| {
            added_token(value, force).ok_or_else(|| Error::Tokenizer {
                path: path.to_path_buf(),
                message: format!("{value} is not a token (a string, or an object with content)"),
            })
        };
        let mut named = NAMED
            .iter()
            .map(|&(key, default)| match config.get(key) {
                None => Ok((key, Some(AddedToken::from(default, true)))),
                Some(Value::Null) => Ok((key, None)),
                Some(value) => Ok((key, Some(token(&path, value, false)?))),
            })
            .collect::<Result<Vec<_>>>()?;
        let extras = ["extra_special_tokens", "additional_special_tokens"]
            .iter()
            .find_map(|key| config.get(*key).and_then(Value::as_array))
            .map(|list| list.iter().map(|v| token(&path, v, false)).collect())
            .transpose()?;
        let decoder = match config.get("added_tokens_decoder") {
            Some(Value::Object(entries)) => {
                let mut entries = entries
                    .iter()
                    .map(|(id, v)| Ok((id.parse::<u64>().ok(), token(&path, v, false)?)))
                    .collect::<Result<Vec<_>>>()?;
                entries.sort_by_key(|(id, _)| *id);
                entries.into_iter().map(|(_, token)| token).collect()
            }
            Some(other) => {
                return Err(Error::Tokenizer {
                    path,
                    message: format!("added_tokens_decoder is {other}, not an object"),
                })
            }
            // Only without added_tokens_decoder does transformers read the two legacy files,
            // and only the names the config sets decide which added tokens are special.
            None => {
                let given = NAMED.iter().filter_map(|(key, _)| config.get(*key));
                let mut set: Vec<String> = given
                    .filter_map(|value| added_token(value, false))
                    .chain(extras.iter().flatten().cloned())
                    .map(|token| token.content)
                    .collect();
                if let Some((map_path, map)) = object("special_tokens_map.json")? {
                    for (key, slot) in &mut named {
                        if let Some(value) = map.get(*key) {
                            let value = token(&map_path, value, true)?;
                            set.push(value.content.clone());
                            *slot = Some(value);
                        }
                    }
                }
                legacy_added_tokens(object("added_tokens.json")?, &set)?
            }
        };
        Ok(Self {
            path,
            config,
            named,
            decoder,
            extras,
        })
    }

    /// A flag of tokenizer_config.json: absent is the default, null is false (Python's
    /// truthiness).
    fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.config.get(key) {
            None => Ok(default),
            Some(Value::Null) => Ok(false),
            Some(value) => value.as_bool().ok_or_else(|| Error::Tokenizer {
                path: self.path.clone(),
                message: format!("{key} is {value}, not true or false"),
            }),
        }
    }

    fn named(&self, key: &str) -> Option<&AddedToken> {
        self.named
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, t)| t.as_ref())
    }

    /// What transformers adds after building the Unigram, in its order: added_tokens_decoder,
    /// the named tokens, then the extra special tokens (by default the model's control
    /// pieces, special, and user-defined pieces, not special); a token seen already is not
    /// added twice, and a named one is always special.
    fn added_tokens(&self, model: &SentencePieceModel) -> Vec<AddedToken> {
        let from_model = || {
            model
                .pieces
                .iter()
                .filter(|p| matches!(p.kind, PieceType::Control | PieceType::UserDefined))
                .map(|p| {
                    let mut token = AddedToken::from(p.piece.clone(), false);
                    token.normalized = false;
                    token.special = p.kind == PieceType::Control;
                    token
                })
                .collect::<Vec<_>>()
        };
        let named = self.named.iter().filter_map(|(_, t)| t.clone());
        let extras = self.extras.clone().unwrap_or_else(from_model);
        let mut tokens: Vec<AddedToken> = Vec::new();
        for token in self.decoder.iter().cloned().chain(named).chain(extras) {
            if tokens.iter().all(|t| t.content != token.content) {
                tokens.push(token);
            }
        }
        for token in &mut tokens {
            let is_named = self.named.iter().flat_map(|(_, t)| t);
            if is_named.into_iter().any(|n| n.content == token.content) {
                token.special = true;
            }
        }
        tokens
    }
}

/// An AddedToken as transformers reads one: a string (special, as transformers makes every
/// string token it adds), or an object with `content` and optional flags; `force` makes it
/// special before the flags' defaults are taken (special_tokens_map.json's objects).
fn added_token(value: &Value, force: bool) -> Option<AddedToken> {
    if let Some(content) = value.as_str() {
        return Some(AddedToken::from(content, true));
    }
    let object = value.as_object()?;
    let flag = |key: &str| object.get(key).and_then(Value::as_bool);
    let is_special = force || flag("special").unwrap_or(false);
    let mut token = AddedToken::from(object.get("content")?.as_str()?, is_special);
    token.single_word = flag("single_word").unwrap_or(false);
    token.lstrip = flag("lstrip").unwrap_or(false);
    token.rstrip = flag("rstrip").unwrap_or(false);
    token.normalized = flag("normalized").unwrap_or(!is_special);
    Some(token)
}

/// added_tokens.json (`{"[MASK]": 128000}`, written by transformers 4's slow tokenizer), in id
/// order: a token is special, and then not normalised, when `special` (the names the
/// checkpoint's files set) has it.
fn legacy_added_tokens(
    file: Option<(PathBuf, Map<String, Value>)>,
    special: &[String],
) -> Result<Vec<AddedToken>> {
    let Some((path, map)) = file else {
        return Ok(Vec::new());
    };
    let mut entries = map
        .iter()
        .map(|(content, id)| match id.as_u64() {
            Some(id) => Ok((id, content.clone())),
            None => Err(Error::Tokenizer {
                path: path.clone(),
                message: format!("the id of {content:?} is {id}, not a number"),
            }),
        })
        .collect::<Result<Vec<_>>>()?;
    entries.sort();
    Ok(entries
        .into_iter()
        .map(|(_, content)| {
            let is_special = special.contains(&content);
            AddedToken::from(content, is_special)
        })
        .collect())
}
