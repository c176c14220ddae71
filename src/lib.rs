//! bert-explain: what a pretrained BERT looked at when it made a prediction.
//!
//! Attention rollout and attention flow after Abnar & Zuidema, "Quantifying Attention Flow
//! in Transformers" (ACL 2020). The data flows one way:
//!
//! ```text
//! text ─► tokens ─► model forward (logits + every layer's attention) ─► attention stack
//!      ─► relevance maps (raw, rollout, flow) ─► report (terminal, JSON, SVG/PNG, HTML)
//! ```
//!
//! [`checkpoint`] finds config, tokenizer and weights (a local folder or the Hub);
//! [`tokens`] encodes the text exactly as given; [`model`] runs BertForMaskedLM and keeps the
//! attention probabilities; [`attention`] fuses heads and adds the residual; [`relevance`]
//! computes raw attention, rollout and flow; [`report`] renders the result.
//! [`Explainer`] ties them together; [`importance`] and [`evaluate`] score tokens by input
//! gradients and blank-out and correlate the maps with them; [`batch`] runs a dataset;
//! [`causal`] does rollout over generated text for GPT-2 models. The library never prints.

pub mod attention;
pub mod batch;
pub mod causal;
pub mod checkpoint;
pub mod device;
pub mod eraser;
pub mod error;
pub mod evaluate;
pub mod explain;
pub mod importance;
pub mod input;
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
pub use relevance::{Relevance, RelevanceOptions};
pub use report::{Json, Renderer, Report, Terminal};
