//! The pipeline for one text or image: tokens (or patches, [`reader`]), forward pass,
//! attention stack, relevance, report.
//! Also the same maps for an attention stack saved by another framework ([`assemble`]), the
//! prediction alone ([`prediction`]), and a generated text's tokens ([`generation`]).

mod assemble;
pub mod generation;
mod grouping;
mod prediction;
mod reader;

use assemble::{assemble, eraser_of_every_map, listing, resolve_target, Source};
pub use assemble::{attention_target, explain_attention};
pub use grouping::{sift, Grouping};
use prediction::probabilities;
pub use reader::Input;
use reader::{stack_pixels, Feed, Reader};

use std::time::Instant;

use candle_core::{Device, IndexOp, Tensor};

use crate::attention::{AttentionStack, HeadFusion, LayerHeads};
use crate::checkpoint::{CheckpointFiles, ModelSource, TokenizerFiles, Weights};
use crate::device::bind_to_thread;
use crate::error::{Error, Result};
use crate::faithfulness::correlations::Evaluation;
use crate::faithfulness::eraser::Erasable;
use crate::faithfulness::{importance, Blank, Picture, Predictor, Words};
use crate::image::{ImageProcessor, Pixels};
use crate::methods::{self, Mixing, Run};
use crate::model::families::load_encoder_config;
use crate::model::{EncoderConfig, Heads, Keep, Model, ModelOutput, Predicts, Reads, Task};
pub use crate::relevance::Progress;
use crate::relevance::{
    fuse_to_host, maps_fit, Asked, AttentionGraph, FlowChoice, RelevanceOptions,
};
use crate::report::{Prediction, Report};
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
    /// Also compute raw attention, rollout and flow from every position.
    pub all_positions: bool,
    /// Whether flow is computed (here and from every position, for attention and every
    /// method).
    pub flow: FlowChoice,
    /// Told how far each flow has got (flow from every position can take minutes on long
    /// texts; from one position, on peaked attention).
    pub progress: Option<Progress>,
    /// Also score each token's importance and correlate the maps with the scores.
    pub evaluate: Option<EvaluateOptions>,
    /// SPEC §8's methods to compute besides today's maps (`None`: none, the report as
    /// before).
    pub mixing: Option<Vec<Mixing>>,
}

/// The paper's candidates, reported unless others are asked for.
pub const DEFAULT_CANDIDATES: [&str; 2] = ["his", "her"];

/// What `--evaluate` scores.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluateOptions {
    /// Masked LM: the word whose probability is explained (one token); `None`: the top
    /// prediction.
    pub word: Option<String>,
    /// Classifier: the label (name or id) whose probability is explained; `None`: the top.
    pub label: Option<String>,
    pub blank: Blank,
    /// Leave special tokens ([CLS], [SEP], ...) out of the correlations.
    pub without_specials: bool,
    /// Points of integrated gradients' quadrature (at least 1).
    pub ig_steps: usize,
    /// The one attribution to compute, by its name (`--lrp` alone: `lrp`); `None`: every
    /// one, and the ERASER scores of the maps.
    pub only: Option<&'static str>,
}

/// Integrated gradients' points unless `--ig-steps` says otherwise (captum's default).
pub const DEFAULT_IG_STEPS: usize = 50;

/// The most points `--ig-steps` takes (each is a forward and a backward pass).
pub const MAX_IG_STEPS: usize = 1000;

impl Default for EvaluateOptions {
    fn default() -> Self {
        Self {
            word: None,
            label: None,
            blank: Blank::default(),
            without_specials: false,
            ig_steps: DEFAULT_IG_STEPS,
            only: None,
        }
    }
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
            flow: FlowChoice::Auto,
            progress: None,
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
    reader: Reader,
    model: Model,
}

