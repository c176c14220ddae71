//! Generation as a task: the text is a prompt, the targets are the tokens a causal language
//! model (GPT-2, Llama, Qwen, Mistral, Gemma, Phi-3: any family behind [`CausalLm`]) generates
//! from it,
//! and each is explained by the maps of the prompt tokens it came from (issue 6).
//!
//! ```text
//! prompt ─► ids ─► generate g tokens (greedy or seeded sampling, KV cache, every step's
//!        attention kept) ─► causal attention stack [L, H, N, N] (N = m + g − 1)
//!        ─► raw / rollout / corrected rollout / flow, each [g][m][L]
//!        ─► the --mixing methods the same way ─► CausalReport
//! ```
//!
//! The maps are the encoders' ([`crate::relevance::causal`]), the methods theirs
//! ([`crate::methods::causal`]); the report and its renderers are [`crate::report`]'s.

use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{Device, IndexOp, Tensor};

use crate::attention::{HeadFusion, LayerHeads};
use crate::checkpoint::{CheckpointFiles, ModelSource, Weights};
use crate::device::{bind_to_thread, device_name};
use crate::error::{Error, Result};
use crate::faithfulness::correlations::Evaluation;
use crate::faithfulness::eraser::{eraser_of, Erasable};
use crate::faithfulness::{
    blank_if_needed, importance, Blank, Importance, ImportanceQuery, NextToken, Words,
};
use crate::generate::{generate, generate_many, Decoding, Generation, Prompt};
use crate::methods::causal::{causal_mixings, Generated};
use crate::methods::CausalMixings;
use crate::methods::Mixing;
use crate::model::causal::CausalLm;
use crate::model::families::load_causal;
use crate::relevance::causal::{by_layer, CausalRelevance};
use crate::relevance::causal::{causal_relevance_with, CausalMethod, CausalMethods};
use crate::relevance::Progress;
use crate::report::causal::{rank, CausalReport, GenerationInfo};
use crate::tokens::causal::CausalTokenizer;

use super::sift;
use super::{EvaluateOptions, Grouping};

/// What to generate and explain, beyond the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct CausalOptions {
    /// How many tokens to generate (≥ 1).
    pub generate: usize,
    pub decoding: Decoding,
    pub methods: CausalMethods,
    /// How many prompt tokens to rank for each generated token.
    pub top_prompt: usize,
    /// Leave common words and punctuation out of the rankings.
    pub skip_common: bool,
    /// SPEC §8's methods to compute besides attention's maps (`--mixing`).
    pub mixings: Vec<Mixing>,
    /// Told how far each flow has got (`--flow` on a long text can take minutes).
    pub progress: Option<Progress>,
    /// Also score each token's importance for each generated token (`--evaluate`, or
    /// `--lrp` alone), and with `--evaluate` correlate the maps with the scores and measure
    /// their ERASER faithfulness.
    pub evaluate: Option<EvaluateOptions>,
}

impl Default for CausalOptions {
    fn default() -> Self {
        Self {
            generate: 10,
            decoding: Decoding::Greedy,
            methods: CausalMethods::default(),
            top_prompt: 3,
            skip_common: false,
            mixings: Vec::new(),
            progress: None,
            evaluate: None,
        }
    }
}

/// A loaded causal checkpoint (any family of [`CausalLm`]), ready to explain any number of
/// prompts.
pub struct CausalExplainer {
    name: String,
    device: Device,
    tokenizer: CausalTokenizer,
    model: Box<dyn CausalLm>,
}

impl CausalExplainer {
    /// Finds (downloading if needed) and loads a causal checkpoint onto `device`.
    pub fn load(source: &ModelSource, device: &Device) -> Result<Self> {
        let files = CheckpointFiles::locate(source)?;
        let tokenizer = CausalTokenizer::load(&files.tokenizer)?;
        let weights = Weights::load(&files.weights, device, "")?;
        let model = load_causal(&files.config, &weights)?;
        Ok(Self {
            name: source.to_string(),
            device: device.clone(),
            tokenizer,
            model,
        })
    }

    /// The loaded model.
    pub fn model(&self) -> &dyn CausalLm {
        self.model.as_ref()
    }

