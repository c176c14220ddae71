//! BERT (Devlin et al. 2019): the reference layout; bert-base-uncased's old names
//! (`LayerNorm.gamma/beta`) are mapped when the weights are read.

use crate::model::config::Activation;
use crate::model::family::BodyKind;
use crate::model::family::{ClassifierNames, Family, MaskedLmNames, BERT_EMBEDDINGS, BERT_LAYER};
use crate::model::Reads;

pub const FAMILY: Family = Family {
    name: "bert",
    model_types: &["bert"],
    base: "bert",
    body: BodyKind::PostNorm,
    adjust: |_| {},
    embeddings: BERT_EMBEDDINGS,
    layer: BERT_LAYER,
    masked_lm: &[MaskedLmNames {
        dense: "cls.predictions.transform.dense",
        norm: "cls.predictions.transform.LayerNorm",
        decoder: "cls.predictions.decoder",
        bias: "cls.predictions.bias",
        activation: None,
    }],
    // BertForSequenceClassification: the pooler (tanh) on [CLS], then the classifier.
    classifier: ClassifierNames {
        dense: Some("pooler.dense"),
        activation: Activation::Tanh,
        norm: None,
        output: "classifier",
        reads: Reads::First,
    },
    discriminator: None,
    image: None,
};
