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
//! [`checkpoint`] finds config, tokenizer and weights (a local folder or the Hub);
//! [`tokens`] encodes the text exactly as given; [`model`] runs any supported family (BERT,
//! RoBERTa, XLM-R, DistilBERT, ALBERT, ELECTRA, GPT-2) with its head and keeps each layer's
//! attention (and, on request, its internals); [`attention`] fuses heads and adds the
//! residual; [`relevance`] computes raw attention, rollout and flow; [`methods`] the other
//! mixing matrices of SPEC §8 and their maps; [`report`] renders the result.
//! [`Explainer`] ties them together; [`importance`], [`evaluate`] and [`eraser`] score
//! tokens by input gradients and blank-out, correlate the maps with them and measure ERASER
//! faithfulness; [`batch`] runs a dataset; [`causal`] does rollout over generated text for
//! GPT-2, Llama, Qwen2 and Mistral models. [`cli`] is the command line itself, as a
//! function of its arguments; apart from it the library never prints.

// The command line (cli/) names the library as its callers do.
extern crate self as bert_explain;

pub mod attention;
pub mod batch;
pub mod causal;
pub mod checkpoint;
pub mod cli;
pub mod device;
pub mod eraser;
pub mod error;
pub mod evaluate;
pub mod explain;
pub mod importance;
pub mod input;
pub mod linalg;
pub mod loaded;
pub mod methods;
pub mod model;
pub mod relevance;
pub mod report;
pub mod tokens;

pub use attention::{AttentionStack, HeadFusion};
pub use checkpoint::ModelSource;
pub use device::{device, DeviceChoice};
pub use error::{Error, Result};
pub use explain::{ExplainOptions, Explainer};
pub use loaded::Loaded;
pub use relevance::{Relevance, RelevanceOptions};
pub use report::{Json, Renderer, Report, Terminal};
