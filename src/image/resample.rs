//! Pillow's `Image.resize` for 8-bit RGB, bit for bit: separable convolution with Pillow's
//! filters (libImaging/Resample.c), and its nearest-neighbour scaling (libImaging/Geometry.c).
//!
//! The convolution runs per axis, horizontal then vertical (vertical first where the height
//! shrinks by more than twice what the width does, as Pillow 13 does), each pass rounding to
//! 8 bits. For
//! each output pixel the filter is centred on the input position `(i + 0.5) * scale`, its
//! support widened by the scale when shrinking (so every input pixel contributes), the weights
//! normalised to sum 1 in double precision and then turned into 22-bit fixed point; sums start
//! at one half and are shifted back and clipped to 0..=255. An axis whose size does not change
//! is not touched, and a picture whose size does not change is returned as it is, as Pillow does.

use super::{Picture, MAX_PIXELS};
use crate::error::{Error, Result};

/// Pillow's resampling filters, by their `PIL.Image.Resampling` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// 0
    Nearest,
    /// 1 (a 3-lobed Lanczos window)
    Lanczos,
    /// 2
    Bilinear,
    /// 3 (Keys' cubic with a = -0.5)
    Bicubic,
    /// 4
    Box,
    /// 5
    Hamming,
}

impl Filter {
    /// The filter of a `resample` code, as `PIL.Image.Resampling` numbers them.
    pub fn from_pil(code: i64) -> Option<Filter> {
        Some(match code {
            0 => Filter::Nearest,
            1 => Filter::Lanczos,
            2 => Filter::Bilinear,
            3 => Filter::Bicubic,
            4 => Filter::Box,
            5 => Filter::Hamming,
            _ => return None,
        })
    }

    /// The filter's half-width at scale 1. (Nearest never convolves: [`resize`] scales it
    /// apart, as Pillow does; it is given bilinear's numbers only to be total.)
    fn support(self) -> f64 {
        match self {
            Filter::Box => 0.5,
            Filter::Nearest | Filter::Bilinear | Filter::Hamming => 1.0,
            Filter::Bicubic => 2.0,
            Filter::Lanczos => 3.0,
        }
    }

