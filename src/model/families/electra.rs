//! ELECTRA (Clark et al. 2020): BERT's layers after an optional projection of smaller
//! embeddings; the discriminator says for each token whether it was replaced.

use crate::model::config::Activation;
use crate::model::family::BodyKind;
use crate::model::family::{
    ClassifierNames, DiscriminatorNames, EmbeddingNames, Family, MaskedLmNames, BERT_EMBEDDINGS,
    BERT_LAYER,
};
use crate::model::Reads;

pub const FAMILY: Family = Family {
    name: "electra",
    model_types: &["electra"],
    base: "electra",
    body: BodyKind::PostNorm,
    adjust: |_| {},
    embeddings: EmbeddingNames {
        projection: Some("embeddings_project"),
        ..BERT_EMBEDDINGS
    },
    layer: BERT_LAYER,
    // ElectraForMaskedLM, the generator.
    masked_lm: &[MaskedLmNames {
        dense: "generator_predictions.dense",
        norm: "generator_predictions.LayerNorm",
        decoder: "generator_lm_head",
        bias: "generator_lm_head.bias",
        activation: Some(Activation::Gelu),
    }],
    classifier: ClassifierNames {
        dense: Some("classifier.dense"),
        activation: Activation::Gelu,
        norm: None,
        output: "classifier.out_proj",
        reads: Reads::First,
    },
    discriminator: Some(DiscriminatorNames {
        dense: "discriminator_predictions.dense",
        prediction: "discriminator_predictions.dense_prediction",
    }),
    image: None,
};
