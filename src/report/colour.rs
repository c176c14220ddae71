//! The one colour scale of every picture: relevance 0 … max as a light-to-dark sequential
//! ramp (ColorBrewer's YlGnBu), shared by the figure, the HTML report and the terminal.

use super::View;

/// Anchors of the ramp, evenly spaced from 0 to 1.
pub const RAMP: [[u8; 3]; 9] = [
    [0xff, 0xff, 0xd9],
    [0xed, 0xf8, 0xb1],
    [0xc7, 0xe9, 0xb4],
    [0x7f, 0xcd, 0xbb],
    [0x41, 0xb6, 0xc4],
    [0x1d, 0x91, 0xc0],
    [0x22, 0x5e, 0xa8],
    [0x25, 0x34, 0x94],
    [0x08, 0x1d, 0x58],
];

/// The colour of `t` in [0, 1] (clamped; NaN is 0), interpolated linearly in sRGB.
pub fn ramp(t: f64) -> [u8; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (RAMP.len() - 1) as f64;
    let i = (x.floor() as usize).min(RAMP.len() - 2);
    let f = x - i as f64;
    let (a, b) = (RAMP[i], RAMP[i + 1]);
    std::array::from_fn(|c| (a[c] as f64 + (b[c] as f64 - a[c] as f64) * f).round() as u8)
}

/// The ends of [`diverging`]: at 1 and at −1 (the pages colour with them too).
pub const DIVERGING: [[u8; 3]; 2] = [[0xb2, 0x18, 0x2b], [0x21, 0x66, 0xac]];

/// The colour of a signed score `t` in [−1, 1] (clamped; NaN is 0): white at 0, red as it
/// rises to 1, blue as it falls to −1 (ColorBrewer's RdBu ends), linear in sRGB. Importance
/// scores, which may lower the prediction as well as raise it, take this scale.
pub fn diverging(t: f64) -> [u8; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(-1.0, 1.0) };
    let end = DIVERGING[usize::from(t < 0.0)];
    std::array::from_fn(|c| (255.0 + (end[c] as f64 - 255.0) * t.abs()).round() as u8)
}

/// `#rrggbb`.
pub fn hex([r, g, b]: [u8; 3]) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Whether text on this background should be white rather than black.
pub fn is_dark([r, g, b]: [u8; 3]) -> bool {
    let luminance = 0.2126 * r as f64 + 0.7152 * g as f64 + 0.0722 * b as f64;
    luminance < 140.0
}

/// The top of the shared scale: the largest relevance of any method and layer, or 1 when
/// there is none (an empty or all-zero report).
pub fn scale_max(view: &View) -> f64 {
    let r = &view.report.relevance;
    let max = r
        .named()
        .flat_map(|(_, rows)| rows.iter().flatten())
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    if max > 0.0 {
        max
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_ends_and_middle() {
        assert_eq!(ramp(0.0), RAMP[0]);
        assert_eq!(ramp(1.0), RAMP[8]);
        assert_eq!(ramp(0.5), RAMP[4]);
        assert_eq!(ramp(f64::NAN), RAMP[0]);
        assert_eq!(ramp(2.0), RAMP[8]);
        assert_eq!(hex([255, 0, 16]), "#ff0010");
        assert!(is_dark(RAMP[8]) && !is_dark(RAMP[0]));
    }
}
