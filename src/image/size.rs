//! The size a processor resizes to, from its `size` field, computed as transformers' Pillow
//! backend does (`PilBackend.resize`, `get_resize_output_image_size`,
//! `get_size_with_aspect_ratio`), in Python's float arithmetic and truncations.

/// A processor's `size`: which of transformers' size dictionaries it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// `{"height", "width"}` (or a bare int with `default_to_square`): exactly that.
    Exact { height: u32, width: u32 },
    /// `{"shortest_edge"}` (or a bare int without `default_to_square`): the shorter side
    /// becomes this, the longer keeps the aspect ratio (truncated).
    ShortestEdge(u32),
    /// `{"shortest_edge", "longest_edge"}`: as above, unless the longer side would pass
    /// `longest`, then the longer side is held to it.
    ShortestLongest { shortest: u32, longest: u32 },
    /// `{"max_height", "max_width"}`: the largest size inside the box, aspect kept.
    MaxHeightWidth { max_height: u32, max_width: u32 },
}

impl Size {
    /// `(height, width)` of a `height` × `width` picture once resized.
    pub fn output(&self, height: u32, width: u32) -> (u32, u32) {
        match *self {
            Size::Exact { height, width } => (height, width),
            Size::ShortestEdge(size) => shortest_edge(height, width, size),
            Size::ShortestLongest { shortest, longest } => {
                with_aspect_ratio(height, width, shortest, longest)
            }
            Size::MaxHeightWidth {
                max_height,
                max_width,
            } => {
                let (h, w) = (height as f64, width as f64);
                let scale = f64::min(max_height as f64 / h, max_width as f64 / w);
                ((h * scale) as u32, (w * scale) as u32)
            }
        }
    }
}

/// `get_resize_output_image_size(size=int, default_to_square=False)`: `int(size * long /
/// short)` for the longer side.
fn shortest_edge(height: u32, width: u32, size: u32) -> (u32, u32) {
    let (short, long) = if width <= height {
        (width, height)
    } else {
        (height, width)
    };
    let new_long = (size as f64 * long as f64 / short as f64) as u32;
    if width <= height {
        (new_long, size)
    } else {
        (size, new_long)
    }
}

/// `get_size_with_aspect_ratio((height, width), size, max_size)`.
fn with_aspect_ratio(height: u32, width: u32, size: u32, max_size: u32) -> (u32, u32) {
    let (min_side, max_side) = (height.min(width) as f64, height.max(width) as f64);
    let mut size = size as f64;
    let mut raw = None;
    if max_side / min_side * size > max_size as f64 {
        let r = max_size as f64 * min_side / max_side;
        size = r.round_ties_even();
        raw = Some(r);
    }
    let size = size as u32;
    if (height <= width && height == size) || (width <= height && width == size) {
        return (height, width);
    }
    let (h, w) = (height as f64, width as f64);
    let base = raw.unwrap_or(size as f64);
    if width < height {
        ((base * h / w) as u32, size)
    } else {
        (size, (base * w / h) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_edge_keeps_the_aspect_truncating() {
        // chelsea.png is 451 x 300: 256 * 451 / 300 = 384.85...
        assert_eq!(Size::ShortestEdge(256).output(300, 451), (256, 384));
        assert_eq!(Size::ShortestEdge(256).output(451, 300), (384, 256));
        assert_eq!(Size::ShortestEdge(37).output(512, 512), (37, 37));
        assert_eq!(Size::ShortestEdge(300).output(300, 451), (300, 451));
    }

    #[test]
    fn longest_edge_caps_the_long_side() {
        let size = Size::ShortestLongest {
            shortest: 800,
            longest: 1000,
        };
        // 1000 * 300 / 451 = 665.19 -> 665; 665.19 * 451 / 300 = 1000.0
        assert_eq!(size.output(300, 451), (665, 1000));
        let loose = Size::ShortestLongest {
            shortest: 200,
            longest: 1000,
        };
        assert_eq!(loose.output(300, 451), (200, 300));
        assert_eq!(loose.output(451, 300), (300, 200));
    }

    #[test]
    fn max_box_fits_inside() {
        let size = Size::MaxHeightWidth {
            max_height: 100,
            max_width: 100,
        };
        assert_eq!(size.output(300, 451), (66, 100));
    }
}
