//! Image input against transformers' Pillow backend (scripts/reference/image_reference.py):
//! real photographs through ViT, DeiT, DINOv2 and odd processors, small files of every PNG mode,
//! GIF and WebP, EXIF orientations, and bad files.
//!
//! PNG cases are exact: the 8-bit view and pixel_values hash to the reference's bytes (every
//! pixel, every float bit: no ulp of difference), and the spot values are equal as f32. JPEG
//! cases are held to the bounds below, measured on these photographs: Pillow decodes with
//! libjpeg-turbo, we with zune-jpeg. Measured (`image_reference.py --measure`), decoded
//! photographs against Pillow's: rocket.jpg (4:4:4) max 2 levels, mean 0.008, 0.7% of values
//! differ; retina.jpg (4:2:0) max 4, mean 0.080, 5.8%; hubble_deep_field.jpg (4:4:4, Adobe)
//! max 3, mean 0.012, 1.1%. After ViT's, DeiT's and DINOv2's processors the views differ by at
//! most 2 levels (mean at most 0.088, retina) and pixel_values by at most 0.0349 (two levels
//! over ImageNet's std; mean at most 0.0015). `BERT_EXPLAIN_IMAGE_DUMP=DIR` writes our decoded photographs, views and
//! pixel_values there for `image_reference.py --measure DIR`.

mod common;

use std::path::{Path, PathBuf};

use bert_explain::image::{decode, read_keyed, read_picture, ImageProcessor, Picture, Pixels};
use bert_explain::Error;
use serde::Deserialize;

/// The largest difference of a JPEG case's 8-bit view from transformers', in levels
/// (measured: 2).
const JPEG_VIEW_MAX: u8 = 2;
/// The largest mean absolute difference of a JPEG case's view, in levels (measured: 0.088).
const JPEG_VIEW_MEAN: f64 = 0.1;
/// The largest difference of a JPEG case's pixel_values from transformers': two levels over
/// the smallest ImageNet std (measured: 0.03486, two levels over 0.225).
const JPEG_PIXELS_MAX: f32 = 2.0 / 255.0 / 0.224;
/// The largest difference of a small JPEG file (decode/*.jpg) from Pillow's pixels
/// (measured: 2).
const JPEG_DECODE_MAX: u8 = 2;

#[derive(Deserialize)]
struct Cases {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    photo: String,
    processor: String,
    height: u32,
    width: u32,
    view_sha256: String,
    pixels_sha256: String,
    spots: Vec<(usize, usize, usize, f64)>,
    view_png: Option<String>,
}

fn fixtures() -> PathBuf {
    common::repo().join("tests/fixtures/images")
}

