//! Position embeddings on a grid of patches other than the one they were trained for:
//! torch's bicubic interpolation (`F.interpolate(mode="bicubic", align_corners=False)`),
//! which DINOv2 runs (the real checkpoints learn 37 × 37 positions and see 16 × 16 patches
//! at 224 pixels), with or without `antialias` as transformers' two DINOv2 files ask.

/// How a family's position embeddings meet another grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resize {
    /// They must match (ViT, DeiT: transformers refuses another size unless told to
    /// interpolate).
    Refuse,
    /// torch's bicubic convolution (a = −0.75, four taps, edges repeated), as `dinov2` does.
    Bicubic,
    /// torch's antialiased bicubic (a = −0.5, the support widened when shrinking, weights
    /// normalised, as Pillow does), as `dinov2_with_registers` does.
    BicubicAntialiased,
}

/// Interpolates a `[rows][cols]` grid of `width`-long vectors (row-major, `values.len() ==
/// rows · cols · width`) to `to = (rows, cols)`, separably, in f64.
pub fn interpolate(
    values: &[f32],
    from: (usize, usize),
    to: (usize, usize),
    width: usize,
    resize: Resize,
) -> Vec<f32> {
    let taps_y = taps(from.0, to.0, resize);
    let taps_x = taps(from.1, to.1, resize);
    let mut out = vec![0f32; to.0 * to.1 * width];
    let mut sum = vec![0f64; width];
    for (y, row_taps) in taps_y.iter().enumerate() {
        for (x, col_taps) in taps_x.iter().enumerate() {
            sum.fill(0.0);
            for &(i, wy) in row_taps {
                for &(j, wx) in col_taps {
                    let at = (i * from.1 + j) * width;
                    let w = wy * wx;
                    for (s, v) in sum.iter_mut().zip(&values[at..at + width]) {
                        *s += w * f64::from(*v);
                    }
                }
            }
            let at = (y * to.1 + x) * width;
            for (o, s) in out[at..at + width].iter_mut().zip(&sum) {
                *o = *s as f32;
            }
        }
    }
    out
}

/// For each output index along one axis: the input indices it reads and their weights.
fn taps(input: usize, output: usize, resize: Resize) -> Vec<Vec<(usize, f64)>> {
    let scale = input as f64 / output as f64;
    (0..output)
        .map(|i| match resize {
            Resize::BicubicAntialiased => antialiased(input, scale, i),
            _ => plain(input, scale, i),
        })
        .collect()
}

/// torch's `upsample_bicubic2d`: the source coordinate `scale · (i + ½) − ½`, its four
/// neighbours (clamped to the edges) weighed by Keys' cubic with a = −0.75. The scale, the
/// coordinate and the weights in f32, as torch computes them for f32 input: in f64 they
/// move a value by up to 2e-6 of the largest when shrinking 37 to 6.
fn plain(input: usize, scale: f64, i: usize) -> Vec<(usize, f64)> {
    const A: f32 = -0.75;
    let near = |x: f32| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f32| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    let source = scale as f32 * (i as f32 + 0.5) - 0.5;
    let floor = source.floor();
    let t = source - floor;
    let weights = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)].map(f64::from);
    let last = input as i64 - 1;
    (0..4)
        .map(|k| {
            let index = (floor as i64 - 1 + k as i64).clamp(0, last) as usize;
            (index, weights[k])
        })
        .collect()
}

/// torch's `_upsample_bicubic2d_aa`: every input within the support around the centre
/// `scale · (i + ½)`, the support and the kernel stretched by the scale when shrinking,
/// weighed by Keys' cubic with a = −0.5, then normalised to sum to 1.
fn antialiased(input: usize, scale: f64, i: usize) -> Vec<(usize, f64)> {
    const A: f64 = -0.5;
    let stretch = scale.max(1.0);
    let support = 2.0 * stretch;
    let centre = scale * (i as f64 + 0.5);
    // torch truncates towards zero (`static_cast<int64_t>`).
    let first = ((centre - support + 0.5) as i64).max(0) as usize;
    let end = ((centre + support + 0.5) as i64).min(input as i64).max(0) as usize;
    let weights: Vec<(usize, f64)> = (first..end)
        .map(|j| {
            let x = ((j as f64 - centre + 0.5) / stretch).abs();
            let w = match x {
                x if x < 1.0 => near(x, A),
                x if x < 2.0 => far(x, A),
                _ => 0.0,
            };
            (j, w)
        })
        .collect();
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    match total {
        0.0 => weights,
        total => weights.into_iter().map(|(j, w)| (j, w / total)).collect(),
    }
}

/// Keys' cubic for |x| ≤ 1.
fn near(x: f64, a: f64) -> f64 {
    ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
}

/// Keys' cubic for 1 < |x| < 2.
fn far(x: f64, a: f64) -> f64 {
    ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_grid_comes_back_unchanged() {
        let values: Vec<f32> = (0..3 * 4 * 2).map(|v| v as f32 * 0.37 - 2.0).collect();
        for resize in [Resize::Bicubic, Resize::BicubicAntialiased] {
            let same = interpolate(&values, (3, 4), (3, 4), 2, resize);
            for (a, b) in same.iter().zip(&values) {
                assert!((a - b).abs() < 1e-6, "{resize:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn weights_sum_to_one() {
        for resize in [Resize::Bicubic, Resize::BicubicAntialiased] {
            for (input, output) in [(37, 16), (8, 4), (4, 9), (5, 5)] {
                for each in taps(input, output, resize) {
                    let total: f64 = each.iter().map(|(_, w)| w).sum();
                    // Plain bicubic's weights are f32's.
                    assert!((total - 1.0).abs() < 1e-6, "{resize:?} {input}→{output}");
                }
            }
        }
    }

    /// torch's own answers (scripts/reference/make_position_fixtures.py), growing and
    /// shrinking, square and not, with and without antialiasing, within 1e-6 of the grid's
    /// largest value: torch sums in float32 (summing in f32 here came no closer).
    #[test]
    fn agrees_with_torch() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/position-interpolation.json"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let floats = |v: &serde_json::Value| -> Vec<f32> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        };
        let size = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap() as usize;
        let cases = json["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 30);
        for case in cases {
            let grid = &json["grids"][size(case, "grid")];
            let to = (
                case["to"][0].as_u64().unwrap() as usize,
                case["to"][1].as_u64().unwrap() as usize,
            );
            let resize = match case["antialias"].as_bool().unwrap() {
                true => Resize::BicubicAntialiased,
                false => Resize::Bicubic,
            };
            let from = (size(grid, "rows"), size(grid, "cols"));
            let values = floats(&grid["values"]);
            let largest = values.iter().fold(1f32, |m, v| m.max(v.abs()));
            let got = interpolate(&values, from, to, size(grid, "width"), resize);
            let want = floats(&case["expected"]);
            assert_eq!(got.len(), want.len());
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            let bound = 1e-6 * largest;
            assert!(
                worst <= bound,
                "{from:?} → {to:?} {resize:?}: {worst} > {bound}"
            );
        }
    }
}
