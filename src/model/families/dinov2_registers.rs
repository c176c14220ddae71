//! DINOv2 with registers (Darcet et al. 2024): DINOv2 with register tokens after the class
//! token (no positions of their own; left out of the patches' mean), and positions
//! interpolated with torch's antialiased bicubic.

use crate::model::family::Family;
use crate::model::vision::{family, Layout, Resize, VisionBody, DINOV2_LAYER};

const LAYOUT: Layout = Layout {
    distillation: false,
    registers: true,
    layer: DINOV2_LAYER,
    resize: Resize::BicubicAntialiased,
    eps: 1e-6,
};

pub const FAMILY: Family = Family {
    model_types: &["dinov2_with_registers"],
    ..family(
        "dinov2_with_registers",
        "dinov2_with_registers",
        |weights, path| Ok(Box::new(VisionBody::load(weights, path, &LAYOUT)?)),
        super::dinov2::CLASSIFIERS,
    )
};
