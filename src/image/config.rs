//! preprocessor_config.json's fields, read as transformers reads them: `get_size_dict` for
//! sizes, and the class attributes of `ViTImageProcessorPil`, `DeiTImageProcessorPil`,
//! `BitImageProcessorPil` and `CLIPImageProcessorPil` where a field is missing or null (other
//! types take the base class's, where every step is off).

use serde_json::{Map, Value};

use super::processor::ImageProcessor;
use super::resample::Filter;
use super::size::Size;
use super::{MAX_PIXELS, MAX_SIDE};

const IMAGENET_STANDARD: [f64; 3] = [0.5, 0.5, 0.5];
const OPENAI_CLIP_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
const OPENAI_CLIP_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];

/// A processor class's defaults for the fields a config leaves out.
struct Defaults {
    resize: bool,
    size: Option<Value>,
    default_to_square: bool,
    resample: Option<i64>,
    center_crop: bool,
    crop_size: Option<Value>,
    rescale: bool,
    normalize: bool,
    mean: Option<[f64; 3]>,
    std: Option<[f64; 3]>,
    convert_rgb: bool,
}

impl Defaults {
    /// The class attributes of transformers' `<base>ImageProcessorPil`.
    fn of(base: &str) -> Defaults {
        let square = |n: u32| Some(serde_json::json!({"height": n, "width": n}));
        let off = Defaults {
            resize: false,
            size: None,
            default_to_square: true,
            resample: None,
            center_crop: false,
            crop_size: None,
            rescale: false,
            normalize: false,
            mean: None,
            std: None,
            convert_rgb: false,
        };
        match base {
            "ViTImageProcessor" => Defaults {
                resize: true,
                size: square(224),
                resample: Some(2),
                rescale: true,
                normalize: true,
                mean: Some(IMAGENET_STANDARD),
                std: Some(IMAGENET_STANDARD),
                ..off
            },
            "DeiTImageProcessor" => Defaults {
                resize: true,
                size: square(256),
                resample: Some(3),
                center_crop: true,
                crop_size: square(224),
                rescale: true,
                normalize: true,
                mean: Some(IMAGENET_STANDARD),
                std: Some(IMAGENET_STANDARD),
                ..off
            },
            "BitImageProcessor" | "CLIPImageProcessor" => Defaults {
                resize: true,
                size: Some(serde_json::json!({"shortest_edge": 224})),
                default_to_square: false,
                resample: Some(3),
                center_crop: true,
                crop_size: square(224),
                rescale: true,
                normalize: true,
                mean: Some(OPENAI_CLIP_MEAN),
                std: Some(OPENAI_CLIP_STD),
                convert_rgb: true,
            },
            _ => off,
        }
    }
}

