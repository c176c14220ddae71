//! The pipeline for one text: tokens, forward pass, attention stack, relevance, report.
//! Also the same maps for an attention stack saved by another framework.

use std::collections::BTreeMap;

use candle_core::{Device, Tensor};

use crate::attention::AttentionStack;
use crate::checkpoint::{CheckpointFiles, ModelSource};
use crate::device::device_name;
use crate::eraser::{aopc, Erasable, Eraser};
use crate::error::{Error, Result};
use crate::evaluate::Evaluation;
use crate::importance::{importance, Blank, ImportanceQuery};
use crate::methods::{self, Methods, Mixing, Run};
use crate::model::{EncoderConfig, Keep, Model, Task};
use crate::relevance::{AttentionGraph, Relevance, RelevanceOptions};
use crate::report::{LabelProbability, Prediction, Report, Target, WordProbability};
use crate::tokens::{Encoding, TextTokenizer};

/// What to explain and report, beyond the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainOptions {
    /// The position to explain; `None` means the one mask token (a classifier: the first
    /// token).
    pub target: Option<usize>,
    /// The second text of a pair (NLI, question answering), encoded as the tokenizer pairs them.
    pub pair: Option<String>,
    /// The text is whitespace-separated vocabulary tokens, looked up as they are.
    pub pretokenized: bool,
    /// Words whose probability to report (masked LM); each must be one token. `None`:
    /// [`DEFAULT_CANDIDATES`] where the vocabulary has both, else none.
    pub candidates: Option<Vec<String>>,
    /// How many top predictions to report (masked LM).
    pub top_k: usize,
    pub relevance: RelevanceOptions,
    /// Also compute rollout and flow from every position.
    pub all_positions: bool,
    /// Also score each token's importance and correlate the maps with the scores.
    pub evaluate: Option<EvaluateOptions>,
    /// SPEC §8's methods to compute besides today's maps (`None`: none, the report as
    /// before).
    pub mixing: Option<Vec<Mixing>>,
}

/// The paper's candidates, reported unless others are asked for.
pub const DEFAULT_CANDIDATES: [&str; 2] = ["his", "her"];

/// What `--evaluate` scores.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EvaluateOptions {
    /// Masked LM: the word whose probability is explained (one token); `None`: the top
    /// prediction.
    pub word: Option<String>,
    /// Classifier: the label (name or id) whose probability is explained; `None`: the top.
    pub label: Option<String>,
    pub blank: Blank,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        Self {
            target: None,
            pair: None,
            pretokenized: false,
            candidates: None,
            top_k: 5,
            relevance: RelevanceOptions::default(),
            all_positions: false,
            evaluate: None,
            mixing: None,
        }
    }
}

/// A loaded checkpoint, ready to explain any number of texts.
pub struct Explainer {
    name: String,
    device: Device,
    config: EncoderConfig,
    tokenizer: TextTokenizer,
    model: Model,
}

impl Explainer {
    /// Finds (downloading if needed) and loads a checkpoint onto `device`.
    pub fn load(source: &ModelSource, device: &Device) -> Result<Self> {
        let files = CheckpointFiles::locate(source)?;
        let (config, model) = files.load_model(device)?;
        let tokenizer = files.load_tokenizer()?;
        Ok(Self {
            name: source.to_string(),
            device: device.clone(),
            config,
            tokenizer,
            model,
        })
    }

    /// What the checkpoint's head predicts.
    pub fn task(&self) -> Task {
        self.model.task()
    }