impl Explainer {
    /// Finds (downloading if needed) and loads a checkpoint onto `device`.
    pub fn load(source: &ModelSource, device: &Device) -> Result<Self> {
        let files = CheckpointFiles::locate(source)?;
        let (family, config) = load_encoder_config(&files.config)?;
        let weights = Weights::load(&files.weights, device, family.base)?;
        let model = Model::load(&weights, family, &config, &files.config)?;
        let reader = match (&files.tokenizer, model.patches()) {
            (TokenizerFiles::ImageProcessor(path), Some(patches)) => Reader::Image {
                processor: ImageProcessor::load(path)?,
                patches,
            },
            (_, Some(_)) => {
                return Err(Error::MissingFile {
                    folder: files.config.parent().unwrap_or(&files.config).to_path_buf(),
                    file: "preprocessor_config.json",
                    needs: "the image processor's settings (size, crop, mean and std)",
                })
            }
            (TokenizerFiles::Json(path) | TokenizerFiles::WordPieces(path), None) => {
                let casing = source.optional_file("tokenizer_config.json");
                Reader::Text(Box::new(TextTokenizer::load(path, casing.as_deref())?))
            }
            (TokenizerFiles::SentencePiece(path), None) => {
                Reader::Text(Box::new(TextTokenizer::from_spm(path, |name| {
                    source.optional_file(name)
                })?))
            }
            (
                TokenizerFiles::VocabMerges { vocab: path, .. }
                | TokenizerFiles::ImageProcessor(path),
                None,
            ) => {
                return Err(Error::Tokenizer {
                    path: path.clone(),
                    message: "an encoder of text reads tokenizer.json, vocab.txt or spm.model \
                              (vocab.json + merges.txt is a GPT-2 tokenizer, \
                              preprocessor_config.json an image model's)"
                        .into(),
                })
            }
        };
        Ok(Self {
            name: source.to_string(),
            device: device.clone(),
            config,
            reader,
            model,
        })
    }

    /// What the checkpoint's head predicts.
    pub fn task(&self) -> Task {
        self.model.task()
    }

