//! The picture an image report explains, as figures and pages embed it: a PNG in a
//! `data:` URI (nothing read from the image reaches the SVG or HTML but its pixels).

use std::io;

use resvg::tiny_skia;

use crate::image::Picture;
use crate::input::base64_encode;

/// `picture` as `data:image/png;base64,...`.
pub fn data_uri(picture: &Picture) -> io::Result<String> {
    Ok(format!(
        "data:image/png;base64,{}",
        base64_encode(&png(picture)?)
    ))
}

/// `picture` encoded as a PNG.
pub fn png(picture: &Picture) -> io::Result<Vec<u8>> {
    let bad = || io::Error::other("the picture's size does not match its pixels");
    let pixels = picture.width as usize * picture.height as usize;
    if picture.rgb.len() != 3 * pixels {
        return Err(bad());
    }
    let rgba: Vec<u8> = (picture.rgb.chunks_exact(3))
        .flat_map(|p| [p[0], p[1], p[2], 255])
        .collect();
    let size = tiny_skia::IntSize::from_wh(picture.width, picture.height).ok_or_else(bad)?;
    let pixmap = tiny_skia::Pixmap::from_vec(rgba, size).ok_or_else(bad)?;
    pixmap.encode_png().map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_becomes_a_png_uri() {
        let picture = Picture {
            width: 2,
            height: 1,
            rgb: vec![255, 0, 0, 0, 0, 255],
        };
        let uri = data_uri(&picture).unwrap();
        assert!(
            uri.starts_with("data:image/png;base64,iVBORw0KGgo"),
            "{uri}"
        );
        let short = Picture {
            rgb: vec![0; 5],
            ..picture
        };
        assert!(data_uri(&short).is_err());
    }
}