    /// Where the model runs: "cpu", "cuda" or "metal".
    pub fn device_name(&self) -> &'static str {
        device_name(&self.device)
    }

    /// The family's name (config.json's `model_type`: `gpt2`, `llama`, ...).
    pub fn family(&self) -> &'static str {
        self.model.model_type()
    }

    /// Generates from `prompt` and explains every generated token, on any thread.
    pub fn explain(&self, prompt: &str, options: &CausalOptions) -> Result<CausalReport> {
        let generated = self.generate(prompt, options)?;
        self.finish(generated, options)
    }

    /// What the model generates from each prompt as its options say, the device's part of
    /// each report, the prompts grouped into shared steps as `grouping` says (a causal line
    /// pads nothing: lines of any lengths share a step). Each generation is the prompt's
    /// alone, its tokens the same and its attention within float32 rounding
    /// ([`generate_many`]). A prompt that cannot be generated from gets its error and leaves
    /// the others be.
    pub fn generate_many(
        &self,
        prompts: &[(&str, &CausalOptions)],
        grouping: &Grouping,
    ) -> Vec<Result<Continuation>> {
        let (mut results, checked) = sift::<_, Continuation, _>(
            (prompts.iter()).map(|(prompt, options)| self.checked_prompt(prompt, options)),
        );
        let lengths: Vec<(usize, ())> = checked.iter().map(|(_, ids)| (ids.len(), ())).collect();
        let packed = Grouping {
            padding: f64::INFINITY,
            ..*grouping
        };
        let dims = self.model.dims();
        for group in packed.plan(&lengths, (dims.heads, dims.layers), |_, _| true) {
            let lines: Vec<(usize, &[u32])> = (group.iter())
                .map(|&k| (checked[k].0, checked[k].1.as_slice()))
                .collect();
            let asked: Vec<Prompt> = (lines.iter())
                .map(|&(i, ids)| Prompt {
                    ids,
                    count: prompts[i].1.generate,
                    decoding: prompts[i].1.decoding,
                })
                .collect();
            let generated = |(i, ids): (usize, &[u32]), generation: Result<Generation>| {
                generation.map(|generation| Continuation {
                    prompt: prompts[i].0.to_string(),
                    prompt_ids: ids.to_vec(),
                    generation,
                })
            };
            match generate_many(self.model.as_ref(), &asked) {
                Ok(each) => {
                    for (&line, generation) in lines.iter().zip(each) {
                        results[line.0] = Some(generated(line, generation));
                    }
                }
                // A group that fails (the device's memory) runs again a prompt at a time, so
                // that each prompt gets its own report or error.
                Err(_) if lines.len() > 1 => {
                    for (&line, one) in lines.iter().zip(&asked) {
                        let alone = generate(self.model.as_ref(), one.ids, one.count, one.decoding);
                        results[line.0] = Some(generated(line, alone));
                    }
                }
                Err(e) => results[lines[0].0] = Some(Err(e)),
            }
        }
        results
            .into_iter()
            .map(|r| r.expect("every prompt has its result"))
            .collect()
    }

    /// A causal report from what the model generated ([`CausalExplainer::generate_many`]):
    /// the maps and methods of every generated token, on the host (any thread).
    pub fn finish(&self, generated: Continuation, options: &CausalOptions) -> Result<CausalReport> {
        bind_to_thread(&self.device)?;
        let Continuation {
            prompt,
            prompt_ids,
            generation,
        } = generated;
        let m = prompt_ids.len();
        let told = Progress::of(options.progress.as_ref());
        // Every token's flows (attention's, then each other method's) as one count: each
        // call is one more sink done, of N per flow.
        let flows = match options.methods.flow {
            true => {
                generation.ids.len()
                    * (1 + options
                        .mixings
                        .iter()
                        .filter(|&&m| m != Mixing::ATTENTION)
                        .count())
            }
            false => 0,
        };
        let done = AtomicUsize::new(0);
        let progress =
            &|_: usize, sinks: usize| told(done.fetch_add(1, Ordering::Relaxed) + 1, flows * sinks);
        let relevance = causal_relevance_with(
            &generation.attention,
            m,
            generation.ids.len(),
            options.methods,
            progress,
        )?;
        let methods = match options.mixings.is_empty() {
            true => None,
            false => {
                let fed = [&prompt_ids[..], &generation.ids[..generation.ids.len() - 1]].concat();
                let text = Generated {
                    relevance: &relevance,
                    fed: &fed,
                    ids: &generation.ids,
                    prompt: m,
                    progress,
                };
                let model = self.model.as_ref();
                let (mixings, methods) = (&options.mixings, options.methods);
                Some(causal_mixings(
                    model,
                    &text,
                    mixings,
                    methods,
                    &self.device,
                )?)
            }
        };
        let (importance, evaluation) = match &options.evaluate {
            Some(evaluate) => {
                let maps = GeneratedMaps {
                    prompt: &prompt_ids,
                    generated: &generation.ids,
                    relevance: &relevance,
                    methods: methods.as_ref(),
                };
                let (importance, evaluation) = self.scored(&maps, evaluate)?;
                (Some(importance), Some(evaluation))
            }
            None => (None, None),
        };
        let prompt_tokens = self.tokenizer.token_texts(&prompt_ids)?;
        let method = match options.methods.correction {
            true => CausalMethod::RolloutCorrected,
            false => CausalMethod::Rollout,
        };
        let ranking = rank(
            &relevance,
            method,
            &prompt_tokens,
            options.top_prompt,
            options.skip_common,
        );
        let (strategy, seed, temperature) = match options.decoding {
            Decoding::Greedy => ("greedy", None, None),
            Decoding::Sample { seed, temperature } => ("sample", Some(seed), Some(temperature)),
        };
        let relevance_options = options.methods.relevance;
        Ok(CausalReport {
            mode: "causal".into(),
            model: self.name.clone(),
            family: self.model.model_type().into(),
            task: "causal-lm".into(),
            device: device_name(&self.device).into(),
            prompt,
            prompt_tokens,
            prompt_ids,
            generated_tokens: self.tokenizer.token_texts(&generation.ids)?,
            generated_text: self.tokenizer.decode(&generation.ids)?,
            generated_ids: generation.ids,
            generation: GenerationInfo {
                strategy: strategy.into(),
                seed,
                temperature,
                requested: options.generate,
                stopped_at_eos: generation.stopped_at_eos,
            },
            layers: generation.attention.layers(),
            heads: generation.attention.heads(),
            fusion: match relevance_options.fusion {
                HeadFusion::Mean => "mean",
                HeadFusion::Max => "max",
                HeadFusion::Min => "min",
            }
            .into(),
            residual: relevance_options.residual,
            relevance,
            methods,
            ranking,
            importance,
            evaluation,
        })
    }

    /// Each generated token's importance scores (those `evaluate` asks for) for its
    /// probability, or its logit for LRP, over the tokens fed at its step: the prompt and the
    /// tokens generated before it; and their evaluation: the correlations of its maps with
    /// them over the prompt, and (with `--evaluate`) the ERASER scores of its last-layer
    /// rollout and flow, blanking prompt tokens only.
    fn scored(
        &self,
        maps: &GeneratedMaps,
        evaluate: &EvaluateOptions,
    ) -> Result<(Vec<Importance>, Vec<Evaluation>)> {
        let model = NextToken {
            model: self.model.as_ref(),
        };
        let (blank_token, blank_id) = blank_if_needed(self.blank(evaluate.blank), evaluate.only)?;
        let m = maps.prompt.len();
        let mut fed = maps.prompt.to_vec();
        let (mut importances, mut evaluations) = (Vec::new(), Vec::new());
        for (k, &id) in maps.generated.iter().enumerate() {
            let query = ImportanceQuery {
                word: self.tokenizer.decode(&[id])?,
                id,
                blank_token: blank_token.clone(),
                blank_id,
                steps: evaluate.ig_steps,
                only: evaluate.only,
            };
            let n = fed.len();
            let lookup = |ids: &Tensor| self.model.embed_words(ids);
            let words = Words::look_up(lookup, &fed, &vec![0; n], blank_id, &self.device)?;
            let scores = importance(&model, &words, n - 1, &query)?;
            let (relevance, methods) = (maps.relevance, maps.methods);
            let mut evaluation = Evaluation::compute_causal(relevance, methods, k, &scores);
            if evaluate.only.is_none() {
                let fixed: Vec<bool> = (0..n).map(|j| j >= m).collect();
                let erasable = Erasable {
                    model: &model,
                    words: &words,
                    target: n - 1,
                    fixed: &fixed,
                    query: &query,
                    probability: scores.probability,
                };
                let named = last_layer_maps(maps, k, n);
                let (by_map, by_score) = eraser_of(&erasable, named, &scores)?;
                evaluation.eraser = Some(by_map);
                evaluation.eraser_importance = Some(by_score);
            }
            importances.push(scores);
            evaluations.push(evaluation);
            fed.push(id);
        }
        Ok((importances, evaluations))
    }

    /// The blank that blank-out, integrated gradients and ERASER put in: `--blank unk` is the
    /// vocabulary's unknown token, or where it has none (a byte-level BPE such as GPT-2's)
    /// the end-of-text token; `--blank mask` the mask token. A causal model reads no
    /// `pad_token_id`.
    fn blank(&self, blank: Blank) -> Result<(String, u32)> {
        if blank == Blank::Pad {
            return Err(Error::PadBlankForCausal);
        }
        let spelled = (blank.tokens().iter())
            .find_map(|t| Some((t.to_string(), self.tokenizer.token_id(t)?)));
        let eos = self.model.eos().first().copied();
        match (spelled, blank, eos) {
            (Some(found), _, _) => Ok(found),
            (None, Blank::Unk, Some(id)) => Ok((self.tokenizer.decode(&[id])?, id)),
            _ => Err(Error::NoBlankToken(blank.tokens()[0])),
        }
    }

    /// Every head's attention in layer `layer` (1 to L) over the positions fed while
    /// generating from `prompt` as `options` say (the prompt and every generated token but
    /// the last), `[H][N][N]` on the host, with those tokens: what a head view draws.
    pub fn layer_heads(
        &self,
        prompt: &str,
        options: &CausalOptions,
        layer: usize,
    ) -> Result<LayerHeads> {
        let Continuation {
            prompt_ids,
            generation,
            ..
        } = self.generate(prompt, options)?;
        let stack = &generation.attention;
        let l = LayerHeads::index(layer, stack.layers())?;
        let ids = [&prompt_ids[..], &generation.ids[..]].concat();
        let tokens = self.tokenizer.token_texts(&ids[..stack.len()])?;
        LayerHeads::new(tokens, &stack.tensor().i(l)?)
    }

    /// What the model generates from `prompt` alone as `options` say.
    fn generate(&self, prompt: &str, options: &CausalOptions) -> Result<Continuation> {
        let mut one = self.generate_many(&[(prompt, options)], &Grouping::ONE);
        one.pop().expect("one result per prompt")
    }

    /// The prompt's ids, after checking the prompt and `options.generate` against the
    /// model (on any thread: this binds the device's context to it).
    fn checked_prompt(&self, prompt: &str, options: &CausalOptions) -> Result<Vec<u32>> {
        // A thread other than the loading one needs the device's context (bind_to_thread).
        bind_to_thread(&self.device)?;
        if prompt.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        if options.generate == 0 {
            return Err(Error::NothingToGenerate);
        }
        let prompt_ids = self.tokenizer.encode(prompt)?;
        let dims = self.model.dims();
        let max = dims.max_positions;
        if prompt_ids.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        let rows = dims.vocab_size;
        if let Some(&id) = prompt_ids.iter().find(|&&id| id as usize >= rows) {
            return Err(Error::TokenOutsideEmbeddings {
                token: self.tokenizer.decode(&[id])?,
                id,
                rows,
            });
        }
        if prompt_ids.len() > max {
            return Err(Error::PromptTooLong {
                len: prompt_ids.len(),
                max,
            });
        }
        if prompt_ids.len() + options.generate > max {
            return Err(Error::GenerationTooLong {
                prompt: prompt_ids.len(),
                generate: options.generate,
                max,
            });
        }
        Ok(prompt_ids)
    }
}