    /// Where the model runs: "cpu", "cuda" or "metal".
    pub fn device_name(&self) -> &'static str {
        crate::device::device_name(&self.device)
    }

    /// The family's name (`bert`, `roberta`, ...).
    pub fn family(&self) -> &'static str {
        self.model.family().name
    }

    /// Whether the checkpoint predicts anything (has a head).
    pub fn has_head(&self) -> bool {
        self.task().has_head()
    }

    /// `mixings` without the methods this model cannot run, and a note for each one left
    /// out saying why: what `--mixing all` means for it.
    pub fn applicable(&self, mixings: &[Mixing]) -> (Vec<Mixing>, Vec<String>) {
        let (kept, left): (Vec<Mixing>, Vec<Mixing>) = mixings
            .iter()
            .partition(|m| !m.needs_score() || self.has_head());
        let notes = left
            .iter()
            .map(|m| {
                format!(
                    "--mixing all leaves out {}: {} has no prediction head to differentiate",
                    m.name(),
                    self.name
                )
            })
            .collect();
        (kept, notes)
    }

    /// Explains the prediction at the target position of `text`.
    pub fn explain(&self, text: &str, options: &ExplainOptions) -> Result<Report> {
        self.explain_input(Input::Text(text), options)
    }

    /// Explains the prediction for a text or an image.
    pub fn explain_input(&self, input: Input, options: &ExplainOptions) -> Result<Report> {
        let mut forwarded = self.forward_many(&[(input, options)], &Grouping::ONE);
        self.finish(forwarded.pop().expect("one result per input")?, options)
    }

    /// Whether the checkpoint reads images (its input is a picture, not a text).
    pub fn reads_images(&self) -> bool {
        matches!(self.reader, Reader::Image { .. })
    }

    /// The first half of [`Explainer::explain`], all of it on the model's device: the forward
    /// pass, and its attention brought to the host in one copy. Batch mode runs it for the
    /// next lines while the host finishes earlier ones.
    pub fn forward(&self, text: &str, options: &ExplainOptions) -> Result<Forwarded> {
        let mut forwarded = self.forward_many(&[(Input::Text(text), options)], &Grouping::ONE);
        forwarded.pop().expect("one result per text")
    }

    /// [`Explainer::forward`] of each text, in their order, the texts grouped by length
    /// into forward passes of several lines ([`Grouping`]): each line padded on the right
    /// to its group's longest, the dense layers run on the group, each line's attention on
    /// its own tokens ([`Model::forward_padded`]), so that each report is the one of the
    /// text alone (identical at real checkpoints' widths; `tests/batching.rs`). A text that
    /// cannot be explained gets its error and leaves the others be.
    pub fn forward_many(
        &self,
        texts: &[(Input, &ExplainOptions)],
        grouping: &Grouping,
    ) -> Vec<Result<Forwarded>> {
        let (mut results, prepared) = sift::<_, Forwarded, _>(
            (texts.iter()).map(|(text, options)| self.prepare_checked(*text, options)),
        );
        let keys: Vec<(usize, HeadFusion)> = prepared
            .iter()
            .map(|(i, line)| (line.encoding.tokens.len(), texts[*i].1.relevance.fusion))
            .collect();
        let cost = (self.config.num_attention_heads.max(1), self.model.layers());
        let plan = grouping.plan(&keys, cost, |n, to| self.model.pads_alike(n, to));
        let mut prepared: Vec<Option<(usize, Prepared)>> = prepared.into_iter().map(Some).collect();
        for group in plan {
            let (indices, lines): (Vec<usize>, Vec<Prepared>) =
                group.iter().filter_map(|&k| prepared[k].take()).unzip();
            let forwarded = self.forward_group(lines, |i| texts[indices[i]].1);
            match forwarded {
                Ok(each) => {
                    for (i, line) in indices.iter().zip(each) {
                        results[*i] = Some(Ok(line));
                    }
                }
                // A group that fails (the device's memory) runs again a line at a time,
                // so that each line gets its own report or error.
                Err(_) if indices.len() > 1 => {
                    for &i in &indices {
                        let (text, options) = &texts[i];
                        let line = self.prepare_checked(*text, options).and_then(|line| {
                            let mut one = self.forward_group(vec![line], |_| options)?;
                            Ok(one.pop().expect("one line"))
                        });
                        results[i] = Some(line);
                    }
                }
                Err(e) => results[indices[0]] = Some(Err(e)),
            }
        }
        results
            .into_iter()
            .map(|r| r.expect("every text has its result"))
            .collect()
    }

    /// A text prepared, and its maps checked against the memory before any forward pass.
    fn prepare_checked(&self, input: Input, options: &ExplainOptions) -> Result<Prepared> {
        let prepared = self.prepare(input, options)?;
        let n = prepared.encoding.tokens.len();
        let asked = Asked {
            flow: options.flow.wanted(n),
            all_positions: options.all_positions,
            fused: true,
        };
        maps_fit(self.model.layers(), n, asked)?;
        Ok(prepared)
    }

    /// One forward pass over `lines` (`options(i)`: line i's), each line's attention fused
    /// over its heads as each layer runs (a long text never holds every head of every
    /// layer), cut out of the group's and brought to the host.
    fn forward_group<'a>(
        &self,
        lines: Vec<Prepared>,
        options: impl Fn(usize) -> &'a ExplainOptions,
    ) -> Result<Vec<Forwarded>> {
        let lengths: Vec<usize> = lines.iter().map(|l| l.encoding.tokens.len()).collect();
        let n = lengths.iter().copied().max().unwrap_or(0);
        let mut ids = vec![0u32; lines.len() * n];
        let mut types = vec![0u32; lines.len() * n];
        for (i, line) in lines.iter().enumerate() {
            let row = i * n..i * n + line.encoding.ids.len();
            ids[row.clone()].copy_from_slice(&line.encoding.ids);
            types[i * n..i * n + line.encoding.type_ids.len()]
                .copy_from_slice(&line.encoding.type_ids);
        }
        let shape = (lines.len(), n);
        let pixels: Vec<&Pixels> = (lines.iter())
            .filter_map(|l| match &l.feed {
                Feed::Pixels { pixels, .. } => Some(pixels),
                Feed::Ids => None,
            })
            .collect();
        let ids = match (&self.reader, pixels.is_empty()) {
            (Reader::Image { patches, .. }, false) => {
                stack_pixels(&pixels, patches.channels, &self.device)?
            }
            _ => Tensor::from_vec(ids, shape, &self.device)?,
        };
        let types = Tensor::from_vec(types, shape, &self.device)?;
        let targets: Vec<usize> = lines.iter().map(|l| l.target).collect();
        // One fusion for the group: grouping keeps lines of one fusion together.
        let fusion = options(0).relevance.fusion;
        let keep = Keep {
            heads: Heads::Fused(fusion),
            ..Keep::default()
        };
        let start = Instant::now();
        let output = self
            .model
            .forward_padded(&ids, &types, &lengths, &targets, keep)?;
        // Waits for the device, so that the two stages' times are each their own.
        self.device.synchronize()?;
        let model_seconds = start.elapsed().as_secs_f64() / lines.len() as f64;
        let mut layers: Vec<(Tensor, Tensor)> = Vec::with_capacity(output.layers.len());
        for layer in output.layers {
            let sums = layer
                .head_sums
                .ok_or_else(|| Error::Attention("a layer kept no head sums".into()))?;
            layers.push((layer.probs, sums));
        }
        lines
            .into_iter()
            .enumerate()
            .map(|(i, line)| {
                let start = Instant::now();
                let len = lengths[i];
                let options = options(i);
                // Line i's own `[1, 1, n_i, n_i]` of each layer, and its heads' sums.
                let (fused, head_sums): (Vec<Tensor>, Vec<Tensor>) = layers
                    .iter()
                    .map(|(probs, sums)| {
                        let own = probs
                            .narrow(0, i, 1)?
                            .narrow(2, 0, len)?
                            .narrow(3, 0, len)?;
                        Ok((own.contiguous()?, sums.narrow(0, i, 1)?))
                    })
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .unzip();
                let stack = AttentionStack::from_fused_tensors(fused, &head_sums, fusion)?;
                let fused = fuse_to_host(&stack, options.relevance)?;
                let probs = match &output.logits {
                    Some(logits) => Some(probabilities(&logits.i(i)?)?),
                    None => None,
                };
                let prediction = probs
                    .as_ref()
                    .map(|p| self.describe(p, &line.candidates, options.top_k));
                Ok(Forwarded {
                    encoding: line.encoding,
                    feed: line.feed,
                    task: line.task,
                    target: line.target,
                    shape: (stack.layers(), stack.heads()),
                    fused,
                    probs,
                    prediction,
                    seconds: ForwardSeconds {
                        model: model_seconds,
                        to_host: start.elapsed().as_secs_f64(),
                    },
                })
            })
            .collect()
    }

    /// The second half of [`Explainer::explain`]: the maps on the host, and what
    /// `options.mixing` and `options.evaluate` ask of the model. It may run on another thread
    /// than [`Explainer::forward`] did.
    pub fn finish(&self, forwarded: Forwarded, options: &ExplainOptions) -> Result<Report> {
        // A thread freeing device memory needs the device's context (see bind_to_thread).
        bind_to_thread(&self.device)?;
        let Forwarded {
            encoding,
            feed,
            task,
            target,
            shape: (layers, heads),
            fused,
            probs,
            prediction,
            seconds: _,
        } = forwarded;
        let graph = AttentionGraph::from_fused(fused, options.relevance)?;
        // Never blanked by ERASER: special tokens, mask tokens, the explained position.
        let mask = self.reader.mask_id();
        let fixed: Vec<bool> = (0..encoding.tokens.len())
            .map(|j| {
                let masked = mask.is_some() && encoding.ids.get(j).copied() == mask;
                encoding.special[j] || j == target || masked
            })
            .collect();
        let (ids, type_ids) = (encoding.ids.clone(), encoding.type_ids.clone());
        let source = Source {
            model: &self.name,
            device: &self.device,
            tokens: encoding.tokens,
            layers,
            heads,
        };
        let mut report = assemble(source, &graph, target, prediction, options)?;
        drop(graph);
        let methods = match &options.mixing {
            Some(mixings) => {
                let score = match &probs {
                    Some(p) => Some(self.explained(options.evaluate.as_ref(), p)?.1),
                    None => None,
                };
                let (input, types) = self.device_input(&feed, &ids, &type_ids)?;
                let run = Run {
                    model: &self.model,
                    ids: &input,
                    types: &types,
                    target,
                    score,
                };
                Some(methods::compute(
                    &run,
                    mixings,
                    options.relevance,
                    &report.relevance,
                    Progress::of(options.progress.as_ref()),
                )?)
            }
            None => None,
        };
        let scored = match (&options.evaluate, &probs) {
            (None, _) => None,
            (Some(evaluate), None) => {
                return Err(Error::NeedsMlmHead {
                    what: match evaluate.only {
                        None => "--evaluate",
                        Some(_) => "--lrp",
                    },
                    model: self.name.clone(),
                })
            }
            (Some(evaluate), Some(probs)) => {
                let query = self.importance_query(evaluate, probs)?;
                let (words, picture) = self.scorable(&feed, &ids, &type_ids, query.blank_id)?;
                Some((query, words, picture))
            }
        };
        report.family = Some(self.family().to_string());
        report.task = Some(task.name.to_string());
        let special = encoding.special;
        if let Some((query, words, picture)) = scored {
            let model: &dyn Predictor = match &picture {
                Some(picture) => picture,
                None => &self.model,
            };
            let scores = importance(model, &words, target, &query)?;
            let specials = options
                .evaluate
                .as_ref()
                .is_some_and(|e| e.without_specials)
                .then_some(special.as_slice());
            let mut evaluation =
                Evaluation::compute(&report.relevance, methods.as_ref(), &scores, specials);
            let erasable = Erasable {
                model,
                words: &words,
                target,
                fixed: &fixed,
                query: &query,
                probability: scores.probability,
            };
            if query.only.is_none() {
                let (by_map, by_score) =
                    eraser_of_every_map(&erasable, &report.relevance, methods.as_ref(), &scores)?;
                evaluation.eraser = Some(by_map);
                evaluation.eraser_importance = Some(by_score);
            }
            report.evaluation = Some(evaluation);
            report.importance = Some(scores);
        }
        report.special = Some(special);
        report.methods = methods;
        report.image = feed.image();
        report.picture = feed.picture();
        Ok(report)
    }

    /// Every head's attention in layer `layer` (1 to L) for `text`, `[H][n][n]` on the host,
    /// with the tokens: what a head view draws. One forward pass.
    pub fn layer_heads(
        &self,
        text: &str,
        options: &ExplainOptions,
        layer: usize,
    ) -> Result<LayerHeads> {
        let (prepared, output) = self.run_once(Input::Text(text), options)?;
        let l = LayerHeads::index(layer, output.layers.len())?;
        let probs = output.layers[l].probs.squeeze(0)?;
        LayerHeads::new(prepared.encoding.tokens, &probs)
    }

    /// The head's prediction for `text` without any relevance map, at the cost of one
    /// forward pass: what [`Explainer::explain`] reports as `prediction` (`None`: no head).
    pub fn predict(&self, text: &str, options: &ExplainOptions) -> Result<Option<Prediction>> {
        let (prepared, output) = self.run_once(Input::Text(text), options)?;
        match &output.logits {
            Some(logits) => {
                let probs = probabilities(&logits.squeeze(0)?)?;
                Ok(Some(self.describe(
                    &probs,
                    &prepared.candidates,
                    options.top_k,
                )))
            }
            None => Ok(None),
        }
    }

    /// One plain forward pass over `text`, with what it was given.
    fn run_once(&self, input: Input, options: &ExplainOptions) -> Result<(Prepared, ModelOutput)> {
        let prepared = self.prepare(input, options)?;
        let encoding = &prepared.encoding;
        let (input, types) =
            self.device_input(&prepared.feed, &encoding.ids, &encoding.type_ids)?;
        let output = self
            .model
            .forward(&input, Some(&types), prepared.target, Keep::default())?;
        Ok((prepared, output))
    }

    /// Everything a forward pass over `text` needs, checked.
    fn prepare(&self, input: Input, options: &ExplainOptions) -> Result<Prepared> {
        let (encoding, feed) = match input {
            Input::Text(text) => {
                if text.trim().is_empty() {
                    return Err(Error::EmptyText);
                }
                (self.encode(text, options)?, Feed::Ids)
            }
            _ => {
                refuse_for_images(options)?;
                self.reader.image(input)?
            }
        };
        let task = self.task();
        let target = self.target(&encoding, task, options.target)?;
        let candidates = match task.predicts {
            Predicts::Words => match &options.candidates {
                Some(words) => self.candidate_ids(words)?,
                // The paper's pair, where this vocabulary has both words (a chemistry or
                // protein model does not).
                None => self
                    .candidate_ids(&DEFAULT_CANDIDATES.map(String::from))
                    .unwrap_or_default(),
            },
            _ => Vec::new(),
        };
        Ok(Prepared {
            encoding,
            feed,
            task,
            target,
            candidates,
        })
    }

    /// What the model reads, on its device: `[1, n]` token ids (or `[1, channels, H, W]`
    /// pixel values) and `[1, n]` token types.
    fn device_input(&self, feed: &Feed, ids: &[u32], types: &[u32]) -> Result<(Tensor, Tensor)> {
        let types = Tensor::new(types, &self.device)?.unsqueeze(0)?;
        let input = match (feed, &self.reader) {
            (Feed::Pixels { pixels, .. }, Reader::Image { patches, .. }) => {
                stack_pixels(&[pixels], patches.channels, &self.device)?
            }
            _ => Tensor::new(ids, &self.device)?.unsqueeze(0)?,
        };
        Ok((input, types))
    }

    /// The input as importance scores see it, and, for an image, the model as their
    /// predictor ([`Picture`]; a text's is the model itself): a text's word embeddings and
    /// the blank token's (`blank_id`), or an image's tokens before positions and a patch of
    /// the mean pixel's.
    fn scorable(
        &self,
        feed: &Feed,
        ids: &[u32],
        types: &[u32],
        blank_id: u32,
    ) -> Result<(Words, Option<Picture<'_>>)> {
        let (input, type_ids) = self.device_input(feed, ids, types)?;
        let Some(body) = self.model.vision() else {
            let lookup = |ids: &Tensor| self.model.embed_words(ids);
            return Ok((
                Words::look_up(lookup, ids, types, blank_id, &self.device)?,
                None,
            ));
        };
        let (tokens, grid) = body.tokens(&input)?;
        let words = Words {
            input: tokens,
            blank: body.blank()?,
            types: type_ids,
        };
        let picture = Picture {
            model: &self.model,
            body,
            grid,
        };
        Ok((words, Some(picture)))
    }

    /// The text (and pair) as tokens, checked against the model's positions and vocabulary.
    fn encode(&self, text: &str, options: &ExplainOptions) -> Result<Encoding> {
        let pair = options.pair.as_deref();
        let tokenizer = self.reader.text()?;
        let mut encoding = match options.pretokenized {
            true => tokenizer.encode_pretokenized(text, pair)?,
            false => tokenizer.encode(text, pair)?,
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

    /// The explained position: the given one; the first or last token where the head reads
    /// there (a classifier); else the mask.
    fn target(&self, encoding: &Encoding, task: Task, given: Option<usize>) -> Result<usize> {
        let mask = self.reader.mask_id();
        // A classifier decides from the whole text: a mask token in it is just a token.
        let is_mask = |i: usize| {
            task.reads == Reads::Target && mask.is_some() && encoding.ids.get(i).copied() == mask
        };
        let found = resolve_target(&encoding.tokens, given, is_mask)?;
        match (found, task.reads) {
            (Some(target), _) => Ok(target),
            // An image without a head is explained from its class token too.
            (None, Reads::First | Reads::Mean | Reads::Whole) => Ok(0),
            (None, _) if self.reads_images() => Ok(0),
            (None, Reads::Last) => encoding.ids.len().checked_sub(1).ok_or(Error::EmptyText),
            (None, _) => {
                let tokens = listing(&encoding.tokens);
                Err(match mask {
                    Some(id) => Error::NoMask {
                        mask: self.reader.token(id),
                        tokens,
                    },
                    None => Error::NoMaskToken { tokens },
                })
            }
        }
    }
}

/// An error where `options` ask of an image what only a text has: a pair, tokens as given,
/// a blank token.
fn refuse_for_images(options: &ExplainOptions) -> Result<()> {
    let blank = options.evaluate.as_ref().map(|e| e.blank);
    let text_only = [
        ("a pair (--pair)", options.pair.is_some()),
        ("--pretokenized", options.pretokenized),
        (
            "a blank token (--blank: an image is blanked by its mean pixel)",
            blank.is_some_and(|b| b != Blank::default()),
        ),
    ];
    match text_only.iter().find(|(_, asked)| *asked) {
        Some((what, _)) => Err(Error::InputKind(format!(
            "{what} is for a text, and this model reads images; leave it out"
        ))),
        None => Ok(()),
    }
}

/// A text after the forward pass ([`Explainer::forward`]), its attention on the host: what
/// [`Explainer::finish`] makes the report of. It holds nothing on the device, so that any
/// thread may finish it.
pub struct Forwarded {
    encoding: Encoding,
    feed: Feed,
    task: Task,
    target: usize,
    /// The stack's layers and heads.
    shape: (usize, usize),
    /// `[L, n, n]` fused attention, on the host.
    fused: Tensor,
    /// The head's probabilities at the target.
    probs: Option<Vec<f32>>,
    prediction: Option<Prediction>,
    seconds: ForwardSeconds,
}

impl Forwarded {
    /// How long its stages took.
    pub fn seconds(&self) -> ForwardSeconds {
        self.seconds
    }
}

/// The stages of [`Explainer::forward`], in seconds: the model's forward pass on its device
/// (waited for), and its attention fused there and brought to the host.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ForwardSeconds {
    pub model: f64,
    pub to_host: f64,
}

/// A text ready for the forward pass.
struct Prepared {
    encoding: Encoding,
    feed: Feed,
    task: Task,
    target: usize,
    /// Masked LM: the candidate words and their ids.
    candidates: Vec<(String, u32)>,
}
