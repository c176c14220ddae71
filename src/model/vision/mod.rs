//! Vision transformers (Dosovitskiy et al. 2021, ViT; Touvron et al. 2021, DeiT; Oquab et
//! al. 2024, DINOv2; Darcet et al. 2024, registers): an image cut into patches, each patch
//! projected to a token, a class token (and a distillation token, and register tokens) put
//! before them, then pre-norm layers. One body serves the four families, told apart by a
//! [`Layout`] (their names, their extra tokens, their positions); each family is one file in
//! `families/`. The body's input is the pixel values `[b, channels, H, W]`, which is also
//! what gradients are taken with respect to (as LXT explains a ViT): there are no words.

mod layer;
pub mod positions;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use candle_core::{Module, Tensor};
use serde_json::Value;

use crate::checkpoint::Weights;
use crate::error::{Error, Result};
use crate::linalg::Dense;
use crate::model::body::{run_layers, Body};
use crate::model::config::{read_json, Activation};
use crate::model::family::{
    BodyKind, ClassifierNames, Family, ImageClassifierNames, ImageNames, BERT_EMBEDDINGS,
    BERT_LAYER,
};
use crate::model::norm::LayerNorm;
use crate::model::{Keep, LayerTrace, Reads};
use layer::{LayerNames, VisionLayer};
pub use positions::Resize;

/// What sets one vision family apart.
pub struct Layout {
    /// A distillation token after the class token (DeiT).
    pub distillation: bool,
    /// Whether config.json's `num_register_tokens` is read: register tokens after the class
    /// token, which get no position (DINOv2 with registers).
    pub registers: bool,
    pub layer: LayerNames,
    /// How the positions meet a grid they were not trained for.
    pub resize: Resize,
    /// `layer_norm_eps` where config.json leaves it out.
    pub eps: f64,
}

/// ViT's and DeiT's layer names.
pub const VIT_LAYER: LayerNames = LayerNames {
    norm1: "layernorm_before",
    scale1: None,
    norm2: "layernorm_after",
    fc1: "intermediate.dense",
    fc2: "output.dense",
    scale2: None,
};

/// DINOv2's layer names (with and without registers): layer scales after each block.
pub const DINOV2_LAYER: LayerNames = LayerNames {
    norm1: "norm1",
    scale1: Some("layer_scale1.lambda1"),
    norm2: "norm2",
    fc1: "mlp.fc1",
    fc2: "mlp.fc2",
    scale2: Some("layer_scale2.lambda1"),
};

/// What an image model's tokens are, beyond its patches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patches {
    /// A patch's side in pixels.
    pub size: usize,
    /// Colour channels the pixel values have.
    pub channels: usize,
    /// The tokens before the patches, as the report names them: `[CLS]`, `[DIST]`,
    /// `[REG1]`….
    pub leading: Vec<String>,
}

/// config.json's fields for a vision checkpoint, filled in where the text families'
/// config reader needs them and a vision config has none: no vocabulary, no token types,
/// no position ids; the MLP's width from `mlp_ratio` (DINOv2).
pub fn complete_config(value: &mut Value) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let hidden = object.get("hidden_size").and_then(Value::as_u64);
    let ratio = object
        .get("mlp_ratio")
        .and_then(Value::as_f64)
        .unwrap_or(4.0);
    if let Some(hidden) = hidden {
        let inner = (hidden as f64 * ratio) as u64;
        object.entry("intermediate_size").or_insert(inner.into());
    }
    for key in ["vocab_size", "max_position_embeddings", "type_vocab_size"] {
        object.entry(key).or_insert(0.into());
    }
    object.entry("hidden_act").or_insert("gelu".into());
}

/// The config.json fields the body reads, checked.
struct Settings {
    hidden: usize,
    inner: usize,
    heads: usize,
    layers: usize,
    eps: f64,
    activation: Activation,
    /// `[height, width]` in pixels that the positions were learnt for.
    image: [usize; 2],
    patch: usize,
    channels: usize,
    qkv_bias: bool,
    registers: usize,
}

