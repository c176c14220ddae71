//! DeiT (Touvron et al. 2021): ViT with a distillation token after the class token;
//! `DeiTForImageClassificationWithTeacher` averages the logits of a projection of each,
//! `DeiTForImageClassification` reads the class token alone.

use crate::model::family::{Family, ImageClassifierNames, Pool};
use crate::model::vision::{family, Layout, Resize, VisionBody, VIT_LAYER};

const LAYOUT: Layout = Layout {
    distillation: true,
    registers: false,
    layer: VIT_LAYER,
    resize: Resize::Refuse,
    eps: 1e-12,
};

pub const FAMILY: Family = Family {
    model_types: &["deit"],
    ..family(
        "deit",
        "deit",
        |weights, path| Ok(Box::new(VisionBody::load(weights, path, &LAYOUT)?)),
        &[
            ImageClassifierNames {
                outputs: &[
                    ("cls_classifier", Pool::Token(0)),
                    ("distillation_classifier", Pool::Token(1)),
                ],
            },
            ImageClassifierNames {
                outputs: &[("classifier", Pool::Token(0))],
            },
        ],
    )
};