impl ImageProcessor {
    /// A processor from a parsed preprocessor_config.json; `model_type` is asked for only when
    /// the config names no type. The error is what was wrong with the config.
    pub fn from_value(
        value: &Value,
        model_type: impl FnOnce() -> Option<String>,
    ) -> Result<Self, String> {
        let config = value
            .as_object()
            .ok_or("it is not a JSON object of processor settings")?;
        let kind = kind(config, model_type);
        let base = kind
            .strip_suffix("Fast")
            .or_else(|| kind.strip_suffix("Pil"))
            .unwrap_or(&kind);
        let defaults = Defaults::of(base);
        let field = |name: &str| config.get(name).filter(|v| !v.is_null());
        let flag = |name: &str, default: bool| -> Result<bool, String> {
            field(name).map_or(Ok(default), |v| {
                v.as_bool()
                    .ok_or_else(|| format!("{name} is {v}, not true or false"))
            })
        };
        for (name, meaning) in [
            ("do_pad", "padding"),
            ("crop_pct", "crop_pct's crop"),
            ("size_divisor", "size_divisor's rounding"),
        ] {
            if field(name).is_some_and(|v| v != &Value::Bool(false)) {
                return Err(format!(
                    "it asks for {meaning} ({name}), which bert-explain does not do (it reads ViT, DeiT and BiT/DINOv2 processors)"
                ));
            }
        }
        let default_to_square = flag("default_to_square", defaults.default_to_square)?;
        let resize = if flag("do_resize", defaults.resize)? {
            let size = field("size")
                .or(defaults.size.as_ref())
                .ok_or("do_resize is true but there is no size")?;
            let size = parse_size(size, default_to_square, "size")?;
            let code = match field("resample") {
                Some(v) => v
                    .as_i64()
                    .ok_or_else(|| format!("resample is {v}, not a PIL filter number"))?,
                None => defaults.resample.unwrap_or(2),
            };
            let filter = Filter::from_pil(code).ok_or_else(|| {
                format!("resample is {code}, not one of Pillow's filters 0 to 5 (nearest, lanczos, bilinear, bicubic, box, hamming)")
            })?;
            Some((size, filter))
        } else {
            None
        };
        let crop = if flag("do_center_crop", defaults.center_crop)? {
            let size = field("crop_size")
                .or(defaults.crop_size.as_ref())
                .ok_or("do_center_crop is true but there is no crop_size")?;
            match parse_size(size, true, "crop_size")? {
                Size::Exact { height, width } if height as u64 * width as u64 > MAX_PIXELS => {
                    return Err(format!(
                        "crop_size is {height}×{width}, more pixels than bert-explain takes ({MAX_PIXELS})"
                    ))
                }
                Size::Exact { height, width } => Some((height, width)),
                _ => return Err("crop_size must have height and width".into()),
            }
        } else {
            None
        };
        let rescale = if flag("do_rescale", defaults.rescale)? {
            Some(match field("rescale_factor") {
                Some(v) => v
                    .as_f64()
                    .ok_or_else(|| format!("rescale_factor is {v}, not a number"))?,
                None => 1.0 / 255.0,
            })
        } else {
            None
        };
        let normalize = if flag("do_normalize", defaults.normalize)? {
            let triple = |name: &str, default: Option<[f64; 3]>| {
                field(name)
                    .map(|v| parse_triple(v, name))
                    .or(default.map(Ok))
                    .unwrap_or_else(|| Err(format!("do_normalize is true but there is no {name}")))
            };
            let mean = triple("image_mean", defaults.mean)?;
            let std = triple("image_std", defaults.std)?;
            Some((mean, std))
        } else {
            None
        };
        Ok(ImageProcessor {
            kind,
            resize,
            crop,
            rescale,
            normalize,
            convert_rgb: flag("do_convert_rgb", defaults.convert_rgb)?,
        })
    }
}

/// The class `AutoImageProcessor` would pick.
fn kind(config: &Map<String, Value>, model_type: impl FnOnce() -> Option<String>) -> String {
    let named = |key: &str| config.get(key).and_then(Value::as_str).map(str::to_owned);
    if let Some(kind) = named("image_processor_type") {
        return kind;
    }
    if let Some(old) = named("feature_extractor_type") {
        return old.replace("FeatureExtractor", "ImageProcessor");
    }
    match model_type().as_deref() {
        Some("vit") => "ViTImageProcessor",
        Some("deit") => "DeiTImageProcessor",
        Some("dinov2" | "bit") => "BitImageProcessor",
        _ => "BaseImageProcessor",
    }
    .into()
}

/// transformers' `get_size_dict`: a dictionary, or a bare int (square with
/// `default_to_square`, else the shortest edge), or `[height, width]`.
fn parse_size(value: &Value, default_to_square: bool, name: &str) -> Result<Size, String> {
    let positive = |v: &Value| -> Result<u32, String> {
        v.as_u64()
            .filter(|&n| n > 0 && n <= MAX_SIDE as u64)
            .map(|n| n as u32)
            .ok_or_else(|| {
                format!("{name} has {v}, not a whole number of pixels from 1 to {MAX_SIDE}")
            })
    };
    match value {
        Value::Number(_) => {
            let n = positive(value)?;
            Ok(if default_to_square {
                Size::Exact {
                    height: n,
                    width: n,
                }
            } else {
                Size::ShortestEdge(n)
            })
        }
        Value::Array(items) if items.len() == 2 => Ok(Size::Exact {
            height: positive(&items[0])?,
            width: positive(&items[1])?,
        }),
        Value::Object(map) => {
            let mut keys: Vec<&str> = map
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, _)| k.as_str())
                .collect();
            keys.sort_unstable();
            match keys[..] {
                ["height", "width"] => Ok(Size::Exact {
                    height: positive(&map["height"])?,
                    width: positive(&map["width"])?,
                }),
                ["shortest_edge"] => Ok(Size::ShortestEdge(positive(&map["shortest_edge"])?)),
                ["longest_edge", "shortest_edge"] => Ok(Size::ShortestLongest {
                    shortest: positive(&map["shortest_edge"])?,
                    longest: positive(&map["longest_edge"])?,
                }),
                ["max_height", "max_width"] => Ok(Size::MaxHeightWidth {
                    max_height: positive(&map["max_height"])?,
                    max_width: positive(&map["max_width"])?,
                }),
                _ => Err(format!(
                    "{name} has the keys {keys:?}; bert-explain reads height and width, shortest_edge (with or without longest_edge), or max_height and max_width"
                )),
            }
        }
        _ => Err(format!("{name} is {value}, not a size")),
    }
}

