//! Image files to 8-bit RGB as transformers' `load_image` gives them: decoded (PNG, JPEG, WebP,
//! GIF's first frame), turned upright by the EXIF orientation (`PIL.ImageOps.exif_transpose`),
//! then `convert("RGB")` — every file bounded before its pixels reach memory.
//!
//! `convert("RGB")` as Pillow 13 does it, for what the decoders give:
//! - alpha is dropped, not composited (RGBA, grey + alpha, and palettes or colour keys made
//!   transparent by a tRNS chunk);
//! - grey is replicated to the three channels, and low bit depths are scaled up (1-bit to 0 or
//!   255, 2-bit by 85, 4-bit by 17), as both decoders do;
//! - a GIF's screen outside its first frame is the colour of the frame's transparent index,
//!   else of index 0 (the `image` crate leaves it transparent black);
//! - 16-bit RGB, RGBA and grey + alpha keep the high byte of each sample (Pillow unpacks them
//!   to 8 bits that way when it opens them), but 16-bit grey alone is clipped: Pillow opens it
//!   as mode `I;16` and its conversion to RGB saturates at 255 rather than scaling, so all
//!   values from 255 up are white. We do the same.

use std::io::Cursor;
use std::path::Path;

use ::image::metadata::Orientation;
use ::image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, Limits};

use super::pillow::{gif_first_frame, jpeg_is_complete, transparent_colour};
use super::{Decoded, Picture};
use crate::error::{Error, Result};
use crate::input::read_capped;

/// The most an image file may hold: far beyond a photograph at the sizes below.
pub const FILE_LIMIT: u64 = 128 << 20;
/// The widest or tallest image taken, in pixels.
pub const MAX_SIDE: u32 = 1 << 15;
/// The most pixels an image may have (8192 × 8192), checked from its header.
pub const MAX_PIXELS: u64 = 1 << 26;
/// The most a decoder may allocate: the largest picture at 16 bits a channel with alpha.
const MAX_ALLOC: u64 = MAX_PIXELS * 8 + (64 << 20);

/// The picture in `bytes` (PNG, JPEG, WebP, or GIF's first frame), upright by its EXIF
/// orientation, in 8-bit RGB as Pillow's `convert("RGB")` gives it (see the module doc for
/// alpha and 16-bit samples).
pub fn decode(bytes: &[u8]) -> Result<Picture> {
    decode_keyed(bytes).map(|decoded| decoded.picture)
}

/// [`decode`], with the colour Pillow keeps as transparent (see [`Decoded`]).
pub fn decode_keyed(bytes: &[u8]) -> Result<Decoded> {
    let format = ::image::guess_format(bytes)
        .ok()
        .filter(|f| {
            matches!(
                f,
                ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::WebP | ImageFormat::Gif
            )
        })
        .ok_or_else(|| Error::ImageFormat {
            start: bytes
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" "),
        })?;
    let name = match format {
        ImageFormat::Png => "PNG",
        ImageFormat::Jpeg => "JPEG",
        ImageFormat::WebP => "WebP",
        _ => "GIF",
    };
    let failed = |e: ImageError| match e {
        ImageError::Limits(_) => Error::ImageTooLarge {
            size: "larger than the decoder may allocate".into(),
        },
        e => Error::ImageDecode {
            format: name.into(),
            message: e.to_string(),
        },
    };
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(&failed)?;
    let (width, height) = decoder.dimensions();
    check_size(name, width, height)?;
    if format == ImageFormat::Jpeg && !jpeg_is_complete(bytes) {
        return Err(Error::ImageDecode {
            format: name.into(),
            message: "the file ends before the image does".into(),
        });
    }
    // An unreadable EXIF block leaves the picture as stored, as Pillow does.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let mut image = DynamicImage::from_decoder(decoder).map_err(&failed)?;
    if format == ImageFormat::Gif {
        fill_gif_screen(bytes, &mut image);
    }
    image.apply_orientation(orientation);
    Ok(Decoded {
        picture: to_rgb(name, image)?,
        transparent: transparent_colour(bytes),
    })
}

