//! RoBERTa (Liu et al. 2019) and XLM-R (Conneau et al. 2020): BERT's layers, position
//! ids from padding_idx + 1, one token type, `lm_head` and a two-layer classifier on `<s>`.

use crate::model::config::Activation;
use crate::model::family::BodyKind;
use crate::model::family::{
    ClassifierNames, EmbeddingNames, Family, MaskedLmNames, BERT_EMBEDDINGS, BERT_LAYER,
};
use crate::model::Reads;

pub const FAMILY: Family = Family {
    name: "roberta",
    model_types: &["roberta", "xlm-roberta"],
    base: "roberta",
    body: BodyKind::PostNorm,
    adjust: |config| {
        config.pad_token_id.get_or_insert(1);
    },
    embeddings: EmbeddingNames {
        position_offset: |config| config.pad_token_id.unwrap_or(1) + 1,
        ..BERT_EMBEDDINGS
    },
    layer: BERT_LAYER,
    masked_lm: &[MaskedLmNames {
        dense: "lm_head.dense",
        norm: "lm_head.layer_norm",
        decoder: "lm_head.decoder",
        bias: "lm_head.bias",
        activation: Some(Activation::Gelu),
    }],
    classifier: ClassifierNames {
        dense: Some("classifier.dense"),
        activation: Activation::Tanh,
        norm: None,
        output: "classifier.out_proj",
        reads: Reads::First,
    },
    discriminator: None,
    image: None,
};
