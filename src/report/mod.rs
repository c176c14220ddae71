//! The report (SPEC §4) and the renderers that print it, one file per format.

mod json;
mod terminal;

use std::io::Write;

use serde::{Deserialize, Serialize};

pub use json::Json;
pub use terminal::Terminal;

use crate::relevance::{AllPositions, Relevance};

/// Everything bert-explain found for one sentence; serialises to the JSON report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub model: String,
    pub device: String,
    pub tokens: Vec<String>,
    pub target: Target,
    /// `None` when the checkpoint has no masked-LM head.
    pub prediction: Option<Prediction>,
    pub layers: usize,
    pub heads: usize,
    pub relevance: Relevance,
    /// With `--all-positions`: rollout and flow from every position (additive to SPEC §4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_positions: Option<AllPositions>,
}

/// The position being explained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub index: usize,
    pub token: String,
}

/// The masked-LM distribution at the target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub candidates: Vec<WordProbability>,
    pub top: Vec<WordProbability>,
}

/// One vocabulary entry and its probability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WordProbability {
    pub word: String,
    pub id: u32,
    pub probability: f64,
}

/// A way of printing a report.
pub trait Renderer {
    fn render(&self, report: &Report, out: &mut dyn Write) -> std::io::Result<()>;
}
