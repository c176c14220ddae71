//! The pipeline for one sentence: tokens, forward pass, attention stack, relevance, report.
//! Also the same maps for an attention stack saved by another framework.

use candle_core::{Device, Tensor};

use crate::attention::AttentionStack;
use crate::checkpoint::{BertConfig, CheckpointFiles, ModelSource};
use crate::device::device_name;
use crate::error::{Error, Result};
use crate::evaluate::Evaluation;
use crate::importance::{importance, Blank, ImportanceQuery};
use crate::model::BertForMaskedLm;
use crate::relevance::{AttentionGraph, RelevanceOptions};
use crate::report::{Prediction, Report, Target, WordProbability};
use crate::tokens::TextTokenizer;

/// What to explain and report, beyond the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainOptions {
    /// The position to explain; `None` means the one [MASK].
    pub target: Option<usize>,
    /// Words whose probability to report; each must be one wordpiece.
    pub candidates: Vec<String>,
    /// How many top predictions to report.
    pub top_k: usize,
    pub relevance: RelevanceOptions,
    /// Also compute rollout and flow from every position.
    pub all_positions: bool,
    /// Also score each token's importance and correlate the maps with the scores.
    pub evaluate: Option<EvaluateOptions>,
}

/// What `--evaluate` scores.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EvaluateOptions {
    /// The word whose probability is explained (one wordpiece); `None`: the top prediction.
    pub word: Option<String>,
    pub blank: Blank,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        Self {
            target: None,
            candidates: vec!["his".into(), "her".into()],
            top_k: 5,
            relevance: RelevanceOptions::default(),
            all_positions: false,
            evaluate: None,
        }
    }
}

/// A loaded checkpoint, ready to explain any number of sentences.
pub struct Explainer {
    name: String,
    device: Device,
    config: BertConfig,
    tokenizer: TextTokenizer,
    model: BertForMaskedLm,
}

impl Explainer {
    /// Finds (downloading if needed) and loads a checkpoint onto `device`.
    pub fn load(source: &ModelSource, device: &Device) -> Result<Self> {
        let files = CheckpointFiles::locate(source)?;
        let (config, weights) = files.load_model_files(device)?;
        let tokenizer = files.load_tokenizer()?;
        let model = BertForMaskedLm::load(&weights, &config)?;
        Ok(Self {
            name: source.to_string(),
            device: device.clone(),
            config,
            tokenizer,
            model,
        })
    }

    /// Whether the checkpoint can predict words (has a masked-LM head).
    pub fn has_mlm_head(&self) -> bool {
        self.model.has_mlm_head()
    }

    /// Explains the prediction at the target position of `text`.
    pub fn explain(&self, text: &str, options: &ExplainOptions) -> Result<Report> {
        if text.trim().is_empty() {
            return Err(Error::EmptyText);
        }
        let encoding = self.tokenizer.encode(text)?;
        let n = encoding.ids.len();
        if n > self.config.max_position_embeddings {
            return Err(Error::TextTooLong {
                len: n,
                max: self.config.max_position_embeddings,
            });
        }
        let rows = self.config.vocab_size;
        if let Some(i) = encoding.ids.iter().position(|&id| id as usize >= rows) {
            return Err(Error::TokenOutsideEmbeddings {
                token: encoding.tokens[i].clone(),
                id: encoding.ids[i],
                rows,
            });
        }
        let mask = self.tokenizer.mask_id();
        let target = resolve_target(&encoding.tokens, options.target, |i| {
            Some(encoding.ids[i]) == mask
        })?
        .ok_or_else(|| {
            let tokens = listing(&encoding.tokens);
            match mask {
                Some(_) => Error::NoMask { tokens },
                None => Error::NoMaskToken { tokens },
            }
        })?;
        let candidates = if self.has_mlm_head() {
            self.candidate_ids(&options.candidates)?
        } else {
            Vec::new()
        };

        let input = Tensor::new(encoding.ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let output = self.model.forward(&input, target)?;
        let stack = AttentionStack::from_tensors(&output.attentions)?;
        let logits = output.logits.map(|l| l.squeeze(0)).transpose()?;
        let prediction = match &logits {
            Some(logits) => Some(self.predict(logits, &candidates, options.top_k)?),
            None => None,
        };
        let importance = match (&options.evaluate, &logits) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::NeedsMlmHead {
                    what: "--evaluate",
                    model: self.name.clone(),
                })
            }
            (Some(evaluate), Some(logits)) => {
                let query = self.importance_query(evaluate, logits)?;
                Some(importance(&self.model, &encoding.ids, target, &query)?)
            }
        };
        let source = Source {
            model: &self.name,
            device: &self.device,
            tokens: encoding.tokens,
        };
        let mut report = assemble(source, &stack, target, prediction, options)?;
        report.evaluation = importance
            .as_ref()
            .map(|scores| Evaluation::compute(&report.relevance, scores));
        report.importance = importance;
        Ok(report)
    }

    /// The word to score (the given one, else the top prediction) and the blank's id.
    fn importance_query(
        &self,
        evaluate: &EvaluateOptions,
        logits: &Tensor,
    ) -> Result<ImportanceQuery> {
        let (word, id) = match &evaluate.word {
            Some(word) => (word.clone(), self.tokenizer.single_piece(word)?),
            None => {
                let id = logits.argmax(0)?.to_scalar::<u32>()?;
                (self.tokenizer.token(id), id)
            }
        };
        let blank_id = self
            .tokenizer
            .token_id(evaluate.blank.token())
            .ok_or(Error::NoBlankToken(evaluate.blank.token()))?;
        Ok(ImportanceQuery {
            word,
            id,
            blank: evaluate.blank,
            blank_id,
        })
    }

    fn candidate_ids(&self, words: &[String]) -> Result<Vec<(String, u32)>> {
        words
            .iter()
            .map(|word| {
                if word.trim().is_empty() {
                    return Err(Error::EmptyCandidate {
                        given: words.join(","),
                    });
                }
                Ok((word.clone(), self.tokenizer.single_piece(word.trim())?))
            })
            .collect()
    }

    /// `logits`: `[vocab]`.
    fn predict(
        &self,
        logits: &Tensor,
        candidates: &[(String, u32)],
        top_k: usize,
    ) -> Result<Prediction> {
        let probs: Vec<f32> = candle_nn::ops::softmax(logits, 0)?.to_vec1()?;
        if probs.iter().any(|p| !p.is_finite()) {
            return Err(Error::NotFinite {
                what: "the masked-LM head's output".into(),
            });
        }
        let entry = |word: String, id: u32| WordProbability {
            word,
            id,
            probability: probs[id as usize] as f64,
        };
        let mut order: Vec<u32> = (0..probs.len() as u32).collect();
        order.sort_by(|&a, &b| {
            probs[b as usize]
                .total_cmp(&probs[a as usize])
                .then(a.cmp(&b))
        });
        Ok(Prediction {
            candidates: candidates
                .iter()
                .map(|(word, id)| entry(word.clone(), *id))
                .collect(),
            top: order
                .into_iter()
                .take(top_k)
                .map(|id| entry(self.tokenizer.token(id), id))
                .collect(),
        })
    }
}