/// The picture in the file at `path`, read with a size cap ([`FILE_LIMIT`]); errors name the
/// path.
pub fn read_picture(path: &Path) -> Result<Picture> {
    read_keyed(path).map(|decoded| decoded.picture)
}

/// [`read_picture`], with the colour Pillow keeps as transparent (see [`Decoded`]).
pub fn read_keyed(path: &Path) -> Result<Decoded> {
    let bytes = read_capped(path, FILE_LIMIT).map_err(|e| Error::ImageRead {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    decode_keyed(&bytes).map_err(|e| Error::InImage {
        path: path.to_path_buf(),
        source: Box::new(e),
    })
}

/// Pillow's canvas for a GIF's first frame: outside the frame, the colour of its transparent
/// index or of index 0, opaque.
fn fill_gif_screen(bytes: &[u8], image: &mut DynamicImage) {
    let (Some(frame), DynamicImage::ImageRgba8(canvas)) = (gif_first_frame(bytes), image) else {
        return;
    };
    let [left, top, width, height] = frame.rect;
    let [r, g, b] = frame.fill;
    for (x, y, pixel) in canvas.enumerate_pixels_mut() {
        let inside = (left..left.saturating_add(width)).contains(&x)
            && (top..top.saturating_add(height)).contains(&y);
        if !inside {
            pixel.0 = [r, g, b, 255];
        }
    }
}

fn check_size(name: &str, width: u32, height: u32) -> Result<()> {
    if width == 0 || height == 0 {
        return Err(Error::ImageDecode {
            format: name.into(),
            message: format!("its header says {width}×{height} pixels, which holds none"),
        });
    }
    if width > MAX_SIDE || height > MAX_SIDE || width as u64 * height as u64 > MAX_PIXELS {
        return Err(Error::ImageTooLarge {
            size: format!("{width}×{height} pixels"),
        });
    }
    Ok(())
}

/// Pillow's `convert("RGB")` of what the `image` crate decoded (see the module doc).
fn to_rgb(name: &str, image: DynamicImage) -> Result<Picture> {
    let (width, height) = (image.width(), image.height());
    let rgb = match image {
        DynamicImage::ImageRgb8(buffer) => buffer.into_raw(),
        DynamicImage::ImageRgba8(buffer) => pick(buffer.as_raw(), 4, |p| [p[0], p[1], p[2]]),
        DynamicImage::ImageLuma8(buffer) => pick(buffer.as_raw(), 1, |p| [p[0]; 3]),
        DynamicImage::ImageLumaA8(buffer) => pick(buffer.as_raw(), 2, |p| [p[0]; 3]),
        DynamicImage::ImageRgb16(buffer) => pick(buffer.as_raw(), 3, high),
        DynamicImage::ImageRgba16(buffer) => pick(buffer.as_raw(), 4, high),
        DynamicImage::ImageLuma16(buffer) => pick(buffer.as_raw(), 1, |p| [p[0].min(255) as u8; 3]),
        DynamicImage::ImageLumaA16(buffer) => pick(buffer.as_raw(), 2, |p| [(p[0] >> 8) as u8; 3]),
        other => {
            return Err(Error::ImageDecode {
                format: name.into(),
                message: format!(
                    "its pixels are {:?}, which bert-explain does not read",
                    other.color()
                ),
            })
        }
    };
    Ok(Picture { width, height, rgb })
}

fn high(p: &[u16]) -> [u8; 3] {
    [(p[0] >> 8) as u8, (p[1] >> 8) as u8, (p[2] >> 8) as u8]
}

fn pick<T>(samples: &[T], channels: usize, f: impl Fn(&[T]) -> [u8; 3]) -> Vec<u8> {
    samples.chunks_exact(channels).flat_map(f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::image::{ImageBuffer, Luma, LumaA, Rgb, Rgba};

    fn png(image: DynamicImage) -> Vec<u8> {
        let mut bytes = Cursor::new(Vec::new());
        image.write_to(&mut bytes, ImageFormat::Png).unwrap();
        bytes.into_inner()
    }

    #[test]
    fn converts_as_pillow_does() {
        let grey = ImageBuffer::from_raw(2, 1, vec![3u8, 250]).unwrap();
        let got = decode(&png(DynamicImage::ImageLuma8(grey))).unwrap();
        assert_eq!(got.rgb, [3, 3, 3, 250, 250, 250]);

        let rgba: ImageBuffer<Rgba<u8>, _> =
            ImageBuffer::from_raw(1, 1, vec![10u8, 20, 30, 0]).unwrap();
        let got = decode(&png(DynamicImage::ImageRgba8(rgba))).unwrap();
        assert_eq!(got.rgb, [10, 20, 30]);

        let la: ImageBuffer<LumaA<u8>, _> = ImageBuffer::from_raw(1, 1, vec![77u8, 9]).unwrap();
        assert_eq!(
            decode(&png(DynamicImage::ImageLumaA8(la))).unwrap().rgb,
            [77; 3]
        );

        let grey16: ImageBuffer<Luma<u16>, _> =
            ImageBuffer::from_raw(3, 1, vec![254u16, 256, 65535]).unwrap();
        let got = decode(&png(DynamicImage::ImageLuma16(grey16))).unwrap();
        assert_eq!(got.rgb, [254, 254, 254, 255, 255, 255, 255, 255, 255]);

        let rgb16: ImageBuffer<Rgb<u16>, _> =
            ImageBuffer::from_raw(1, 1, vec![0x12ffu16, 0x00ff, 0xfe01]).unwrap();
        let got = decode(&png(DynamicImage::ImageRgb16(rgb16))).unwrap();
        assert_eq!(got.rgb, [0x12, 0x00, 0xfe]);
    }

    #[test]
    fn refuses_what_is_not_an_image() {
        let err = decode(b"not an image at all").unwrap_err();
        assert!(matches!(err, Error::ImageFormat { .. }), "{err}");
        assert!(err.to_string().contains("6e 6f 74 20"), "{err}");
        assert!(err.is_usage());
        let err = decode(b"").unwrap_err();
        assert!(matches!(err, Error::ImageFormat { .. }), "{err}");
    }

    #[test]
    fn refuses_a_truncated_file() {
        let rgb = ImageBuffer::from_fn(64, 64, |x, y| Rgb([x as u8, y as u8, 7u8]));
        let bytes = png(DynamicImage::ImageRgb8(rgb));
        for cut in [9, 40, bytes.len() / 2, bytes.len() - 13] {
            let err = decode(&bytes[..cut]).unwrap_err();
            assert!(matches!(err, Error::ImageDecode { .. }), "{cut}: {err}");
            assert!(err.is_usage());
        }
    }

    #[test]
    fn refuses_huge_dimensions_from_the_header() {
        // A PNG claiming 30000 x 30000 pixels, with a few bytes of image data.
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut chunk = |kind: &[u8], data: &[u8]| {
            bytes.extend((data.len() as u32).to_be_bytes());
            let body = [kind, data].concat();
            bytes.extend(&body);
            bytes.extend(crc32(&body).to_be_bytes());
        };
        let ihdr = [30000u32.to_be_bytes(), 30000u32.to_be_bytes()].concat();
        chunk(b"IHDR", &[&ihdr[..], &[8, 2, 0, 0, 0]].concat());
        chunk(b"IDAT", &[0x78, 0x9c, 0x63, 0, 0, 0, 1, 0, 1]);
        chunk(b"IEND", b"");
        let err = decode(&bytes).unwrap_err();
        assert!(matches!(err, Error::ImageTooLarge { .. }), "{err}");
        assert!(err.to_string().contains("30000×30000"), "{err}");
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