/// A prompt and what the model generated from it: the device's part of a causal report,
/// which [`CausalExplainer::finish`] completes on the host.
pub struct Continuation {
    prompt: String,
    prompt_ids: Vec<u32>,
    generation: Generation,
}

/// A generated text and its maps, which its evaluation reads.
struct GeneratedMaps<'a> {
    prompt: &'a [u32],
    generated: &'a [u32],
    relevance: &'a CausalRelevance,
    methods: Option<&'a CausalMixings>,
}

/// ERASER's maps for generated token `k`: attention's and each method's last-layer rollout
/// and flow over the prompt, as n values (0 at the generated positions, which are never
/// blanked).
fn last_layer_maps(
    maps: &GeneratedMaps,
    k: usize,
    n: usize,
) -> Vec<(String, Vec<f64>, Option<Vec<f64>>)> {
    let last = |maps: &Vec<Vec<Vec<f64>>>| {
        let mut row = by_layer(&maps[k]).pop().unwrap_or_default();
        row.resize(n, 0.0);
        row
    };
    let relevance = maps.relevance;
    let attention = (
        Mixing::ATTENTION.name().to_string(),
        last(&relevance.rollout),
        relevance.flow.as_ref().map(last),
    );
    let methods = (maps.methods.into_iter().flatten())
        .filter(|(name, _)| name.as_str() != Mixing::ATTENTION.name());
    std::iter::once(attention)
        .chain(methods.map(|(name, maps)| {
            (
                name.clone(),
                last(&maps.rollout),
                maps.flow.as_ref().map(last),
            )
        }))
        .collect()
}