impl Settings {
    fn read(path: &Path, layout: &Layout) -> Result<Self> {
        let mut json = read_json(path)?;
        complete_config(&mut json);
        let bad = |message: String| Error::Config {
            path: path.to_path_buf(),
            message,
        };
        let size = |key: &str| -> Result<usize> {
            json.get(key)
                .and_then(Value::as_u64)
                .filter(|v| *v > 0 && *v < 1 << 20)
                .map(|v| v as usize)
                .ok_or_else(|| bad(format!("{key} must be a positive whole number")))
        };
        // An int, or [height, width].
        let pair = |key: &str, default: usize| -> Result<[usize; 2]> {
            let positive = |v: &Value| v.as_u64().filter(|v| *v > 0 && *v < 1 << 20);
            match json.get(key) {
                None => Ok([default; 2]),
                Some(Value::Array(a)) if a.len() == 2 => match (positive(&a[0]), positive(&a[1])) {
                    (Some(h), Some(w)) => Ok([h as usize, w as usize]),
                    _ => Err(bad(format!("{key} must hold two positive whole numbers"))),
                },
                Some(v) => positive(v)
                    .map(|v| [v as usize; 2])
                    .ok_or_else(|| bad(format!("{key} must be a positive whole number"))),
            }
        };
        if json.get("use_swiglu_ffn").and_then(Value::as_bool) == Some(true) {
            return Err(bad(
                "use_swiglu_ffn (DINOv2 giant's SwiGLU MLP) is not supported; the small, base \
                 and large DINOv2 checkpoints use a plain MLP"
                    .into(),
            ));
        }
        let activation: Activation = serde_json::from_value(json["hidden_act"].clone())
            .map_err(|e| bad(format!("hidden_act: {e}")))?;
        let eps = json
            .get("layer_norm_eps")
            .and_then(Value::as_f64)
            .unwrap_or(layout.eps);
        if !(eps > 0.0 && eps.is_finite()) {
            return Err(bad(format!(
                "layer_norm_eps {eps} is not a positive number"
            )));
        }
        let [patch, patch_w] = pair("patch_size", 16)?;
        if patch != patch_w {
            return Err(bad("patches that are not square are not supported".into()));
        }
        let registers = match layout.registers {
            true => json
                .get("num_register_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(1 << 10) as usize,
            false => 0,
        };
        Ok(Self {
            hidden: size("hidden_size")?,
            inner: size("intermediate_size")?,
            heads: size("num_attention_heads")?,
            layers: size("num_hidden_layers")?,
            eps,
            activation,
            image: pair("image_size", 224)?,
            patch,
            channels: json
                .get("num_channels")
                .and_then(Value::as_u64)
                .unwrap_or(3)
                .clamp(1, 64) as usize,
            qkv_bias: json
                .get("qkv_bias")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            registers,
        })
    }

    /// The grid of patches the positions were learnt for.
    fn grid(&self) -> (usize, usize) {
        (self.image[0] / self.patch, self.image[1] / self.patch)
    }
}

/// How many grids' interpolated positions a body keeps.
const RESIZED_KEPT: usize = 16;

/// The body of a ViT, DeiT or DINOv2 checkpoint.
pub struct VisionBody {
    /// `[1, lead, hidden]`: the class token, and the distillation token where there is one.
    lead: Tensor,
    /// `[1, registers, hidden]`.
    registers: Option<Tensor>,
    /// `[1, lead + rows · cols, hidden]` for the grid they were learnt for.
    positions: Tensor,
    /// Pixels `[height, width]` the positions were learnt for.
    image: [usize; 2],
    /// `[hidden, channels · patch²]`: the patch convolution as a product.
    projection: Dense,
    patch: usize,
    channels: usize,
    layers: Vec<VisionLayer>,
    norm: LayerNorm,
    resize: Resize,
    /// Positions interpolated to other grids, by grid.
    resized: Mutex<HashMap<(usize, usize), Tensor>>,
    leading: Vec<String>,
    factor: usize,
}

impl VisionBody {
    /// `weights`: the checkpoint's tensors with the task prefix dropped; `path`: its
    /// config.json.
    pub fn load(weights: &Weights, path: &Path, layout: &Layout) -> Result<Self> {
        let s = Settings::read(path, layout)?;
        let root = weights.pp("");
        let embeddings = root.pp("embeddings");
        let h = s.hidden;
        let mut lead = vec![embeddings.get("cls_token", &[1, 1, h])?];
        let mut leading = vec!["[CLS]".to_string()];
        if layout.distillation {
            lead.push(embeddings.get("distillation_token", &[1, 1, h])?);
            leading.push("[DIST]".to_string());
        }
        let registers = match s.registers {
            0 => None,
            r => Some(embeddings.get("register_tokens", &[1, r, h])?),
        };
        leading.extend((1..=s.registers).map(|i| format!("[REG{i}]")));
        let (rows, cols) = s.grid();
        let positions = embeddings.get("position_embeddings", &[1, lead.len() + rows * cols, h])?;
        let conv = embeddings.pp("patch_embeddings.projection");
        let width = s.channels * s.patch * s.patch;
        let weight = conv
            .get("weight", &[h, s.channels, s.patch, s.patch])?
            .reshape((h, width))?;
        let projection = Dense::new(weight, Some(conv.get("bias", &[h])?));
        let layers = (0..s.layers)
            .map(|i| {
                let vb = root.pp(&format!("encoder.layer.{i}"));
                VisionLayer::load(&vb, &layout.layer, &layer::Sizes::of(&s))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            lead: Tensor::cat(&lead, 1)?,
            registers,
            positions,
            image: s.image,
            projection,
            patch: s.patch,
            channels: s.channels,
            layers,
            norm: LayerNorm::load(&root.pp("layernorm"), h, s.eps)?,
            resize: layout.resize,
            resized: Mutex::new(HashMap::new()),
            leading,
            factor: s.inner.div_ceil(h),
        })
    }

