//! DistilBERT (Sanh et al. 2019): no token types, its own layer names, a ReLU
//! pre-classifier.

use crate::model::config::Activation;
use crate::model::family::BodyKind;
use crate::model::family::{
    ClassifierNames, EmbeddingNames, Family, LayerNames, MaskedLmNames, BERT_EMBEDDINGS,
};
use crate::model::Reads;

pub const FAMILY: Family = Family {
    name: "distilbert",
    model_types: &["distilbert"],
    base: "distilbert",
    body: BodyKind::PostNorm,
    adjust: |config| config.type_vocab_size = 0,
    embeddings: EmbeddingNames {
        token_type: None,
        ..BERT_EMBEDDINGS
    },
    layer: LayerNames {
        prefix: |i| format!("transformer.layer.{i}"),
        query: "attention.q_lin",
        key: "attention.k_lin",
        value: "attention.v_lin",
        attention_output: "attention.out_lin",
        attention_norm: "sa_layer_norm",
        ffn_in: "ffn.lin1",
        ffn_out: "ffn.lin2",
        output_norm: "output_layer_norm",
    },
    masked_lm: &[MaskedLmNames {
        dense: "vocab_transform",
        norm: "vocab_layer_norm",
        decoder: "vocab_projector",
        bias: "vocab_projector.bias",
        activation: None,
    }],
    classifier: ClassifierNames {
        dense: Some("pre_classifier"),
        activation: Activation::Relu,
        norm: None,
        output: "classifier",
        reads: Reads::First,
    },
    discriminator: None,
    image: None,
};