fn processor(name: &str) -> ImageProcessor {
    let path = fixtures()
        .join("processors")
        .join(name)
        .join("preprocessor_config.json");
    ImageProcessor::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn pixel_bytes(pixels: &Pixels) -> Vec<u8> {
    pixels.values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn dump_dir() -> Option<PathBuf> {
    std::env::var_os("BERT_EXPLAIN_IMAGE_DUMP").map(PathBuf::from)
}

fn save_png(path: &Path, picture: &Picture) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::save_buffer(
        path,
        &picture.rgb,
        picture.width,
        picture.height,
        image::ExtendedColorType::Rgb8,
    )
    .unwrap();
}

/// Max and mean absolute difference of two pictures of one size.
fn differences(got: &Picture, want: &Picture) -> (u8, f64) {
    assert_eq!((got.width, got.height), (want.width, want.height));
    let diffs = got.rgb.iter().zip(&want.rgb).map(|(a, b)| a.abs_diff(*b));
    let (max, sum) = diffs.fold((0u8, 0u64), |(m, s), d| (m.max(d), s + d as u64));
    (max, sum as f64 / got.rgb.len() as f64)
}

#[test]
fn photographs_preprocess_as_transformers_does() {
    let photos = common::real_model("skimage-photos");
    let text = std::fs::read_to_string(fixtures().join("cases.json")).unwrap();
    let cases: Cases = serde_json::from_str(&text).unwrap();
    assert!(cases.cases.len() >= 40, "expected the whole case list");
    let dump = dump_dir();
    let mut pictures = std::collections::HashMap::new();
    let mut jpeg_cases = 0;
    for case in &cases.cases {
        let name = &case.name;
        let picture = pictures.entry(case.photo.clone()).or_insert_with(|| {
            let picture = read_picture(&photos.join(&case.photo)).unwrap();
            if let Some(dump) = &dump {
                save_png(
                    &dump.join("decoded").join(format!("{}.png", case.photo)),
                    &picture,
                );
            }
            picture
        });
        let processor = processor(&case.processor);
        let size = processor.output_size(picture.height, picture.width);
        assert_eq!(size, (case.height, case.width), "{name}: output size");
        let view = processor.view(picture).unwrap();
        let pixels = processor.process(picture).unwrap();
        assert_eq!(
            (view.height, view.width),
            (case.height, case.width),
            "{name}: view size"
        );
        assert_eq!(
            pixels.shape(),
            [3, case.height as usize, case.width as usize],
            "{name}"
        );
        assert_eq!(
            pixels,
            processor.pixels(&view),
            "{name}: process is view then pixels"
        );
        if let Some(dump) = &dump {
            save_png(&dump.join("views").join(format!("{name}.png")), &view);
            let path = dump.join("pixels").join(format!("{name}.f32"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, pixel_bytes(&pixels)).unwrap();
        }
        let Some(view_png) = &case.view_png else {
            assert_eq!(sha256(&view.rgb), case.view_sha256, "{name}: 8-bit view");
            assert_eq!(
                sha256(&pixel_bytes(&pixels)),
                case.pixels_sha256,
                "{name}: pixel_values"
            );
            check_spots(name, &pixels, &case.spots);
            continue;
        };
        // JPEG: transformers' view, normalised by us, is transformers' pixel_values exactly;
        // ours differ from both by the decoders' difference.
        jpeg_cases += 1;
        let reference = read_picture(&fixtures().join(view_png)).unwrap();
        assert_eq!(
            sha256(&reference.rgb),
            case.view_sha256,
            "{name}: stored view"
        );
        let want = processor.pixels(&reference);
        assert_eq!(
            sha256(&pixel_bytes(&want)),
            case.pixels_sha256,
            "{name}: pixel_values of transformers' view"
        );
        check_spots(name, &want, &case.spots);
        let (view_max, view_mean) = differences(&view, &reference);
        let pixels_max = pixels
            .values
            .iter()
            .zip(&want.values)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!(
            "{name}: view max {view_max} mean {view_mean:.4}, pixel_values max {pixels_max:.5}"
        );
        assert!(
            view_max <= JPEG_VIEW_MAX && view_mean <= JPEG_VIEW_MEAN,
            "{name}: view differs by up to {view_max} (mean {view_mean}) from transformers'"
        );
        assert!(
            pixels_max <= JPEG_PIXELS_MAX,
            "{name}: pixel_values differ by up to {pixels_max}"
        );
    }
    assert!(jpeg_cases >= 9, "expected the JPEG cases");
}

fn check_spots(name: &str, pixels: &Pixels, spots: &[(usize, usize, usize, f64)]) {
    for &(c, y, x, want) in spots {
        let got = pixels.values[(c * pixels.height + y) * pixels.width + x];
        assert_eq!(got, want as f32, "{name}: pixel_values[{c}, {y}, {x}]");
    }
}

#[derive(Deserialize)]
struct DecodeCases {
    cases: Vec<DecodeCase>,
}

#[derive(Deserialize)]
struct DecodeCase {
    file: String,
    mode: String,
    width: u32,
    height: u32,
    rgb: Vec<u8>,
    transparent: Option<[u8; 3]>,
    exact: bool,
    #[serde(default)]
    processed: std::collections::BTreeMap<String, Processed>,
}

#[derive(Deserialize)]
struct Processed {
    view_sha256: String,
    pixels_sha256: String,
}

/// PNG of every mode and depth (1 to 16 bits, grey, palette, alpha, colour keys), GIF (a
/// frame smaller than its screen, transparency, animation), WebP (lossless, lossy) and the EXIF
/// orientations: exactly Pillow's `load_image` pixels and kept transparent colour (JPEGs
/// within a bound); and through ViT's and DINOv2's processors (which paints the transparent
/// colour white), exactly transformers' view and pixel_values.
#[test]
fn small_files_decode_as_pillow_does() {
    let folder = fixtures().join("decode");
    let text = std::fs::read_to_string(folder.join("decode.json")).unwrap();
    let cases: DecodeCases = serde_json::from_str(&text).unwrap();
    assert!(cases.cases.len() >= 20);
    for case in &cases.cases {
        let what = format!("{} (Pillow mode {})", case.file, case.mode);
        let decoded =
            read_keyed(&folder.join(&case.file)).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            decoded.transparent, case.transparent,
            "{what}: transparent colour"
        );
        let got = &decoded.picture;
        assert_eq!(
            got,
            &read_picture(&folder.join(&case.file)).unwrap(),
            "{what}"
        );
        assert_eq!((got.width, got.height), (case.width, case.height), "{what}");
        let want = Picture {
            width: case.width,
            height: case.height,
            rgb: case.rgb.clone(),
        };
        if case.exact {
            assert_eq!(got.rgb, want.rgb, "{what}");
        } else {
            let (max, mean) = differences(got, &want);
            eprintln!("{what}: max {max} mean {mean:.4} from Pillow's");
            assert!(max <= JPEG_DECODE_MAX, "{what}: differs by {max}");
        }
        for (name, want) in &case.processed {
            let processor = processor(name);
            let picture = processor.prepare(decoded.clone());
            let view = processor.view(&picture).unwrap();
            let pixels = processor.pixels(&view);
            assert_eq!(
                sha256(&view.rgb),
                want.view_sha256,
                "{what} through {name}: view"
            );
            assert_eq!(
                sha256(&pixel_bytes(&pixels)),
                want.pixels_sha256,
                "{what} through {name}: pixel_values"
            );
        }
    }
}

#[test]
fn bad_files_are_refused_with_what_to_do() {
    let photos = common::real_model("skimage-photos");
    let dir = tempfile::tempdir().unwrap();
    let expect = |path: &Path, says: &str| {
        let err = read_picture(path).unwrap_err();
        let text = err.to_string();
        assert!(err.is_usage(), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(says), "{says:?} not in: {text}");
    };
    // Cut anywhere, even just before a JPEG's end marker: Pillow refuses such a file too
    // ("image file is truncated"), where zune-jpeg alone would fill the rest with grey.
    for photo in ["coffee.png", "rocket.jpg", "retina.jpg"] {
        let bytes = std::fs::read(photos.join(photo)).unwrap();
        for keep in [100, bytes.len() / 3, bytes.len() - 20, bytes.len() - 1] {
            if photo.ends_with(".png") && keep == bytes.len() - 1 {
                continue; // a PNG's image data ends before its last chunk
            }
            let path = dir.path().join(format!("cut-{keep}-{photo}"));
            std::fs::write(&path, &bytes[..keep]).unwrap();
            expect(&path, "truncated or corrupt");
        }
    }
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a picture").unwrap();
    expect(&text, "not a PNG, JPEG, WebP or GIF");
    let missing = dir.path().join("missing.png");
    expect(&missing, "cannot read the image");
    expect(dir.path(), "not a regular file");

    // Real small files whose headers are made to claim more pixels than we take: refused
    // from the header, before any pixel is decoded.
    let read = |name: &str| std::fs::read(fixtures().join("decode").join(name)).unwrap();
    let mut jpeg = read("orientation-3.jpg");
    let sof = jpeg.windows(2).position(|w| w == [0xff, 0xc0]).unwrap();
    jpeg[sof + 5..sof + 9].copy_from_slice(&[0x4e, 0x20, 0x4e, 0x20]); // 20000 x 20000
    let mut gif = read("palette.gif");
    gif[6..10].copy_from_slice(&[0x20, 0x4e, 0x20, 0x4e]);
    let descriptor = gif.iter().skip(13).position(|&b| b == 0x2c).unwrap() + 13;
    gif[descriptor + 5..descriptor + 9].copy_from_slice(&[0x20, 0x4e, 0x20, 0x4e]);
    let mut webp = read("lossless.webp");
    assert_eq!(&webp[12..16], b"VP8L");
    // 16383 x 16383 (image-webp reads 16384, the most VP8L holds, as 0).
    webp[21..25].copy_from_slice(&[0xfe, 0xbf, 0xff, 0x0f]);
    for (name, bytes, size) in [
        ("jpeg", jpeg, "20000×20000"),
        ("gif", gif, "20000×20000"),
        ("webp", webp, "16383×16383"),
    ] {
        let err = decode(&bytes).unwrap_err();
        assert!(matches!(err, Error::ImageTooLarge { .. }), "{name}: {err}");
        assert!(err.is_usage(), "{name}: {err}");
        assert!(err.to_string().contains(size), "{name}: {err}");
    }
}

/// SHA-256 (FIPS 180-4), to compare bytes with the hashes Python wrote.
fn sha256(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend((data.len() as u64 * 8).to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes(word.try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

#[test]
fn sha256_is_sha256() {
    assert_eq!(
        sha256(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256(&[0u8; 100]),
        "cd00e292c5970d3c5e2f0ffa5171e555bc46bfc4faddfb4a418b6840b86e79a3"
    );
}
