//! ALBERT (Lan et al. 2020): factorised embeddings (embedding_size, then a projection to
//! the hidden size) and one layer whose parameters every layer shares.

use crate::model::config::Activation;
use crate::model::family::BodyKind;
use crate::model::family::{
    ClassifierNames, EmbeddingNames, Family, LayerNames, MaskedLmNames, BERT_EMBEDDINGS,
};
use crate::model::Reads;

pub const FAMILY: Family = Family {
    name: "albert",
    model_types: &["albert"],
    base: "albert",
    body: BodyKind::PostNorm,
    adjust: |_| {},
    embeddings: EmbeddingNames {
        projection: Some("encoder.embedding_hidden_mapping_in"),
        ..BERT_EMBEDDINGS
    },
    layer: LayerNames {
        // num_hidden_groups = inner_group_num = 1 (checked with the config).
        prefix: |_| "encoder.albert_layer_groups.0.albert_layers.0".to_string(),
        query: "attention.query",
        key: "attention.key",
        value: "attention.value",
        attention_output: "attention.dense",
        attention_norm: "attention.LayerNorm",
        ffn_in: "ffn",
        ffn_out: "ffn_output",
        output_norm: "full_layer_layer_norm",
    },
    masked_lm: &[MaskedLmNames {
        dense: "predictions.dense",
        norm: "predictions.LayerNorm",
        decoder: "predictions.decoder",
        bias: "predictions.bias",
        activation: None,
    }],
    classifier: ClassifierNames {
        dense: Some("pooler"),
        activation: Activation::Tanh,
        norm: None,
        output: "classifier",
        reads: Reads::First,
    },
    discriminator: None,
    image: None,
};
