//! A checkpoint loaded once, of either kind: an encoder (a masked word, a label, a replaced
//! token) or a causal language model (generation), chosen by config.json's `model_type` as the
//! command line chooses. What the Python `Explainer` and `bert-explain serve` hold.

use candle_core::Device;

use crate::checkpoint::ModelSource;
use crate::error::Result;
use crate::explain::generation::CausalExplainer;
use crate::explain::Explainer;
use crate::model::families::is_causal;
use crate::model::Predicts;

pub enum Loaded {
    Encoder(Box<Explainer>),
    Causal(Box<CausalExplainer>),
}

impl Loaded {
    /// Finds (downloading if needed) and loads `source` onto `device`.
    pub fn load(source: &ModelSource, device: &Device) -> Result<Self> {
        Ok(match is_causal(source) {
            true => Loaded::Causal(Box::new(CausalExplainer::load(source, device)?)),
            false => Loaded::Encoder(Box::new(Explainer::load(source, device)?)),
        })
    }

    /// The task's name: an encoder head's (`masked-lm`, `sequence-classification`, ...,
    /// `encoder` without one) or `causal-lm`.
    pub fn task_name(&self) -> &'static str {
        match self {
            Loaded::Encoder(inner) => inner.task().name,
            Loaded::Causal(_) => "causal-lm",
        }
    }

    /// What the model predicts: `words` (at a mask), `labels`, `nothing` (no head) or
    /// `text` (generation).
    pub fn predicts(&self) -> &'static str {
        match self {
            Loaded::Encoder(inner) => match inner.task().predicts {
                Predicts::Words => "words",
                Predicts::Labels => "labels",
                Predicts::Nothing => "nothing",
            },
            Loaded::Causal(_) => "text",
        }
    }

    /// The model family (`bert`, `roberta`, ..., `gpt2`, `llama`, ...).
    pub fn family(&self) -> &'static str {
        match self {
            Loaded::Encoder(inner) => inner.family(),
            Loaded::Causal(inner) => inner.family(),
        }
    }
}