    /// The family's name (`bert`, `roberta`, ...).
    pub fn family(&self) -> &'static str {
        self.model.family().name
    }

    /// Whether the checkpoint predicts anything (has a head).
    pub fn has_head(&self) -> bool {
        self.task() != Task::Encoder
    }

    /// Explains the prediction at the target position of `text`.
    pub fn explain(&self, text: &str, options: &ExplainOptions) -> Result<Report> {
        if text.trim().is_empty() {
            return Err(Error::EmptyText);
        }
        let encoding = self.encode(text, options)?;
        let task = self.task();
        let target = self.target(&encoding, task, options.target)?;
        let candidates = match task {
            Task::MaskedLm => match &options.candidates {
                Some(words) => self.candidate_ids(words)?,
                // The paper's pair, where this vocabulary has both words (a chemistry or
                // protein model does not).
                None => self
                    .candidate_ids(&DEFAULT_CANDIDATES.map(String::from))
                    .unwrap_or_default(),
            },
            _ => Vec::new(),
        };
        let device = &self.device;
        let input = Tensor::new(encoding.ids.as_slice(), device)?.unsqueeze(0)?;
        let types = Tensor::new(encoding.type_ids.as_slice(), device)?.unsqueeze(0)?;
        let output = self
            .model
            .forward(&input, Some(&types), target, Keep::default())?;
        let stack = AttentionStack::from_tensors(&output.attentions())?;
        let probs = match &output.logits {
            Some(logits) => Some(probabilities(&logits.squeeze(0)?)?),
            None => None,
        };
        let prediction = probs
            .as_ref()
            .map(|p| self.predict(p, &candidates, options.top_k));
        let methods = match &options.mixing {
            Some(mixings) => {
                let score = match &probs {
                    Some(p) => Some(self.explained(options.evaluate.as_ref(), p)?.1),
                    None => None,
                };
                let run = Run {
                    model: &self.model,
                    ids: &input,
                    types: &types,
                    target,
                    score,
                };
                Some(methods::compute(&run, mixings, options.relevance)?)
            }
            None => None,
        };
        let scored = match (&options.evaluate, &probs) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::NeedsMlmHead {
                    what: "--evaluate",
                    model: self.name.clone(),
                })
            }
            (Some(evaluate), Some(probs)) => {
                let query = self.importance_query(evaluate, probs)?;
                let (ids, types) = (&encoding.ids, &encoding.type_ids);
                Some((importance(&self.model, ids, types, target, &query)?, query))
            }
        };
        // Never blanked by ERASER: special tokens, mask tokens, the explained position.
        let mask = self.tokenizer.mask_id();
        let fixed: Vec<bool> = (0..encoding.ids.len())
            .map(|j| encoding.special[j] || j == target || Some(encoding.ids[j]) == mask)
            .collect();
        let (ids, type_ids) = (encoding.ids.clone(), encoding.type_ids.clone());
        let source = Source {
            model: &self.name,
            device: &self.device,
            tokens: encoding.tokens,
        };
        let mut report = assemble(source, &stack, target, prediction, options)?;
        report.family = Some(self.family().to_string());
        report.task = Some(task.name().to_string());
        report.special = Some(encoding.special);
        if let Some((scores, query)) = scored {
            let mut evaluation = Evaluation::compute(&report.relevance, methods.as_ref(), &scores);
            let erasable = Erasable {
                model: &self.model,
                ids: &ids,
                types: &type_ids,
                target,
                fixed: &fixed,
                query: &query,
                probability: scores.probability,
            };
            evaluation.eraser = Some(eraser_of_every_map(
                &erasable,
                &report.relevance,
                methods.as_ref(),
            )?);
            report.evaluation = Some(evaluation);
            report.importance = Some(scores);
        }
        report.methods = methods;
        Ok(report)
    }

    /// The text (and pair) as tokens, checked against the model's positions and vocabulary.
    fn encode(&self, text: &str, options: &ExplainOptions) -> Result<Encoding> {
        let pair = options.pair.as_deref();
        let mut encoding = match options.pretokenized {
            true => self.tokenizer.encode_pretokenized(text, pair)?,
            false => self.tokenizer.encode(text, pair)?,
        };
        let (n, max) = (encoding.ids.len(), self.model.max_tokens());
        if n > max {
            return Err(Error::TextTooLong { len: n, max });
        }
        // One token type (RoBERTa, XLM-R): transformers passes none and the model uses
        // type 0 whatever a pair template says.
        if self.config.type_vocab_size <= 1 {
            encoding.type_ids.fill(0);
        }
        let types = self.config.type_vocab_size.max(1);
        if let Some(&t) = encoding.type_ids.iter().find(|&&t| t as usize >= types) {
            return Err(Error::TokenTypeOutsideEmbeddings { id: t, rows: types });
        }
        let rows = self.config.vocab_size;
        if let Some(i) = encoding.ids.iter().position(|&id| id as usize >= rows) {
            return Err(Error::TokenOutsideEmbeddings {
                token: encoding.tokens[i].clone(),
                id: encoding.ids[i],
                rows,
            });
        }
        Ok(encoding)
    }

    /// The explained position: the given one; a classifier's first token; else the mask.
    fn target(&self, encoding: &Encoding, task: Task, given: Option<usize>) -> Result<usize> {
        let mask = self.tokenizer.mask_id();
        // A classifier decides from the whole text: a mask token in it is just a token.
        let is_mask =
            |i: usize| task != Task::SequenceClassification && Some(encoding.ids[i]) == mask;
        let found = resolve_target(&encoding.tokens, given, is_mask)?;
        match (found, task) {
            (Some(target), _) => Ok(target),
            (None, Task::SequenceClassification) => Ok(0),
            (None, _) => {
                let tokens = listing(&encoding.tokens);
                Err(match mask {
                    Some(id) => Error::NoMask {
                        mask: self.tokenizer.token(id),
                        tokens,
                    },
                    None => Error::NoMaskToken { tokens },
                })
            }
        }
    }

    /// What the head's output `probs` means: vocabulary words or labels.
    fn predict(&self, probs: &[f32], candidates: &[(String, u32)], top_k: usize) -> Prediction {
        let p = |id: u32| probs[id as usize] as f64;
        let mut order: Vec<u32> = (0..probs.len() as u32).collect();
        order.sort_by(|&a, &b| {
            probs[b as usize]
                .total_cmp(&probs[a as usize])
                .then(a.cmp(&b))
        });
        let word = |word: String, id: u32| WordProbability {
            word,
            id,
            probability: p(id),
        };
        match self.task() {
            Task::MaskedLm => Prediction::Words {
                candidates: candidates
                    .iter()
                    .map(|(w, id)| word(w.clone(), *id))
                    .collect(),
                top: order
                    .into_iter()
                    .take(top_k)
                    .map(|id| word(self.tokenizer.token(id), id))
                    .collect(),
            },
            _ => Prediction::Labels {
                labels: order
                    .into_iter()
                    .map(|id| LabelProbability {
                        label: self.label_name(id),
                        id,
                        probability: p(id),
                    })
                    .collect(),
            },
        }
    }

    fn label_name(&self, id: u32) -> String {
        match self.task() {
            Task::ReplacedTokenDetection => ["original", "replaced"][id as usize].to_string(),
            _ => self.config.label_name(id as usize),
        }
    }

    /// The word or label to score (the given one, else the top prediction) and the blank.
    fn importance_query(
        &self,
        evaluate: &EvaluateOptions,
        probs: &[f32],
    ) -> Result<ImportanceQuery> {
        let (word, id) = self.explained(Some(evaluate), probs)?;
        let blank = evaluate.blank;
        let (blank_token, blank_id) = blank
            .tokens()
            .iter()
            .find_map(|t| Some((t.to_string(), self.tokenizer.token_id(t)?)))
            .ok_or(Error::NoBlankToken(blank.tokens()[0]))?;
        Ok(ImportanceQuery {
            word,
            id,
            blank_token,
            blank_id,
        })
    }

    /// The explained class, by name and id: `--importance-word` or `--label` when given,
    /// else the most probable one.
    fn explained(
        &self,
        evaluate: Option<&EvaluateOptions>,
        probs: &[f32],
    ) -> Result<(String, u32)> {
        let top = (0..probs.len() as u32)
            .max_by(|&a, &b| {
                probs[a as usize]
                    .total_cmp(&probs[b as usize])
                    .then(b.cmp(&a))
            })
            .unwrap_or(0);
        let word = evaluate.and_then(|e| e.word.as_ref());
        let label = evaluate.and_then(|e| e.label.as_ref());
        Ok(match (self.task(), word, label) {
            (Task::MaskedLm, Some(word), _) => (word.clone(), self.tokenizer.single_piece(word)?),
            (Task::MaskedLm, None, _) => (self.tokenizer.token(top), top),
            (_, _, Some(label)) => {
                let id = self.label_id(label, probs.len())?;
                (self.label_name(id), id)
            }
            (_, _, None) => (self.label_name(top), top),
        })
    }

    /// `--label NAME|ID`: a label's name, else its id.
    fn label_id(&self, given: &str, labels: usize) -> Result<u32> {
        let by_name = (0..labels as u32).find(|&id| self.label_name(id) == given);
        let by_id = given
            .parse::<u32>()
            .ok()
            .filter(|&id| (id as usize) < labels);
        by_name.or(by_id).ok_or_else(|| Error::UnknownLabel {
            given: given.to_string(),
            labels: (0..labels as u32)
                .map(|id| format!("{id}: {}", self.label_name(id)))
                .collect::<Vec<_>>()
                .join(", "),
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
}

/// ERASER of attention's last-layer rollout and flow, and of every other method's.
fn eraser_of_every_map(
    input: &Erasable,
    relevance: &Relevance,
    methods: Option<&Methods>,
) -> Result<BTreeMap<String, Eraser>> {
    let last = |maps: &'_ [Vec<f64>]| -> Vec<f64> { maps.last().cloned().unwrap_or_default() };
    let mut named = vec![(
        Mixing::Attention.name().to_string(),
        last(&relevance.rollout),
        last(&relevance.flow),
    )];
    for (name, maps) in methods.into_iter().flatten() {
        if name != Mixing::Attention.name() {
            named.push((name.clone(), last(&maps.rollout), last(&maps.flow)));
        }
    }
    let maps: Vec<&[f64]> = named
        .iter()
        .flat_map(|(_, rollout, flow)| [rollout.as_slice(), flow.as_slice()])
        .collect();
    let scores = aopc(input, &maps)?;
    Ok(named
        .into_iter()
        .zip(scores.chunks(2))
        .map(|((name, _, _), pair)| {
            (
                name,
                Eraser {
                    rollout: pair[0],
                    flow: pair[1],
                },
            )
        })
        .collect())
}

/// `logits`: `[classes]` → their softmax on the host, checked to be finite.
fn probabilities(logits: &Tensor) -> Result<Vec<f32>> {
    let probs: Vec<f32> = candle_nn::ops::softmax(logits, 0)?.to_vec1()?;
    if probs.iter().any(|p| !p.is_finite()) {
        return Err(Error::NotFinite {
            what: "the prediction head's output".into(),
        });
    }
    Ok(probs)
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
        family: None,
        task: None,
        special: None,
        layers: stack.layers(),
        heads: stack.heads(),
        relevance,
        all_positions,
        importance: None,
        evaluation: None,
        methods: None,
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