/// Explains an attention stack saved by another framework: the same maps, no prediction.
/// `tokens` label the positions (default: their indices); the target is `options.target`
/// or the one `[MASK]` among the tokens.
pub fn explain_attention(
    name: &str,
    stack: &AttentionStack,
    tokens: Option<Vec<String>>,
    options: &ExplainOptions,
) -> Result<Report> {
    let n = stack.len();
    let tokens = match tokens {
        Some(tokens) if tokens.len() != n => {
            return Err(Error::TokenCount {
                given: tokens.len(),
                expected: n,
            })
        }
        Some(tokens) => tokens,
        None => (0..n).map(|i| i.to_string()).collect(),
    };
    let target = resolve_target(&tokens, options.target, |i| tokens[i] == "[MASK]")?
        .ok_or(Error::NoTargetForAttention)?;
    let device = stack.tensor().device().clone();
    let source = Source {
        model: name,
        device: &device,
        tokens,
    };
    assemble(source, stack, target, None, options)
}

/// Where the attention came from, for the report.
struct Source<'a> {
    model: &'a str,
    device: &'a Device,
    tokens: Vec<String>,
}

fn assemble(
    source: Source,
    stack: &AttentionStack,
    target: usize,
    prediction: Option<Prediction>,
    options: &ExplainOptions,
) -> Result<Report> {
    let graph = AttentionGraph::new(stack, options.relevance)?;
    let relevance = graph.relevance(target)?;
    let maps = [&relevance.raw, &relevance.rollout, &relevance.flow];
    if maps
        .iter()
        .flat_map(|m| m.iter().flatten())
        .any(|v| !v.is_finite())
    {
        return Err(Error::NotFinite {
            what: "a relevance map".into(),
        });
    }
    let all_positions = match options.all_positions {
        true => Some(graph.all_positions()?),
        false => None,
    };
    Ok(Report {
        model: source.model.to_string(),
        device: device_name(source.device).to_string(),
        target: Target {
            index: target,
            token: source.tokens[target].clone(),
        },
        tokens: source.tokens,
        prediction,
        layers: stack.layers(),
        heads: stack.heads(),
        relevance,
        all_positions,
        importance: None,
        evaluation: None,
    })
}

/// The explicit target if it is in range; else the one position where `is_mask` holds;
/// `None` when no position does.
fn resolve_target(
    tokens: &[String],
    target: Option<usize>,
    is_mask: impl Fn(usize) -> bool,
) -> Result<Option<usize>> {
    let len = tokens.len();
    if let Some(target) = target {
        return if target < len {
            Ok(Some(target))
        } else {
            Err(Error::TargetOutOfRange {
                target,
                len,
                last: len.saturating_sub(1),
                tokens: listing(tokens),
            })
        };
    }
    let masks: Vec<usize> = (0..len).filter(|&i| is_mask(i)).collect();
    match masks.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        several => Err(Error::SeveralMasks {
            count: several.len(),
            positions: format!("{several:?}"),
        }),
    }
}

/// `0:[CLS] 1:the …`, for error messages.
fn listing(tokens: &[String]) -> String {
    let items: Vec<String> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}:{t}"))
        .collect();
    items.join(" ")
}
