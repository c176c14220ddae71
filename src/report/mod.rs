//! The reports and the renderers that print them, one per format: terminal, JSON, the SVG
//! and PNG figure, and the HTML page. A report is an encoder's (SPEC §4: a masked word, a
//! label, a replaced token, or a saved stack's) or a generated text's ([`causal`]); every
//! renderer draws either, as [`Explained`] holds it. An encoder's shows as a [`View`], so
//! whatever it can hold (no prediction, `--attention` input, `all_positions`, hidden tokens)
//! shows the same way in every format.

pub mod causal;
pub mod colour;
mod escape;
mod evaluation;
mod html;
mod json;
mod output;
pub mod patches;
pub mod picture;
mod png;
mod svg;
mod terminal;
mod view;

use std::io::Write;

use serde::{Deserialize, Serialize};

pub use causal::GeneratedView;
pub use escape::{esc, terminal as terminal_text};
pub use html::Html;
pub use json::Json;
pub use output::{remove_partial_outputs_on_interrupt, Format, OutputFile};
pub use png::{rasterise, Png};
pub use svg::{figure, figure_of, generated_figure, Svg, FONT_FAMILY};
pub use terminal::{Colour, Terminal};
pub use view::{is_special, View};

use crate::faithfulness::correlations::Evaluation;
use crate::faithfulness::Importance;
use crate::methods::Methods;
use crate::relevance::{AllPositions, Relevance};

/// Everything bert-explain found for one sentence; serialises to the JSON report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub model: String,
    /// The model family (`bert`, `roberta`, ...; SPEC §7); absent for `--attention` input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// `masked-lm`, `sequence-classification`, `replaced-token-detection` or `encoder`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub device: String,
    pub tokens: Vec<String>,
    /// Which tokens the tokenizer added as special tokens (not in the JSON: `--hide-special`
    /// uses it; without it, tokens are judged by their spelling).
    #[serde(skip)]
    pub special: Option<Vec<bool>>,
    pub target: Target,
    /// `None` when the checkpoint has no head.
    pub prediction: Option<Prediction>,
    pub layers: usize,
    pub heads: usize,
    pub relevance: Relevance,
    /// With `--all-positions`: rollout and flow from every position (additive to SPEC §4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_positions: Option<AllPositions>,
    /// With `--evaluate`: importance scores for the predicted word (additive to SPEC §4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<Importance>,
    /// With `--evaluate`: Spearman correlations of each map with each score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<Evaluation>,
    /// With `--mixing`: each method's layer, rollout and flow maps (SPEC §8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<Methods>,
    /// An image's size and its grid of patches (SPEC §10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageInfo>,
    /// The picture as the model saw it (resized and cropped), for figures and pages; not in
    /// the JSON.
    #[serde(skip)]
    pub picture: Option<std::sync::Arc<crate::image::Picture>>,
}

/// The image a report explains: its size in pixels as given, and the grid of patches the
/// model saw (`grid[0]` rows by `grid[1]` columns, each `patch` pixels square, after the
/// checkpoint's resizing and cropping).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    pub width: usize,
    pub height: usize,
    pub grid: [usize; 2],
    pub patch: usize,
}

/// The position being explained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub index: usize,
    pub token: String,
}

/// What the head predicts at the target: the masked-LM distribution (candidates and the
/// top words, SPEC §4), or every label of a classifier, most probable first (SPEC §7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Prediction {
    Words {
        candidates: Vec<WordProbability>,
        top: Vec<WordProbability>,
    },
    Labels {
        labels: Vec<LabelProbability>,
    },
}

impl Prediction {
    /// The prediction as titled groups of (name, probability), as renderers show it.
    /// Figures and the terminal show at most [`SHOWN_LABELS`] labels (the JSON has all).
    pub fn groups(&self) -> Vec<(String, Vec<(&str, f64)>)> {
        fn words(ws: &[WordProbability]) -> Vec<(&str, f64)> {
            ws.iter()
                .map(|w| (w.word.as_str(), w.probability))
                .collect()
        }
        match self {
            Prediction::Words { candidates, top } => {
                vec![
                    ("candidates".into(), words(candidates)),
                    ("top predictions".into(), words(top)),
                ]
            }
            Prediction::Labels { labels } => {
                let title = match labels.len() > SHOWN_LABELS {
                    true => format!("labels (top {SHOWN_LABELS} of {})", labels.len()),
                    false => "labels".into(),
                };
                let shown = labels.iter().take(SHOWN_LABELS);
                vec![(
                    title,
                    shown.map(|l| (l.label.as_str(), l.probability)).collect(),
                )]
            }
        }
    }
}

/// How many labels (the most probable) figures and the terminal show.
pub const SHOWN_LABELS: usize = 10;

/// One label of a classifier and its probability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelProbability {
    pub label: String,
    pub id: u32,
    pub probability: f64,
}

/// One vocabulary entry and its probability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WordProbability {
    pub word: String,
    pub id: u32,
    pub probability: f64,
}

/// A report of any task, as it is shown: what every renderer draws.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Explained {
    /// An encoder's (a masked word, a label, a replaced token) or a saved stack's.
    Encoder(Box<View>),
    /// A generated text's.
    Generated(Box<GeneratedView>),
}

impl Explained {
    /// A report back from its JSON (`--json`'s output, of either kind).
    pub fn from_json(json: &str) -> serde_json::Result<Self> {
        #[derive(Deserialize)]
        struct Mode {
            mode: Option<String>,
        }
        let Mode { mode } = serde_json::from_str(json)?;
        Ok(match mode.as_deref() {
            Some("causal") => GeneratedView::last(serde_json::from_str(json)?).into(),
            _ => View::from_json(json)?.into(),
        })
    }
}

impl From<View> for Explained {
    fn from(view: View) -> Self {
        Self::Encoder(Box::new(view))
    }
}

impl From<GeneratedView> for Explained {
    fn from(generated: GeneratedView) -> Self {
        Self::Generated(Box::new(generated))
    }
}

/// A way of printing a report.
pub trait Renderer {
    fn render(&self, shown: &Explained, out: &mut dyn Write) -> std::io::Result<()>;
}

/// Four decimals, or three significant digits below 0.001 where decimals would show 0.
pub(crate) fn probability(p: f64) -> String {
    if p >= 1e-3 || p == 0.0 {
        format!("{p:.4}")
    } else {
        format!("{p:.2e}")
    }
}
