//! A checkpoint's preprocessor_config.json and what it does to a picture: transformers' Pillow
//! backend (`PilBackend._preprocess`): resize, centre crop, rescale, normalise.
//!
//! transformers 5 runs an image processor on torchvision by default; `AutoImageProcessor.
//! from_pretrained(folder, backend="pil")` (or a `...ImageProcessorPil` class) selects the
//! Pillow backend this module reproduces. The config's fields are read in `config`.

use std::path::Path;

use serde_json::Value;

use super::resample::{resize, Filter};
use super::size::Size;
use super::{Decoded, Picture, Pixels};
use crate::error::{Error, Result};
use crate::input::{read_text_capped, METADATA_LIMIT};

/// A checkpoint's preprocessor_config.json: what the picture goes through before the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageProcessor {
    /// `image_processor_type` (or the type it was inferred as).
    pub kind: String,
    /// The size and filter of `do_resize`, or `None`.
    pub resize: Option<(Size, Filter)>,
    /// `(height, width)` of `do_center_crop`, or `None`.
    pub crop: Option<(u32, u32)>,
    /// `rescale_factor` of `do_rescale`, or `None`.
    pub rescale: Option<f64>,
    /// `(image_mean, image_std)` of `do_normalize`, or `None`.
    pub normalize: Option<([f64; 3], [f64; 3])>,
    /// `do_convert_rgb` (pictures are RGB already; see the module doc of `image` for the one
    /// case where transformers differs).
    pub convert_rgb: bool,
}

impl ImageProcessor {
    /// Reads a preprocessor_config.json. Without `image_processor_type` (or an old
    /// `feature_extractor_type`), the `model_type` of config.json beside it names the class
    /// (vit, deit, dinov2), as `AutoImageProcessor` does.
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |message: String| Error::ImageProcessorConfig {
            path: path.to_path_buf(),
            message,
        };
        let text = read_text_capped(path, METADATA_LIMIT).map_err(|e| bad(e.to_string()))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let model_type = || {
            let config = path.parent()?.join("config.json");
            let text = read_text_capped(&config, METADATA_LIMIT).ok()?;
            let value: Value = serde_json::from_str(&text).ok()?;
            value.get("model_type")?.as_str().map(str::to_owned)
        };
        Self::from_value(&value, model_type).map_err(bad)
    }

    /// The picture as this processor receives it from `load_image`: with `do_convert_rgb`,
    /// transformers composites a picture that Pillow keeps a transparent colour for onto
    /// white (`convert_to_rgb`), so the pixels of that colour turn white; otherwise the
    /// picture as decoded.
    pub fn prepare(&self, decoded: Decoded) -> Picture {
        let mut picture = decoded.picture;
        if let (true, Some(key)) = (self.convert_rgb, decoded.transparent) {
            for pixel in picture.rgb.chunks_exact_mut(3) {
                if pixel == key {
                    pixel.copy_from_slice(&[255; 3]);
                }
            }
        }
        picture
    }

    /// The picture as the model sees it, before rescaling: resized and centre-cropped, 8-bit
    /// RGB (for drawing heat maps over). Bit for bit what transformers' Pillow backend has
    /// before `rescale`.
    pub fn view(&self, picture: &Picture) -> Result<Picture> {
        let mut resized = None;
        if let Some((size, filter)) = self.resize {
            let (height, width) = size.output(picture.height, picture.width);
            resized = Some(resize(picture, width, height, filter)?);
        }
        let current = resized.as_ref().unwrap_or(picture);
        Ok(match self.crop {
            Some((height, width)) => center_crop(current, height, width),
            None => resized.unwrap_or_else(|| picture.clone()),
        })
    }

    /// pixel_values of one image: `[3, height, width]` f32, channel-major, equal to
    /// transformers' `pixel_values[0]` (exactly, for the same 8-bit input).
    pub fn process(&self, picture: &Picture) -> Result<Pixels> {
        Ok(self.pixels(&self.view(picture)?))
    }

    /// pixel_values of a picture already [`view`](Self::view)ed: rescaled and normalised
    /// only, `[3, height, width]` f32. (With neither step, transformers' pixel_values are
    /// uint8; these are the same numbers.)
    pub fn pixels(&self, view: &Picture) -> Pixels {
        let (height, width) = (view.height as usize, view.width as usize);
        let mut values = Vec::with_capacity(3 * height * width);
        for c in 0..3 {
            // numpy: uint8 → float64 × factor → float32; then (x - mean) / std in float32.
            let (mean, std) = match self.normalize {
                Some((mean, std)) => (Some(mean[c] as f32), std[c] as f32),
                None => (None, 1.0),
            };
            values.extend(view.rgb.chunks_exact(3).map(|p| {
                let x = match self.rescale {
                    Some(factor) => (p[c] as f64 * factor) as f32,
                    None => p[c] as f32,
                };
                match mean {
                    Some(mean) => (x - mean) / std,
                    None => x,
                }
            }));
        }
        Pixels {
            height,
            width,
            values,
        }
    }

    /// `(height, width)` of [`view`](Self::view)'s picture (and of `pixel_values`) for a
    /// picture of `height` × `width`.
    pub fn output_size(&self, height: u32, width: u32) -> (u32, u32) {
        if let Some((height, width)) = self.crop {
            return (height, width);
        }
        match self.resize {
            Some((size, _)) => size.output(height, width),
            None => (height, width),
        }
    }
}