    /// The filter's weight at distance `x`, in Pillow's double-precision arithmetic.
    fn weight(self, x: f64) -> f64 {
        match self {
            Filter::Box => {
                if x > -0.5 && x <= 0.5 {
                    1.0
                } else {
                    0.0
                }
            }
            Filter::Bilinear | Filter::Nearest => {
                let x = x.abs();
                if x < 1.0 {
                    1.0 - x
                } else {
                    0.0
                }
            }
            Filter::Hamming => {
                let x = x.abs();
                if x == 0.0 {
                    1.0
                } else if x >= 1.0 {
                    0.0
                } else {
                    let x = x * std::f64::consts::PI;
                    // Pillow writes the window's constants as C floats.
                    x.sin() / x * (0.54f32 as f64 + 0.46f32 as f64 * x.cos())
                }
            }
            Filter::Bicubic => {
                const A: f64 = -0.5;
                let x = x.abs();
                if x < 1.0 {
                    ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * A
                } else {
                    0.0
                }
            }
            Filter::Lanczos => {
                if (-3.0..3.0).contains(&x) {
                    sinc(x) * sinc(x / 3.0)
                } else {
                    0.0
                }
            }
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let x = x * std::f64::consts::PI;
    x.sin() / x
}

/// Fixed-point precision of the weights: 8 bits of result, 2 for overshoot, in 32 bits.
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// The weights of one axis: for output `i`, input pixels `first[i]..first[i] + count[i]`
/// with `weights[i * ksize..][..count[i]]`.
#[derive(Debug)]
struct Coefficients {
    ksize: usize,
    first: Vec<usize>,
    count: Vec<usize>,
    weights: Vec<i32>,
}

impl Coefficients {
    fn new(in_size: usize, out_size: usize, filter: Filter) -> Coefficients {
        // Pillow takes the source box as C floats; a whole box of at most 2^24 is exact.
        let scale = (in_size as f32) as f64 / out_size as f64;
        let filterscale = if scale < 1.0 { 1.0 } else { scale };
        let support = filter.support() * filterscale;
        let ksize = support.ceil() as usize * 2 + 1;
        let inverse = 1.0 / filterscale;
        let mut first = Vec::with_capacity(out_size);
        let mut count = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * ksize];
        let mut row = vec![0f64; ksize];
        for i in 0..out_size {
            let center = (i as f64 + 0.5) * scale;
            // C's (int) casts truncate towards zero, as `as` does.
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let n = xmax.saturating_sub(xmin).min(ksize);
            let mut total = 0.0;
            for (x, w) in row[..n].iter_mut().enumerate() {
                *w = filter.weight(((x + xmin) as f64 - center + 0.5) * inverse);
                total += *w;
            }
            if total != 0.0 {
                row[..n].iter_mut().for_each(|w| *w /= total);
            }
            for (k, &w) in weights[i * ksize..][..n].iter_mut().zip(&row[..n]) {
                let fixed = w * (1u32 << PRECISION_BITS) as f64;
                *k = if w < 0.0 { fixed - 0.5 } else { fixed + 0.5 } as i32;
            }
            first.push(xmin);
            count.push(n);
        }
        Coefficients {
            ksize,
            first,
            count,
            weights,
        }
    }

    /// Output `i`'s input range and weights.
    fn of(&self, i: usize) -> (usize, &[i32]) {
        (
            self.first[i],
            &self.weights[i * self.ksize..][..self.count[i]],
        )
    }
}

/// A weighted sum back in 8 bits: Pillow starts at one half, shifts and clips.
fn clip8(sum: i64) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

const HALF: i64 = 1 << (PRECISION_BITS - 1);

/// The horizontal pass: each of `rows` rows of `in_w` RGB pixels (`rgb`) resampled to
/// `weights`' output width.
fn resample_columns(rgb: &[u8], in_w: usize, rows: usize, weights: &Coefficients) -> Vec<u8> {
    let out_w = weights.count.len();
    let mut out = vec![0u8; rows * out_w * 3];
    for (y, line) in out.chunks_exact_mut(out_w * 3).enumerate() {
        let input = &rgb[y * in_w * 3..][..in_w * 3];
        for (x, pixel) in line.chunks_exact_mut(3).enumerate() {
            let (start, k) = weights.of(x);
            let mut sums = [HALF; 3];
            for (j, &w) in k.iter().enumerate() {
                let p = &input[(start + j) * 3..][..3];
                for c in 0..3 {
                    sums[c] += p[c] as i64 * w as i64;
                }
            }
            for c in 0..3 {
                pixel[c] = clip8(sums[c]);
            }
        }
    }
    out
}

/// The vertical pass: rows of `width` RGB pixels (`rgb`, whose first row is the source's row
/// `offset`) resampled to `weights`' output height.
fn resample_rows(rgb: &[u8], width: usize, weights: &Coefficients, offset: usize) -> Vec<u8> {
    let line = width * 3;
    let mut out = vec![0u8; weights.count.len() * line];
    for (y, row) in out.chunks_exact_mut(line).enumerate() {
        let (start, k) = weights.of(y);
        let start = start - offset;
        for (i, value) in row.iter_mut().enumerate() {
            let mut sum = HALF;
            for (j, &w) in k.iter().enumerate() {
                sum += rgb[(start + j) * line + i] as i64 * w as i64;
            }
            *value = clip8(sum);
        }
    }
    out
}

/// `picture` resized to `width` × `height` with `filter`, as Pillow's `Image.resize(size,
/// filter)` does for an RGB image (no box, no reducing gap).
pub fn resize(picture: &Picture, width: u32, height: u32, filter: Filter) -> Result<Picture> {
    let problem = if width == 0 || height == 0 {
        Some("has no pixels")
    } else if width as u64 * height as u64 > MAX_PIXELS {
        Some("is more pixels than bert-explain takes")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(Error::ImageResize {
            width: picture.width,
            height: picture.height,
            to_width: width,
            to_height: height,
            problem,
        });
    }
    if (width, height) == (picture.width, picture.height) {
        return Ok(picture.clone());
    }
    if filter == Filter::Nearest {
        return Ok(nearest(picture, width, height));
    }
    let (in_w, in_h) = (picture.width as usize, picture.height as usize);
    let (out_w, out_h) = (width as usize, height as usize);
    let horizontal = (out_w != in_w).then(|| Coefficients::new(in_w, out_w, filter));
    let vertical = (out_h != in_h).then(|| Coefficients::new(in_h, out_h, filter));
    // Pillow 13 runs the vertical pass first where the height shrinks by more than twice
    // what the width does (Resample.c, `horizontal_first`); the 8-bit rounding between the
    // passes makes the order show.
    let shrink = |from: usize, to: usize| from as i64 - to as i64;
    let vertical_first = shrink(in_h, out_h) > 0 && shrink(in_h, out_h) > 2 * shrink(in_w, out_w);
    let rgb = match (horizontal, vertical) {
        (Some(h), Some(v)) if vertical_first => {
            let rows = resample_rows(&picture.rgb, in_w, &v, 0);
            resample_columns(&rows, in_w, out_h, &h)
        }
        (Some(h), Some(v)) => {
            // Only the rows the vertical pass reads are resampled horizontally.
            let last = out_h - 1;
            let (first, end) = (v.first[0], v.first[last] + v.count[last]);
            let block = &picture.rgb[first * in_w * 3..end * in_w * 3];
            let columns = resample_columns(block, in_w, end - first, &h);
            resample_rows(&columns, out_w, &v, first)
        }
        (Some(h), None) => resample_columns(&picture.rgb, in_w, in_h, &h),
        (None, Some(v)) => resample_rows(&picture.rgb, in_w, &v, 0),
        (None, None) => picture.rgb.clone(),
    };
    Ok(Picture { width, height, rgb })
}

/// Pillow's nearest-neighbour scaling (an affine transform): the source position starts at
/// half a step and grows by one step per pixel, in double precision, and is truncated.
fn nearest(picture: &Picture, width: u32, height: u32) -> Picture {
    let (in_w, in_h) = (picture.width as usize, picture.height as usize);
    let positions = |in_size: usize, out_size: usize| -> Vec<Option<usize>> {
        let step = (in_size as f32) as f64 / out_size as f64;
        let mut at = step * 0.5;
        (0..out_size)
            .map(|_| {
                let index = (at >= 0.0 && (at as usize) < in_size).then_some(at as usize);
                at += step;
                index
            })
            .collect()
    };
    let columns = positions(in_w, width as usize);
    let rows = positions(in_h, height as usize);
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    for (row, source) in rgb.chunks_exact_mut(width as usize * 3).zip(&rows) {
        let Some(y) = source else { continue };
        let input = &picture.rgb[y * in_w * 3..][..in_w * 3];
        for (out, column) in row.chunks_exact_mut(3).zip(&columns) {
            if let Some(x) = column {
                out.copy_from_slice(&input[x * 3..][..3]);
            }
        }
    }
    Picture { width, height, rgb }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture(width: u32, height: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> Picture {
        let mut rgb = Vec::new();
        for y in 0..height {
            for x in 0..width {
                rgb.extend(f(x, y));
            }
        }
        Picture { width, height, rgb }
    }

    #[test]
    fn codes_are_pillows() {
        let codes: Vec<_> = (0..7).map(Filter::from_pil).collect();
        assert_eq!(
            codes,
            [
                Some(Filter::Nearest),
                Some(Filter::Lanczos),
                Some(Filter::Bilinear),
                Some(Filter::Bicubic),
                Some(Filter::Box),
                Some(Filter::Hamming),
                None
            ]
        );
    }

    #[test]
    fn weights_sum_to_one_in_fixed_point() {
        for filter in [
            Filter::Box,
            Filter::Bilinear,
            Filter::Hamming,
            Filter::Bicubic,
            Filter::Lanczos,
        ] {
            for (n, m) in [(10, 3), (3, 10), (512, 224), (7, 7)] {
                let c = Coefficients::new(n, m, filter);
                for i in 0..m {
                    let (start, k) = c.of(i);
                    assert!(start + k.len() <= n);
                    let total: i64 = k.iter().map(|&w| w as i64).sum();
                    assert!(
                        (total - (1 << 22)).abs() <= k.len() as i64,
                        "{filter:?} {n}->{m}"
                    );
                }
            }
        }
    }

    #[test]
    fn flat_pictures_stay_flat() {
        let flat = picture(13, 9, |_, _| [7, 128, 250]);
        for code in 0..6 {
            let filter = Filter::from_pil(code).unwrap();
            for (w, h) in [(5, 4), (30, 2), (13, 20), (1, 1)] {
                let out = resize(&flat, w, h, filter).unwrap();
                assert_eq!((out.width, out.height), (w, h));
                assert!(out.rgb.chunks(3).all(|p| p == [7, 128, 250]), "{filter:?}");
            }
        }
    }

    #[test]
    fn same_size_is_a_copy_and_empty_or_huge_is_refused() {
        let p = picture(4, 3, |x, y| [x as u8, y as u8, 9]);
        assert_eq!(resize(&p, 4, 3, Filter::Bicubic).unwrap(), p);
        let err = resize(&p, 0, 3, Filter::Bilinear).unwrap_err();
        assert!(
            err.to_string().contains("to 0×3, which has no pixels"),
            "{err}"
        );
        // A sliver resized by its short side would be enormous: refused before allocating.
        let err = resize(&p, 224, 7_340_032, Filter::Nearest).unwrap_err();
        assert!(err.to_string().contains("more pixels"), "{err}");
    }

    #[test]
    fn halving_with_box_averages_pairs() {
        // Box filter, 4 -> 2: each output is the mean of two inputs, rounded half up.
        let p = picture(4, 1, |x, _| [[10, 11, 200, 0][x as usize], 0, 255]);
        let out = resize(&p, 2, 1, Filter::Box).unwrap();
        assert_eq!(out.rgb, [11, 0, 255, 100, 0, 255]);
    }

    #[test]
    fn nearest_picks_the_pixel_under_each_centre() {
        let p = picture(5, 1, |x, _| [x as u8 * 10, 0, 0]);
        // 5 -> 2: centres at 1.25 and 3.75.
        let out = resize(&p, 2, 1, Filter::Nearest).unwrap();
        assert_eq!(out.rgb, [10, 0, 0, 30, 0, 0]);
        // 2 -> 5: centres at 0.2, 0.6, 1.0, 1.4, 1.8.
        let q = picture(2, 1, |x, _| [x as u8 + 1, 0, 0]);
        let out = resize(&q, 5, 1, Filter::Nearest).unwrap();
        assert_eq!(
            out.rgb.chunks(3).map(|p| p[0]).collect::<Vec<_>>(),
            [1, 1, 2, 2, 2]
        );
    }
}
