//! ViT (Dosovitskiy et al. 2021): a class token before the patches, learnt positions for
//! one image size, pre-norm layers; `ViTForImageClassification` reads the class token.

use crate::model::family::{Family, ImageClassifierNames, Pool};
use crate::model::vision::{family, Layout, Resize, VisionBody, VIT_LAYER};

const LAYOUT: Layout = Layout {
    distillation: false,
    registers: false,
    layer: VIT_LAYER,
    resize: Resize::Refuse,
    eps: 1e-12,
};

pub const FAMILY: Family = Family {
    model_types: &["vit"],
    ..family(
        "vit",
        "vit",
        |weights, path| Ok(Box::new(VisionBody::load(weights, path, &LAYOUT)?)),
        &[ImageClassifierNames {
            outputs: &[("classifier", Pool::Token(0))],
        }],
    )
};