/// `image_mean` or `image_std`: one number for every channel, or three.
fn parse_triple(value: &Value, name: &str) -> Result<[f64; 3], String> {
    let bad = || format!("{name} is {value}, not one number or three");
    match value {
        Value::Number(n) => Ok([n.as_f64().ok_or_else(bad)?; 3]),
        Value::Array(items) if items.len() == 3 => {
            let mut out = [0.0; 3];
            for (o, v) in out.iter_mut().zip(items) {
                *o = v.as_f64().ok_or_else(bad)?;
            }
            Ok(out)
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn processor(value: Value) -> ImageProcessor {
        ImageProcessor::from_value(&value, || None).unwrap()
    }

    #[test]
    fn old_configs_take_their_class_defaults() {
        // google/vit-base-patch16-224's config: a bare size, no do_rescale.
        let vit = processor(json!({"feature_extractor_type": "ViTFeatureExtractor",
            "do_normalize": true, "do_resize": true, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "resample": 2, "size": 224}));
        assert_eq!(vit.kind, "ViTImageProcessor");
        let square = Size::Exact {
            height: 224,
            width: 224,
        };
        assert_eq!(vit.resize, Some((square, Filter::Bilinear)));
        assert_eq!((vit.crop, vit.rescale), (None, Some(1.0 / 255.0)));
        // The same bare int is a shortest edge for BiT, which does not default to square.
        let bit = processor(json!({"image_processor_type": "BitImageProcessorFast", "size": 256}));
        assert_eq!(bit.resize, Some((Size::ShortestEdge(256), Filter::Bicubic)));
        assert_eq!(bit.crop, Some((224, 224)));
        assert_eq!(bit.normalize, Some((OPENAI_CLIP_MEAN, OPENAI_CLIP_STD)));
        assert!(bit.convert_rgb);
        let deit = processor(json!({"image_processor_type": "DeiTImageProcessor", "size": null}));
        assert_eq!(deit.output_size(1000, 10), (224, 224));
        // Unknown classes do nothing they are not told to.
        let other = processor(json!({"image_processor_type": "SomethingElse"}));
        assert_eq!(
            (other.resize, other.crop, other.rescale),
            (None, None, None)
        );
        // Without a type, config.json's model_type names the class.
        let typed = ImageProcessor::from_value(&json!({}), || Some("dinov2".into())).unwrap();
        assert_eq!(typed.kind, "BitImageProcessor");
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let err = |value: Value| ImageProcessor::from_value(&value, || None).unwrap_err();
        let vit = |extra: Value| {
            let mut v = json!({"image_processor_type": "ViTImageProcessor"});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        assert!(err(vit(json!({"resample": 7}))).contains("resample is 7"));
        assert!(err(vit(json!({"size": {"longest_edge": 9}}))).contains("longest_edge"));
        assert!(err(vit(json!({"size": 0}))).contains("from 1 to"));
        let huge = json!({"do_center_crop": true, "crop_size": 30000});
        assert!(err(vit(huge)).contains("more pixels"));
        assert!(err(vit(json!({"image_mean": [1, 2]}))).contains("image_mean"));
        assert!(err(vit(json!({"do_pad": true}))).contains("padding"));
        assert!(err(vit(json!({"do_resize": "yes"}))).contains("do_resize"));
        assert!(err(json!([1, 2])).contains("not a JSON object"));
    }
}
