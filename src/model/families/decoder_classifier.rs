//! Decoder classifiers (`LlamaForSequenceClassification` and the same head on Qwen2, Qwen3,
//! Mistral, Gemma 1–3 and Phi-3): the rotary decoder read whole as the body, and `score` (no
//! bias) at the last token, which is the one that has seen the whole text (transformers reads
//! the last token that is not padding; bert-explain never pads). They are explained as an
//! encoder's classifier is: labels, `--label`, `--evaluate`, batch mode, Python.

use std::path::Path;

use crate::checkpoint::Weights;
use crate::error::{Error, Result};
use crate::model::body::Body;
use crate::model::config::{model_type, Activation};
use crate::model::decoder::RotaryDecoder;
use crate::model::family::{
    BodyKind, ClassifierNames, Family, MaskedLmNames, BERT_EMBEDDINGS, BERT_LAYER,
};
use crate::model::Reads;

/// The families whose classifiers are read, each under its decoder's name.
pub static FAMILIES: [Family; 8] = [
    family("llama"),
    family("qwen2"),
    family("mistral"),
    family("qwen3"),
    family("gemma"),
    family("gemma2"),
    family("gemma3_text"),
    family("phi3"),
];

/// The classifier of the decoder family `name` (its main `model_type`).
const fn family(name: &'static str) -> Family {
    Family {
        name,
        model_types: &[],
        base: "",
        body: BodyKind::Own(body),
        // No token types: every position's is 0.
        adjust: |config| config.type_vocab_size = 0,
        // A body of its own: BERT's names and the masked-LM names are never read.
        embeddings: BERT_EMBEDDINGS,
        layer: BERT_LAYER,
        masked_lm: &[MaskedLmNames {
            dense: "",
            norm: "",
            decoder: "",
            bias: "",
            activation: None,
        }],
        classifier: ClassifierNames {
            dense: None,
            activation: Activation::Tanh,
            norm: None,
            output: "score",
            reads: Reads::Last,
        },
        discriminator: None,
        image: None,
    }
}

/// The classifier family of a decoder `model_type` (`gemma3` reads as `gemma3_text`).
pub fn classifier_family(model_type: &str) -> Option<&'static Family> {
    let main = match model_type {
        "gemma3" => "gemma3_text",
        other => other,
    };
    FAMILIES.iter().find(|f| f.name == main)
}

/// The decoder of the config at `path`, built from the weights as a body.
fn body(weights: &Weights, path: &Path) -> Result<Box<dyn Body>> {
    let found = model_type(path).unwrap_or_default();
    let spec = super::rotary_spec(&found).ok_or_else(|| Error::NotCausal {
        path: path.to_path_buf(),
        found,
        supported: super::causal_model_types(),
    })?;
    let mut spec = spec(path)?;
    // A classifier has no language-model head: the tied table stands in and is never read.
    spec.tied = true;
    Ok(Box::new(RotaryDecoder::load(weights, spec)?))
}
