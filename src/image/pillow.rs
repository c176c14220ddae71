//! What Pillow sees in a file that the `image` crate's decoders do not tell: the colour a
//! PNG's tRNS chunk or a GIF's transparency marks, the colour Pillow paints a GIF's screen
//! with outside its first frame, and whether a JPEG runs to its end. Read from the file's own
//! markers and headers, each read bounded by the bytes at hand.

/// The colour Pillow keeps as `info["transparency"]` after `convert("RGB")`: an 8-bit grey or
/// RGB PNG's tRNS colour key, the palette colour of a PNG's single fully transparent entry
/// (Pillow drops a tRNS with partial alphas), or a GIF's transparent index's colour.
pub fn transparent_colour(bytes: &[u8]) -> Option<[u8; 3]> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png_key(bytes)
    } else {
        gif_first_frame(bytes).and_then(|frame| frame.transparent)
    }
}

/// Whether a JPEG's segments run on to its end-of-image marker. libjpeg, under Pillow, refuses
/// a file that ends before it ("image file is truncated"), where zune-jpeg fills the rest
/// with grey. Bytes between segments are skipped, as libjpeg skips them (with a warning).
pub fn jpeg_is_complete(bytes: &[u8]) -> bool {
    let length = |at: usize| -> Option<usize> {
        Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?) as usize)
    };
    let mut at = 2;
    while at < bytes.len() {
        if bytes[at] != 0xff {
            at += 1;
            continue;
        }
        let Some(&marker) = bytes.get(at + 1) else {
            return false;
        };
        match marker {
            0xd9 => return true,
            // A fill byte, then markers without a length: TEM, RSTn.
            0xff => at += 1,
            0x00 | 0x01 | 0xd0..=0xd7 => at += 2,
            _ => {
                let Some(size) = length(at + 2) else {
                    return false;
                };
                at += 2 + size;
                if marker == 0xda {
                    // Entropy-coded data: a 0xff in it is followed by 0 or a restart marker.
                    let in_data = |at: usize| {
                        bytes[at] != 0xff || matches!(bytes[at + 1], 0x00 | 0xd0..=0xd7)
                    };
                    while at + 1 < bytes.len() && in_data(at) {
                        at += 1;
                    }
                }
            }
        }
    }
    false
}

/// A PNG's colour key, from IHDR, PLTE and tRNS (which come before the image data).
fn png_key(bytes: &[u8]) -> Option<[u8; 3]> {
    let mut at = 8;
    let (mut colour_type, mut depth, mut palette) = (None, 0u8, None);
    while at + 8 <= bytes.len() {
        let length = u32::from_be_bytes(bytes[at..at + 4].try_into().ok()?) as usize;
        let kind = &bytes[at + 4..at + 8];
        let data = bytes.get(at + 8..(at + 8).checked_add(length)?)?;
        match kind {
            b"IHDR" if data.len() >= 10 => {
                depth = data[8];
                colour_type = Some(data[9]);
            }
            b"PLTE" => palette = Some(data),
            b"tRNS" => {
                let sample = |i: usize| -> Option<u8> {
                    let v = u16::from_be_bytes(data.get(i..i + 2)?.try_into().ok()?);
                    u8::try_from(v).ok()
                };
                return match (colour_type?, depth) {
                    (0, 8) => Some([sample(0)?; 3]),
                    (2, 8) => Some([sample(0)?, sample(2)?, sample(4)?]),
                    (3, _) => {
                        // Pillow's "simple" tRNS: opaque entries around one transparent one.
                        let zero = data.iter().position(|&a| a == 0)?;
                        let simple = data.iter().enumerate().all(|(i, &a)| a == 255 || i == zero);
                        let entry = palette?.get(zero * 3..zero * 3 + 3)?;
                        simple.then(|| [entry[0], entry[1], entry[2]])
                    }
                    _ => None,
                };
            }
            b"IDAT" | b"IEND" => return None,
            _ => {}
        }
        at += 12 + length;
    }
    None
}

/// A GIF's first frame as Pillow places it on the logical screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GifFrame {
    /// Left, top, width, height of the frame on the screen.
    pub rect: [u32; 4],
    /// The colour of the screen outside the frame: the transparent index's, else index 0's.
    pub fill: [u8; 3],
    /// The transparent index's colour, if the frame has one.
    pub transparent: Option<[u8; 3]>,
}