/// numpy's `center_crop`: the crop's corner at `(size - crop) // 2` (floor), and where the
/// picture is smaller than the crop, black (zero) padding around it, placed at `ceil(gap / 2)`.
fn center_crop(picture: &Picture, height: u32, width: u32) -> Picture {
    let (h, w) = (picture.height as i64, picture.width as i64);
    let (ch, cw) = (height as i64, width as i64);
    let top = (h - ch).div_euclid(2);
    let left = (w - cw).div_euclid(2);
    let mut rgb = vec![0u8; (ch * cw * 3) as usize];
    if top >= 0 && left >= 0 {
        for y in 0..ch {
            let from = (((top + y) * w + left) * 3) as usize;
            let to = (y * cw * 3) as usize;
            rgb[to..to + (cw * 3) as usize]
                .copy_from_slice(&picture.rgb[from..from + (cw * 3) as usize]);
        }
        return Picture { width, height, rgb };
    }
    // Padded to at least the crop, the picture sits at (top_pad, left_pad); the crop window
    // moves with it and is cut to the padded canvas.
    let (nh, nw) = (ch.max(h), cw.max(w));
    let top_pad = (nh - h + 1) / 2;
    let left_pad = (nw - w + 1) / 2;
    let (top, left) = (top + top_pad, left + left_pad);
    let (y0, y1) = (top.max(0), (top + ch).min(nh));
    let (x0, x1) = (left.max(0), (left + cw).min(nw));
    let (out_h, out_w) = (y1 - y0, x1 - x0);
    let mut rgb = vec![0u8; (out_h * out_w * 3) as usize];
    for y in 0..out_h {
        for x in 0..out_w {
            let (sy, sx) = (y0 + y - top_pad, x0 + x - left_pad);
            if (0..h).contains(&sy) && (0..w).contains(&sx) {
                let from = ((sy * w + sx) * 3) as usize;
                let to = ((y * out_w + x) * 3) as usize;
                rgb[to..to + 3].copy_from_slice(&picture.rgb[from..from + 3]);
            }
        }
    }
    Picture {
        width: out_w as u32,
        height: out_h as u32,
        rgb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn processor(value: Value) -> ImageProcessor {
        ImageProcessor::from_value(&value, || None).unwrap()
    }

    fn numbered(width: u32, height: u32) -> Picture {
        let rgb = (0..width * height)
            .flat_map(|i| [i as u8, 0, 255])
            .collect();
        Picture { width, height, rgb }
    }

    #[test]
    fn centre_crop_rounds_down_and_pads_with_black() {
        // 5 wide, crop 2: numpy's corner is (5 - 2) // 2 = 1.
        let p = numbered(5, 1);
        assert_eq!(center_crop(&p, 1, 2).rgb, [1, 0, 255, 2, 0, 255]);
        // 2 wide, crop 5: padded by ceil(3 / 2) = 2 on the left, 1 on the right.
        let q = numbered(2, 1);
        let out = center_crop(&q, 1, 5);
        assert_eq!((out.width, out.height), (5, 1));
        assert_eq!(out.rgb, [0, 0, 0, 0, 0, 0, 0, 0, 255, 1, 0, 255, 0, 0, 0]);
        // Taller than the crop but narrower: cut one way, padded the other.
        let r = numbered(1, 4);
        let out = center_crop(&r, 2, 2);
        assert_eq!(out.rgb, [0, 0, 0, 1, 0, 255, 0, 0, 0, 2, 0, 255]);
    }

    #[test]
    fn only_do_convert_rgb_paints_the_transparent_colour_white() {
        let decoded = Decoded {
            picture: Picture {
                width: 2,
                height: 1,
                rgb: vec![1, 2, 3, 4, 5, 6],
            },
            transparent: Some([4, 5, 6]),
        };
        let bit = processor(json!({"image_processor_type": "BitImageProcessor"}));
        assert_eq!(bit.prepare(decoded.clone()).rgb, [1, 2, 3, 255, 255, 255]);
        let vit = processor(json!({"image_processor_type": "ViTImageProcessor"}));
        assert_eq!(vit.prepare(decoded.clone()).rgb, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn rescale_and_normalise_in_numpys_precisions() {
        let vit = processor(json!({"image_processor_type": "ViTImageProcessor",
            "do_resize": false}));
        let p = Picture {
            width: 2,
            height: 1,
            rgb: vec![0, 128, 255, 7, 8, 9],
        };
        let pixels = vit.process(&p).unwrap();
        assert_eq!(pixels.shape(), [3, 1, 2]);
        let expect = |v: u8| ((v as f64 * (1.0 / 255.0)) as f32 - 0.5) / 0.5;
        assert_eq!(
            pixels.values,
            [
                expect(0),
                expect(7),
                expect(128),
                expect(8),
                expect(255),
                expect(9)
            ]
        );
        assert_eq!(pixels.values[0], -1.0);
        assert_eq!(pixels.values[4], 1.0);
    }
}
