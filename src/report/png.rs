//! The figure as PNG: the SVG figure rasterised at twice its size by resvg, with the
//! DejaVu Sans font embedded in the binary so that the text looks the same everywhere.

use std::io::{self, Write};

use resvg::{tiny_skia, usvg};

use super::svg::figure_of;
use super::{Explained, Renderer};

/// DejaVu Sans 2.37 (Bitstream Vera licence, assets/fonts/LICENSE-DejaVu.txt).
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
/// Pixels per SVG unit: sharp on high-density screens and in print.
const SCALE: f32 = 2.0;

/// Prints the PNG figure.
pub struct Png;

impl Renderer for Png {
    fn render(&self, shown: &Explained, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(&rasterise(&figure_of(shown)?, SCALE)?)
    }
}

/// An SVG document as PNG bytes, `scale` pixels per unit, on white.
pub fn rasterise(svg: &str, scale: f32) -> io::Result<Vec<u8>> {
    let mut options = usvg::Options::default();
    options.fontdb_mut().load_font_data(FONT.to_vec());
    options.fontdb_mut().set_sans_serif_family("DejaVu Sans");
    options.font_family = "DejaVu Sans".to_string();
    let tree = usvg::Tree::from_str(svg, &options).map_err(io::Error::other)?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or_else(too_large)?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or_else(too_large)?;
    pixmap.fill(tiny_skia::Color::WHITE);
    let transform = tiny_skia::Transform::from_scale(scale, scale);
    resvg::render(&tree, transform, &mut pixmap.as_mut());
    pixmap.encode_png().map_err(io::Error::other)
}

fn too_large() -> io::Error {
    io::Error::other("the figure is too large to rasterise; write it as .svg instead")
}