    /// `[1, lead + rows · cols, hidden]`: the positions for a grid of `rows × cols` patches,
    /// interpolated where the family does so ([`VisionBody::tokens`] has refused a grid
    /// where it does not).
    fn positions_for(&self, rows: usize, cols: usize) -> Result<Tensor> {
        let trained = (self.image[0] / self.patch, self.image[1] / self.patch);
        if (rows, cols) == trained {
            return Ok(self.positions.clone());
        }
        if self.resize == Resize::Refuse {
            return Err(Error::InputKind(format!(
                "a grid of {rows} × {cols} patches, and this checkpoint's positions are for {} × {}",
                trained.0, trained.1
            )));
        }
        let mut resized = self.resized.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = resized.get(&(rows, cols)) {
            return Ok(found.clone());
        }
        let lead = self.lead.dim(1)?;
        let (_, n, h) = self.positions.dims3()?;
        let grid = self.positions.narrow(1, lead, n - lead)?;
        let values: Vec<f32> = grid.flatten_all()?.to_vec1()?;
        let side = trained.0;
        if side * side != n - lead {
            return Err(Error::Attention(format!(
                "{} positions for patches are not a square grid, which interpolation needs",
                n - lead
            )));
        }
        let moved = positions::interpolate(&values, (side, side), (rows, cols), h, self.resize);
        let moved = Tensor::from_vec(moved, (1, rows * cols, h), grid.device())?;
        let whole = Tensor::cat(&[self.positions.narrow(1, 0, lead)?, moved], 1)?;
        // Images of many shapes (a processor without a crop) keep the memory bounded.
        if resized.len() >= RESIZED_KEPT {
            resized.clear();
        }
        resized.insert((rows, cols), whole.clone());
        Ok(whole)
    }

    /// `pixels`: `[b, channels, H, W]` → the tokens before positions, `[b, lead + registers
    /// + rows · cols, hidden]` in the model's order (the class token, the registers, the
    /// distillation token, the patches row by row: each whole patch projected, a remainder
    /// of less than a patch at the right or bottom left out, as the convolution leaves it),
    /// and the grid (rows, cols). What importance scores differentiate and blank
    /// ([`crate::faithfulness::Picture`]); [`VisionBody::place`] adds the positions.
    pub fn tokens(&self, pixels: &Tensor) -> Result<(Tensor, (usize, usize))> {
        let (b, c, height, width) = pixels.dims4().map_err(|_| {
            Error::InputKind("an image model reads pixel values [b, channels, H, W]".into())
        })?;
        if c != self.channels {
            return Err(Error::InputKind(format!(
                "the image has {c} channels and the model reads {}",
                self.channels
            )));
        }
        let p = self.patch;
        let (rows, cols) = (height / p, width / p);
        if rows == 0 || cols == 0 {
            return Err(Error::InputKind(format!(
                "the image reaches the model as {height} × {width} pixels, smaller than one {p} × {p} patch"
            )));
        }
        if self.resize == Resize::Refuse && [height, width] != self.image {
            return Err(Error::InputKind(format!(
                "the image reaches the model as {height} × {width} pixels, and this checkpoint's \
                 positions are for {} × {}: its preprocessor_config.json should resize and crop to that",
                self.image[0], self.image[1]
            )));
        }
        let cut = pixels
            .narrow(2, 0, rows * p)?
            .narrow(3, 0, cols * p)?
            .reshape((b, c, rows, p, cols, p))?
            .permute((0, 2, 4, 1, 3, 5))?
            .reshape((b, rows * cols, c * p * p))?;
        let patches = self.projection.forward(&cut)?;
        let (_, lead, h) = self.lead.dims3()?;
        let lead = self.lead.broadcast_as((b, lead, h))?;
        let tokens = match &self.registers {
            Some(registers) => {
                let r = registers.dim(1)?;
                let rest = lead.dim(1)? - 1;
                Tensor::cat(
                    &[
                        lead.narrow(1, 0, 1)?,
                        registers.broadcast_as((b, r, h))?,
                        lead.narrow(1, 1, rest)?,
                        patches,
                    ],
                    1,
                )?
            }
            None => Tensor::cat(&[lead, patches], 1)?,
        };
        Ok((tokens, (rows, cols)))
    }

