//! Image input for vision transformers: a file decoded as Pillow decodes it, then resized,
//! cropped, rescaled and normalised as transformers' image processors do with their Pillow
//! backend, so that our `pixel_values` are transformers'.
//!
//! ```text
//! bytes ─► decode (PNG, JPEG, WebP, GIF; EXIF orientation; to 8-bit RGB) ─► Picture
//!       ─► ImageProcessor::view (resize with Pillow's filters, centre crop) ─► Picture
//!       ─► ImageProcessor::process (rescale, normalise, channel-major f32) ─► Pixels
//! ```
//!
//! What is exact and what is not:
//!
//! - PNG (and GIF, WebP): the decoded picture is Pillow's `convert("RGB")`, the
//!   resized and cropped view is bit for bit Pillow's (`resample` reimplements Pillow's
//!   `ImagingResample` and its nearest-neighbour scaling), and `pixel_values` are transformers'
//!   exactly: rescale and normalise follow numpy's float64-then-float32 steps operation for
//!   operation.
//! - JPEG: Pillow decodes with libjpeg-turbo, we with the `image` crate's decoder (zune-jpeg);
//!   they differ by a few 8-bit levels on a few pixels, and resampling carries that through.
//!   Measured on the scikit-image photographs (`image_reference.py --measure`; the views and
//!   `pixel_values` are held to these bounds by tests/image_preprocessing.rs): decoded pixels differ by at most 4 levels (rocket.jpg, 4:4:4: max 2, mean
//!   0.008, 0.7% of values; retina.jpg, 4:2:0: max 4, mean 0.080, 5.8%; hubble_deep_field.jpg,
//!   4:4:4: max 3, mean 0.012, 1.1%); the 224 × 224 views of ViT, DeiT and DINOv2 by at most 2
//!   levels (mean at most 0.088); `pixel_values` by at most 0.0349, two levels over ImageNet's
//!   std (mean at most 0.0015).
//! - Lossy WebP: `image-webp` gave libwebp's pixels exactly on the photographs tried (three,
//!   encoded by Pillow at quality 80; a corner of one is in the tests). CMYK JPEG is not
//!   measured.
//! - A palette, grey or RGB PNG or a GIF with a transparent colour key: Pillow keeps the key
//!   after `convert("RGB")`, and a processor with `do_convert_rgb` (BiT, DINOv2) then paints
//!   those pixels white. [`decode`] and [`read_picture`] drop the key; [`read_keyed`] keeps it
//!   and [`ImageProcessor::prepare`] paints as transformers does.

mod config;
mod decode;
mod pillow;
mod processor;
pub mod resample;
mod size;

pub use decode::{
    decode, decode_keyed, read_keyed, read_picture, FILE_LIMIT, MAX_PIXELS, MAX_SIDE,
};
pub use processor::ImageProcessor;
pub use resample::Filter;
pub use size::Size;

/// A decoded picture: 8-bit RGB, row-major, 3 bytes a pixel — what Pillow's `convert("RGB")`
/// gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    pub width: u32,
    pub height: u32,
    /// `[height][width][3]`, row-major.
    pub rgb: Vec<u8>,
}

impl Picture {
    /// The colour at column `x`, row `y`. Panics outside the picture.
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        assert!(
            x < self.width && y < self.height,
            "pixel ({x}, {y}) outside the picture"
        );
        let i = (y as usize * self.width as usize + x as usize) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }
}

/// A decoded picture with the colour Pillow keeps as `info["transparency"]` after
/// `convert("RGB")` (an 8-bit grey or RGB PNG's tRNS colour key, a PNG palette's one fully
/// transparent entry, a GIF's transparent index). A processor with `do_convert_rgb` (BiT,
/// DINOv2) composites such a picture onto white, so pixels of that colour turn white:
/// [`ImageProcessor::prepare`] does it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub picture: Picture,
    pub transparent: Option<[u8; 3]>,
}

/// `pixel_values` of one image: `[3, height, width]` f32, channel-major (red plane, green
/// plane, blue plane, each row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct Pixels {
    pub height: usize,
    pub width: usize,
    /// `3 * height * width` values.
    pub values: Vec<f32>,
}

impl Pixels {
    /// The shape `[3, height, width]`.
    pub fn shape(&self) -> [usize; 3] {
        [3, self.height, self.width]
    }
}