/// The first frame of a GIF: its graphic control extension's transparency and its palette
/// (local, else global). `None` where the headers cannot be read.
pub fn gif_first_frame(bytes: &[u8]) -> Option<GifFrame> {
    if !(bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a")) {
        return None;
    }
    let u16_at = |i: usize| -> Option<u32> {
        Some(u16::from_le_bytes(bytes.get(i..i + 2)?.try_into().ok()?) as u32)
    };
    let table_size = |packed: u8| 3 * (2usize << (packed & 7));
    let packed = *bytes.get(10)?;
    let mut at = 13;
    let mut palette = None;
    if packed & 0x80 != 0 {
        palette = Some(bytes.get(at..at + table_size(packed))?);
        at += table_size(packed);
    }
    let mut index = None;
    loop {
        match *bytes.get(at)? {
            0x21 => {
                let label = *bytes.get(at + 1)?;
                at += 2;
                if label == 0xf9 && *bytes.get(at)? >= 4 && bytes.get(at + 1)? & 1 != 0 {
                    index = Some(*bytes.get(at + 4)? as usize);
                }
                // Sub-blocks, each led by its length, up to an empty one.
                loop {
                    let size = *bytes.get(at)? as usize;
                    at += 1 + size;
                    if size == 0 {
                        break;
                    }
                }
            }
            0x2c => {
                let rect = [
                    u16_at(at + 1)?,
                    u16_at(at + 3)?,
                    u16_at(at + 5)?,
                    u16_at(at + 7)?,
                ];
                let local = *bytes.get(at + 9)?;
                if local & 0x80 != 0 {
                    palette = Some(bytes.get(at + 10..at + 10 + table_size(local))?);
                }
                let colour = |i: usize| {
                    palette
                        .and_then(|p| p.get(i * 3..i * 3 + 3))
                        .map_or([0; 3], |c| [c[0], c[1], c[2]])
                };
                return Some(GifFrame {
                    rect,
                    fill: colour(index.unwrap_or(0)),
                    transparent: index.map(colour),
                });
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(kind: &[u8], data: &[u8]) -> Vec<u8> {
        // The CRC is not read here.
        [&(data.len() as u32).to_be_bytes()[..], kind, data, &[0; 4]].concat()
    }

    fn png(colour_type: u8, depth: u8, chunks: &[Vec<u8>]) -> Vec<u8> {
        let mut ihdr = [0u8; 13];
        ihdr[8] = depth;
        ihdr[9] = colour_type;
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend(chunk(b"IHDR", &ihdr));
        chunks.iter().for_each(|c| bytes.extend(c));
        bytes.extend(chunk(b"IDAT", &[]));
        bytes
    }

    #[test]
    fn png_colour_keys_as_pillow_keeps_them() {
        let trns = |data: &[u8]| chunk(b"tRNS", data);
        assert_eq!(
            transparent_colour(&png(2, 8, &[trns(&[0, 200, 0, 100, 0, 50])])),
            Some([200, 100, 50])
        );
        assert_eq!(
            transparent_colour(&png(0, 8, &[trns(&[0, 7])])),
            Some([7; 3])
        );
        assert_eq!(transparent_colour(&png(0, 16, &[trns(&[1, 7])])), None);
        let plte = chunk(b"PLTE", &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let one = png(3, 8, &[plte.clone(), trns(&[255, 0])]);
        assert_eq!(transparent_colour(&one), Some([4, 5, 6]));
        // Partial alphas: Pillow drops the transparency on convert("RGB").
        let partial = png(3, 8, &[plte.clone(), trns(&[255, 0, 128])]);
        assert_eq!(transparent_colour(&partial), None);
        assert_eq!(transparent_colour(&png(3, 8, &[plte])), None);
        assert_eq!(transparent_colour(b"\x89PNG\r\n\x1a\n\0\0"), None);
    }

    #[test]
    fn a_jpeg_is_complete_at_its_end_marker() {
        let sos = [0xff, 0xda, 0, 4, 1, 2];
        let data = [0x12, 0xff, 0x00, 0x34, 0xff, 0xd0, 0x56, 0xff, 0xff];
        let whole = [
            &[0xff, 0xd8, 0xff, 0xe1, 0, 4, 0xff, 0xd9][..],
            &sos,
            &data,
            &[0xd9, 7, 7],
        ]
        .concat();
        assert!(jpeg_is_complete(&whole));
        for cut in 0..whole.len() - 2 {
            assert!(!jpeg_is_complete(&whole[..cut]), "{cut}");
        }
    }

    #[test]
    fn gif_first_frame_and_its_transparency() {
        let mut gif = b"GIF89a\x07\x00\x05\x00\x81\x00\x00".to_vec();
        gif.extend([10, 20, 30, 200, 100, 50, 0, 255, 0, 1, 2, 3]);
        gif.extend([0x21, 0xf9, 4, 1, 0, 0, 2, 0]);
        gif.extend([0x2c, 2, 0, 1, 0, 3, 0, 2, 0, 0]);
        let frame = gif_first_frame(&gif).unwrap();
        assert_eq!(frame.rect, [2, 1, 3, 2]);
        assert_eq!(
            (frame.fill, frame.transparent),
            ([0, 255, 0], Some([0, 255, 0]))
        );
        assert_eq!(transparent_colour(&gif), Some([0, 255, 0]));
        // Without a graphic control extension: index 0 fills, nothing is transparent.
        let plain = [&gif[..25], &gif[33..]].concat();
        let frame = gif_first_frame(&plain).unwrap();
        assert_eq!((frame.fill, frame.transparent), ([10, 20, 30], None));
        assert_eq!(gif_first_frame(&gif[..30]), None);
    }
}
