//! DINOv2 (Oquab et al. 2024): ViT's tokens with layer scales, positions learnt for 518
//! pixels and interpolated (torch's bicubic) to the grid an image gives;
//! `Dinov2ForImageClassification` reads the class token beside the mean of the patches.

use crate::model::family::{Family, ImageClassifierNames, Pool};
use crate::model::vision::{family, Layout, Resize, VisionBody, DINOV2_LAYER};

const LAYOUT: Layout = Layout {
    distillation: false,
    registers: false,
    layer: DINOV2_LAYER,
    resize: Resize::Bicubic,
    eps: 1e-6,
};

/// DINOv2's classifier, which the version with registers shares.
pub const CLASSIFIERS: &[ImageClassifierNames] = &[ImageClassifierNames {
    outputs: &[("classifier", Pool::ClassAndPatches)],
}];

pub const FAMILY: Family = Family {
    model_types: &["dinov2"],
    ..family(
        "dinov2",
        "dinov2",
        |weights, path| Ok(Box::new(VisionBody::load(weights, path, &LAYOUT)?)),
        CLASSIFIERS,
    )
};