    /// [`VisionBody::tokens`]' output `[b, n, hidden]` for a grid of `rows × cols` patches
    /// → what the first layer reads: the positions added (none to the registers).
    pub fn place(&self, tokens: &Tensor, (rows, cols): (usize, usize)) -> Result<Tensor> {
        let positions = self.positions_for(rows, cols)?;
        let positions = match &self.registers {
            Some(registers) => {
                let (r, n) = (registers.dim(1)?, positions.dim(1)?);
                let none = Tensor::zeros(
                    (1, r, positions.dim(2)?),
                    positions.dtype(),
                    positions.device(),
                )?;
                Tensor::cat(
                    &[
                        positions.narrow(1, 0, 1)?,
                        none,
                        positions.narrow(1, 1, n - 1)?,
                    ],
                    1,
                )?
            }
            None => positions,
        };
        Ok(tokens.broadcast_add(&positions)?)
    }

    /// The final LayerNorm, on the last layer's output.
    pub fn final_norm(&self, x: &Tensor) -> Result<Tensor> {
        self.norm.forward(x)
    }

    /// `[1, 1, hidden]`: the token of a patch whose pixel values are all 0 (the processor's
    /// mean pixel, where it normalises): the projection's bias.
    pub fn blank(&self) -> Result<Tensor> {
        let h = self.projection.weight().dim(0)?;
        let bias = match self.projection.bias() {
            Some(bias) => bias.clone(),
            None => Tensor::zeros(h, self.lead.dtype(), self.lead.device())?,
        };
        Ok(bias.reshape((1, 1, h))?)
    }
}

impl Body for VisionBody {
    /// The pixel values themselves: `[b, channels, H, W]` f32.
    fn embed_words(&self, pixels: &Tensor) -> Result<Tensor> {
        Ok(pixels.clone())
    }

    /// `pixels`: `[b, channels, H, W]` → `[b, lead + registers + rows · cols, hidden]`: the
    /// tokens ([`VisionBody::tokens`]) with their positions ([`VisionBody::place`]).
    fn embed(&self, pixels: &Tensor, _types: Option<&Tensor>) -> Result<Tensor> {
        let (tokens, grid) = self.tokens(pixels)?;
        self.place(&tokens, grid)
    }

    fn forward(
        &self,
        embedded: &Tensor,
        keep: Keep,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, Vec<LayerTrace>)> {
        let (x, traces) = run_layers(&self.layers, embedded, keep, |layer, x| {
            layer.forward(x, keep, None, lengths)
        })?;
        Ok((self.norm.forward(&x)?, traces))
    }

    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor> {
        Ok(self.layers[layer]
            .forward(x, Keep::default(), value_mask, None)?
            .0)
    }

    /// Any number of patches (the image decides): the bound is the attention's memory.
    fn max_tokens(&self) -> usize {
        usize::MAX
    }

    /// Pixels cannot be padded: only images of one grid share a forward pass.
    fn pads_alike(&self, n: usize, to: usize) -> bool {
        n == to
    }

    fn layers(&self) -> usize {
        self.layers.len()
    }

    fn intermediate_factor(&self) -> usize {
        self.factor
    }

    /// There is no word table: the patch projection stands in (a head never shares it).
    fn word_table(&self) -> &Tensor {
        self.projection.weight()
    }

    fn vision(&self) -> Option<&VisionBody> {
        Some(self)
    }

    fn patches(&self) -> Option<Patches> {
        Some(Patches {
            size: self.patch,
            channels: self.channels,
            leading: self.leading.clone(),
        })
    }
}

/// An image family: its names, its body's loader, its classifiers; the text families'
/// fields (embeddings, layers, heads) are never read for it.
pub const fn family(
    name: &'static str,
    base: &'static str,
    body: fn(&Weights, &Path) -> Result<Box<dyn Body>>,
    classifiers: &'static [ImageClassifierNames],
) -> Family {
    Family {
        name,
        model_types: &[],
        base,
        body: BodyKind::Own(body),
        adjust: |_| {},
        embeddings: BERT_EMBEDDINGS,
        layer: BERT_LAYER,
        masked_lm: &[],
        classifier: ClassifierNames {
            dense: None,
            activation: Activation::Gelu,
            norm: None,
            output: "",
            reads: Reads::Whole,
        },
        discriminator: None,
        image: Some(ImageNames { classifiers }),
    }
}
