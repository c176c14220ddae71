//! The pipeline for one sentence: tokens, forward pass, attention stack, relevance, report.

use candle_core::{Device, Tensor};

use crate::attention::AttentionStack;
use crate::checkpoint::{BertConfig, CheckpointFiles, ModelSource};
use crate::device::device_name;
use crate::error::{Error, Result};
use crate::model::BertForMaskedLm;
use crate::relevance::{Relevance, RelevanceOptions};
use crate::report::{Prediction, Report, Target, WordProbability};
use crate::tokens::{Encoding, TextTokenizer};

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
}

impl Default for ExplainOptions {
    fn default() -> Self {
        Self {
            target: None,
            candidates: vec!["his".into(), "her".into()],
            top_k: 5,
            relevance: RelevanceOptions::default(),
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
        let target = self.resolve_target(&encoding, options.target)?;
        let candidates = if self.has_mlm_head() {
            self.candidate_ids(&options.candidates)?
        } else {
            Vec::new()
        };

        let input = Tensor::new(encoding.ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let output = self.model.forward(&input, target)?;
        let stack = AttentionStack::from_tensors(&output.attentions)?;
        let prediction = match output.logits {
            Some(logits) => Some(self.predict(&logits, &candidates, options.top_k)?),
            None => None,
        };
        Ok(Report {
            model: self.name.clone(),
            device: device_name(&self.device).to_string(),
            target: Target {
                index: target,
                token: encoding.tokens[target].clone(),
            },
            tokens: encoding.tokens,
            prediction,
            layers: stack.layers,
            heads: stack.heads,
            relevance: Relevance::compute(&stack, target, options.relevance),
        })
    }

    fn resolve_target(&self, encoding: &Encoding, target: Option<usize>) -> Result<usize> {
        let listing = || listing(&encoding.tokens);
        if let Some(target) = target {
            let len = encoding.ids.len();
            return if target < len {
                Ok(target)
            } else {
                Err(Error::TargetOutOfRange {
                    target,
                    len,
                    last: len - 1,
                    tokens: listing(),
                })
            };
        }
        let mask = self.tokenizer.mask_id();
        let masks: Vec<usize> = (0..encoding.ids.len())
            .filter(|&i| Some(encoding.ids[i]) == mask)
            .collect();
        match masks.as_slice() {
            [one] => Ok(*one),
            [] => Err(Error::NoMask { tokens: listing() }),
            several => Err(Error::SeveralMasks {
                count: several.len(),
                positions: format!("{several:?}"),
            }),
        }
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

/// `0:[CLS] 1:the …`, for error messages.
fn listing(tokens: &[String]) -> String {
    let items: Vec<String> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}:{t}"))
        .collect();
    items.join(" ")
}
