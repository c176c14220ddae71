//! BERT (Devlin et al. 2019): the reference layout; bert-base-uncased's old names
//! (`LayerNorm.gamma/beta`) are mapped when the weights are read.

use crate::model::config::Activation;
use crate::model::family::{
    from_zero, ClassifierNames, EmbeddingNames, Family, MaskedLmNames, BERT_LAYER,
};

pub const FAMILY: Family = Family {
    name: "bert",
    model_types: &["bert"],
    base: "bert",
    adjust: |_| {},
    embeddings: EmbeddingNames {
        word: "embeddings.word_embeddings",
        position: "embeddings.position_embeddings",
        token_type: Some("embeddings.token_type_embeddings"),
        norm: "embeddings.LayerNorm",
        projection: None,
        position_offset: from_zero,
    },
    layer: BERT_LAYER,
    masked_lm: MaskedLmNames {
        dense: "cls.predictions.transform.dense",
        norm: "cls.predictions.transform.LayerNorm",
        decoder: "cls.predictions.decoder",
        bias: "cls.predictions.bias",
        activation: None,
    },
    // BertForSequenceClassification: the pooler (tanh) on [CLS], then the classifier.
    classifier: ClassifierNames {
        dense: "pooler.dense",
        activation: Activation::Tanh,
        output: "classifier",
    },
    discriminator: None,
};
