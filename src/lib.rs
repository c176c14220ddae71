//! bert-explain: what a pretrained transformer looked at when it made a prediction.
//!
//! Attention rollout and attention flow after Abnar & Zuidema, "Quantifying Attention Flow
//! in Transformers" (ACL 2020). The data flows one way:
//!
//! ```text
//! text ─► tokens ─► model forward (logits + every layer's attention) ─► attention stack
//!      ─► relevance maps (raw, rollout, flow; other mixings × aggregations)
//!      ─► report (terminal, JSON, SVG/PNG, HTML)
//! ```
//!
//! Generation takes the same path: the text is a prompt, [`generate`] continues it and keeps
//! every step's attention, and each generated token is explained from the position that
//! predicted it.
//!
//! [`checkpoint`] finds config, tokenizer and weights (a local folder or the Hub);
//! [`tokens`] encodes the text exactly as given; [`model`] runs any supported family (BERT,
//! RoBERTa, XLM-R, DistilBERT, ALBERT, ELECTRA; GPT-2, Llama, Qwen2 and 3, Mistral, Gemma 1–3,
//! Phi-3) with its head
//! and keeps each layer's attention (and, on request, its internals); [`attention`] fuses
//! heads and adds the residual; [`relevance`] computes raw attention, rollout and flow;
//! [`methods`] the other mixing matrices of SPEC §8 and their maps; [`report`] renders the
//! result.
//! [`image`] reads a picture and preprocesses it as transformers' image processors do (Pillow
//! backend), for vision transformers (ViT, DeiT, DINOv2).
//! [`Explainer`] ties them together; [`faithfulness`] scores tokens by input gradients,
//! blank-out, integrated gradients and LRP, correlates the maps with them and measures ERASER
//! faithfulness; [`batch`] runs a dataset. Each stage has a file for causal models (GPT-2,
//! Llama, Qwen2, Mistral) where they differ, and [`causal`] gathers those names. [`cli`] is
//! the command line itself, as a function of its arguments; apart from it the library never
//! prints.

// The command line (cli/) names the library as its callers do.
extern crate self as bert_explain;

pub mod attention;
pub mod batch;
pub mod checkpoint;
pub mod cli;
pub mod device;
pub mod error;
pub mod explain;
pub mod faithfulness;
pub mod generate;
pub mod image;
pub mod input;
pub mod linalg;
pub mod loaded;
pub mod methods;
pub mod model;
pub mod relevance;
pub mod report;
pub mod tokens;

/// Generation's names in one place: a causal model's explainer and options, its report and
/// the pieces it is made of (generation, the maps, the methods, the tokenizer).
pub mod causal {
    pub use crate::explain::generation::{CausalExplainer, CausalOptions};
    pub use crate::generate::{argmax, generate, sample, Decoding, Generation};
    pub use crate::methods::causal::{causal_mixings, Generated};
    pub use crate::methods::{CausalMethodMaps, CausalMixings};
    pub use crate::model::causal::{CausalDims, CausalLm, KvCache, StepOutput};
    pub use crate::model::families::gpt2::{Gpt2, Gpt2Config};
    pub use crate::model::families::{is_causal, load_causal};
    pub use crate::relevance::causal::{
        causal_relevance, causal_relevance_with, CausalMethod, CausalMethods, CausalRelevance,
    };
    pub use crate::report::causal::{rank, CausalReport, GenerationInfo, RankedToken, Ranking};
    pub use crate::tokens::causal::CausalTokenizer;
}

pub use attention::{AttentionStack, HeadFusion};
pub use checkpoint::ModelSource;
pub use device::{device, DeviceChoice};
pub use error::{Error, Result};
pub use explain::{ExplainOptions, Explainer};
pub use loaded::Loaded;
pub use relevance::{Relevance, RelevanceOptions};
pub use report::{Json, Renderer, Report, Terminal};
