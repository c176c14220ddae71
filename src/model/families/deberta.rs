//! DeBERTa-v2 and v3 (He et al. 2021, "DeBERTa: Decoding-enhanced BERT with Disentangled
//! Attention"; v3: He et al. 2023): BERT's post-norm layers whose attention logits add
//! content-to-position and position-to-content terms over log-bucketed relative positions
//! (§3.1), the relative embeddings shared by every layer (normed once where `norm_rel_ebd`
//! says so), and embeddings with no absolute positions where `position_biased_input` is
//! false. Heads: the masked LM under either of transformers' names (`cls.predictions`, or
//! `lm_predictions.lm_head` tied to the word embeddings, as microsoft/deberta-v3-base holds
//! it), and the classifier on [CLS] through the context pooler (GELU).

use std::path::Path;

use candle_core::{Module, Tensor};
use candle_nn::Embedding;
use serde_json::Value;

use crate::checkpoint::{WeightPath, Weights};
use crate::error::{Error, Result};
use crate::linalg::{broadcast_matmul, matmul, Dense};
use crate::model::attention::Scores;
use crate::model::body::PostNormBody;
use crate::model::config::{read_json, Activation};
use crate::model::embeddings::{add_types, InputEmbeddings};
use crate::model::family::{
    BodyKind, ClassifierNames, Family, LayerNames, MaskedLmNames, BERT_EMBEDDINGS,
};
use crate::model::layer::Layer;
use crate::model::norm::LayerNorm;
use crate::model::{rules, EncoderConfig, Reads};

pub const FAMILY: Family = Family {
    name: "deberta-v2",
    model_types: &["deberta-v2"],
    base: "deberta",
    body: BodyKind::Own(|weights, path| Ok(Box::new(load_body(weights, path)?))),
    adjust: |_| {},
    // Its own embeddings: BERT's embedding names are never read.
    embeddings: BERT_EMBEDDINGS,
    layer: LayerNames {
        prefix: |i| format!("encoder.layer.{i}"),
        query: "attention.self.query_proj",
        key: "attention.self.key_proj",
        value: "attention.self.value_proj",
        attention_output: "attention.output.dense",
        attention_norm: "attention.output.LayerNorm",
        ffn_in: "intermediate.dense",
        ffn_out: "output.dense",
        output_norm: "output.LayerNorm",
    },
    masked_lm: &[
        // `legacy: true` (transformers' default): BERT's names.
        MaskedLmNames {
            dense: "cls.predictions.transform.dense",
            norm: "cls.predictions.transform.LayerNorm",
            decoder: "cls.predictions.decoder",
            bias: "cls.predictions.bias",
            activation: None,
        },
        // `legacy: false`, and the names DeBERTa's own code saved: no decoder of its own
        // (tied to the word embeddings), so `decoder` names nothing a checkpoint holds.
        MaskedLmNames {
            dense: "lm_predictions.lm_head.dense",
            norm: "lm_predictions.lm_head.LayerNorm",
            decoder: "lm_predictions.lm_head.decoder",
            bias: "lm_predictions.lm_head.bias",
            activation: None,
        },
    ],
    // The context pooler (`pooler_hidden_act`, GELU; others refused) on [CLS].
    classifier: ClassifierNames {
        dense: Some("pooler.dense"),
        activation: Activation::Gelu,
        norm: None,
        output: "classifier",
        reads: Reads::First,
    },
    discriminator: None,
    image: None,
};

/// The config.json fields of the disentangled attention and the embeddings, checked.
struct Settings {
    encoder: EncoderConfig,
    /// Whether the embeddings add absolute positions (`position_biased_input`).
    absolute: bool,
    type_vocab: usize,
    /// `None` without `relative_attention`.
    relative: Option<Relative>,
    /// 1 + how many position terms `pos_att_type` names: the logits are divided by
    /// √(d · terms) even without `relative_attention`, as transformers divides them.
    terms: usize,
}

/// How relative positions are bucketed and which terms read them.
#[derive(Clone, Copy)]
struct Relative {
    /// k: relative positions are clamped into [−k, k) (`position_buckets`, else
    /// `max_relative_positions`, else `max_position_embeddings`); the table has 2k rows.
    span: usize,
    /// `position_buckets` (0: no log buckets).
    buckets: usize,
    /// `max_relative_positions`, where the log buckets end.
    max_relative: usize,
    c2p: bool,
    p2c: bool,
    /// Whether the position terms use the layer's own query and key projections.
    share_att_key: bool,
    /// Whether the relative embeddings pass the encoder's LayerNorm.
    norm: bool,
}

impl Settings {
    fn read(path: &Path) -> Result<Self> {
        let json = read_json(path)?;
        let bad = |message: String| Error::Config {
            path: path.to_path_buf(),
            message,
        };
        let encoder = EncoderConfig::from_json(path, json.clone(), FAMILY.adjust)?;
        let int =
            |key: &str, default: i64| json.get(key).and_then(Value::as_i64).unwrap_or(default);
        let flag =
            |key: &str, default: bool| json.get(key).and_then(Value::as_bool).unwrap_or(default);
        if int("conv_kernel_size", 0) > 0 {
            return Err(bad(
                "conv_kernel_size > 0 (DeBERTa-v2 xlarge's convolution after the first layer) \
                 is not supported; DeBERTa-v3 checkpoints have none"
                    .into(),
            ));
        }
        let (hidden, heads) = (encoder.hidden_size, encoder.num_attention_heads);
        if let Some(size) = json.get("attention_head_size").and_then(Value::as_u64) {
            if size as usize * heads != hidden {
                return Err(bad(format!(
                    "attention_head_size {size} × {heads} heads is not hidden_size {hidden}"
                )));
            }
        }
        let pooler = json.get("pooler_hidden_act").and_then(Value::as_str);
        if pooler.is_some_and(|act| act != "gelu") {
            return Err(bad(format!(
                "pooler_hidden_act {:?} is not supported (only gelu, as every DeBERTa \
                 checkpoint has it)",
                pooler.unwrap_or_default()
            )));
        }
        let pooler_size = int("pooler_hidden_size", hidden as i64);
        if pooler_size != hidden as i64 {
            return Err(bad(format!(
                "pooler_hidden_size {pooler_size} differs from hidden_size {hidden}"
            )));
        }
        let types = match json.get("pos_att_type") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => s.split('|').map(|t| t.trim().to_lowercase()).collect(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|t| t.as_str().unwrap_or("").trim().to_lowercase())
                .collect(),
            Some(other) => return Err(bad(format!("pos_att_type {other} is not a list"))),
        };
        if let Some(other) = types.iter().find(|t| !["c2p", "p2c"].contains(&t.as_str())) {
            return Err(bad(format!(
                "pos_att_type {other:?} is not supported (c2p and p2c are DeBERTa-v2's)"
            )));
        }
        let (c2p, p2c) = (
            types.iter().any(|t| t == "c2p"),
            types.iter().any(|t| t == "p2c"),
        );
        let max_relative = match int("max_relative_positions", -1) {
            m if m < 1 => encoder.max_position_embeddings,
            m => m as usize,
        };
        let buckets = int("position_buckets", -1).max(0) as usize;
        let norm_rel = json
            .get("norm_rel_ebd")
            .and_then(Value::as_str)
            .unwrap_or("none")
            .to_lowercase();
        let relative = flag("relative_attention", false).then_some(Relative {
            span: if buckets > 0 { buckets } else { max_relative },
            buckets,
            max_relative,
            c2p,
            p2c,
            share_att_key: flag("share_att_key", false),
            norm: norm_rel.split('|').any(|t| t.trim() == "layer_norm"),
        });
        if let Some(r) = &relative {
            if r.buckets > 0 && (r.buckets < 4 || r.max_relative <= r.buckets / 2 + 1) {
                return Err(bad(format!(
                    "position_buckets {} and max_relative_positions {} leave no log buckets",
                    r.buckets, r.max_relative
                )));
            }
        }
        Ok(Self {
            terms: 1 + usize::from(c2p) + usize::from(p2c),
            absolute: flag("position_biased_input", true),
            type_vocab: int("type_vocab_size", 0).max(0) as usize,
            relative,
            encoder,
        })
    }
}

/// The body: DeBERTa's embeddings, then BERT's post-norm layers with disentangled logits.
fn load_body(weights: &Weights, path: &Path) -> Result<PostNormBody> {
    let s = Settings::read(path)?;
    let c = &s.encoder;
    let root = weights.pp("");
    let embeddings = DebertaEmbeddings::load(&root.pp("embeddings"), &s)?;
    let relative = match &s.relative {
        Some(r) => {
            let table = root
                .pp("encoder.rel_embeddings")
                .get("weight", &[2 * r.span, c.hidden_size])?;
            let table = match r.norm {
                true => LayerNorm::load(
                    &root.pp("encoder.LayerNorm"),
                    c.hidden_size,
                    c.layer_norm_eps,
                )?
                .forward(&table)?,
                false => table,
            };
            Some((r, table))
        }
        None => None,
    };
    let names = &FAMILY.layer;
    let layers = (0..c.num_hidden_layers)
        .map(|i| {
            let vb = root.pp(&(names.prefix)(i));
            let layer = Layer::load(&vb, names, c)?;
            let self_attention = vb.pp("attention.self");
            let scores = Disentangled::load(&self_attention, c, s.terms, relative.as_ref())?;
            Ok(layer.with_scores(Box::new(scores)))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PostNormBody::new(Box::new(embeddings), layers))
}

/// `embeddings.*`: words (+ absolute positions) (+ token types), the projection to the hidden
/// size where the widths differ, then LayerNorm.
struct DebertaEmbeddings {
    word: Embedding,
    position: Option<Embedding>,
    token_type: Option<Embedding>,
    projection: Option<Dense>,
    layer_norm: LayerNorm,
    max_positions: usize,
}

impl DebertaEmbeddings {
    fn load(vb: &WeightPath, s: &Settings) -> Result<Self> {
        let c = &s.encoder;
        let width = c.embedding_width();
        let table = |name: &str, rows: usize| -> Result<Embedding> {
            Ok(Embedding::new(
                vb.pp(name).get("weight", &[rows, width])?,
                width,
            ))
        };
        Ok(Self {
            word: table("word_embeddings", c.vocab_size)?,
            position: match s.absolute {
                true => Some(table("position_embeddings", c.max_position_embeddings)?),
                false => None,
            },
            token_type: match s.type_vocab {
                0 => None,
                rows => Some(table("token_type_embeddings", rows)?),
            },
            projection: match width == c.hidden_size {
                true => None,
                false => Some(Dense::new(
                    vb.pp("embed_proj").get("weight", &[c.hidden_size, width])?,
                    None,
                )),
            },
            layer_norm: LayerNorm::load(&vb.pp("LayerNorm"), c.hidden_size, c.layer_norm_eps)?,
            max_positions: c.max_position_embeddings,
        })
    }
}

impl InputEmbeddings for DebertaEmbeddings {
    fn words(&self, input_ids: &Tensor) -> Result<Tensor> {
        Ok(self.word.forward(input_ids)?)
    }

    fn forward(&self, words: &Tensor, types: Option<&Tensor>) -> Result<Tensor> {
        let n = words.dim(1)?;
        let sum = match &self.position {
            Some(table) => {
                let positions = Tensor::arange(0u32, n as u32, words.device())?.unsqueeze(0)?;
                words.broadcast_add(&table.forward(&positions)?)?
            }
            None => words.clone(),
        };
        let sum = add_types(sum, self.token_type.as_ref(), types)?;
        let sum = match &self.projection {
            Some(projection) => projection.forward(&sum)?,
            None => sum,
        };
        self.layer_norm.forward(&sum)
    }

    fn max_tokens(&self) -> usize {
        self.max_positions
    }

    fn word_table(&self) -> &Tensor {
        self.word.embeddings()
    }

    fn scale_free(&self) -> bool {
        self.position.is_none() && self.token_type.is_none()
    }

    /// `embed_proj` comes before the LayerNorm.
    fn shift_free(&self) -> bool {
        self.projection.is_none()
    }
}

/// One layer's attention logits (§3.1, eq. 4): content to content, plus content to position
/// q_i · k^r[δ(i, j)] and position to content k_j · q^r[δ(j, i)], all divided by √(3d) (√(2d)
/// with one position term). The position projections of the relative table are the same for
/// every input, so they are made once, at load.
struct Disentangled {
    /// √(d · (1 + the number of position terms `pos_att_type` names)).
    scale: f64,
    /// `[heads, 2k, d]`: the relative table through the key projection (c2p).
    position_keys: Option<Tensor>,
    /// `[heads, 2k, d]`: through the query projection (p2c).
    position_queries: Option<Tensor>,
    relative: Option<Relative>,
}

impl Disentangled {
    /// `vb`: the layer's `attention.self`; `terms`: [`Settings::terms`]; `relative`: the
    /// settings and the (normed) table.
    fn load(
        vb: &WeightPath,
        c: &EncoderConfig,
        terms: usize,
        relative: Option<&(&Relative, Tensor)>,
    ) -> Result<Self> {
        let (hidden, heads, d) = (c.hidden_size, c.num_attention_heads, c.head_size());
        let scale = ((d * terms) as f64).sqrt();
        let Some((r, table)) = relative else {
            return Ok(Self {
                scale,
                position_keys: None,
                position_queries: None,
                relative: None,
            });
        };
        let project = |own: &str, shared: &str| -> Result<Tensor> {
            let name = if r.share_att_key { shared } else { own };
            // pos_query_proj has a bias in transformers too (nn.Linear's default).
            let linear = crate::model::attention::load_linear(&vb.pp(name), hidden, hidden)?;
            let rows = 2 * r.span;
            Ok(linear
                .forward(table)?
                .reshape((rows, heads, d))?
                .transpose(0, 1)?
                .contiguous()?)
        };
        Ok(Self {
            scale,
            position_keys: r
                .c2p
                .then(|| project("pos_key_proj", "key_proj"))
                .transpose()?,
            position_queries: r
                .p2c
                .then(|| project("pos_query_proj", "query_proj"))
                .transpose()?,
            relative: Some(**r),
        })
    }
}

impl Scores for Disentangled {
    fn scores(&self, q: &Tensor, k: &Tensor) -> Result<Tensor> {
        // Only the content-to-content term multiplies two activations: the position terms are
        // linear in q or k (LRP's uniform rule).
        let mut scores = (rules::product(matmul(q, &k.t()?)?)? / self.scale)?;
        let Some(r) = &self.relative else {
            return Ok(scores);
        };
        let (b, heads, n, _) = q.dims4()?;
        let shape = (b, heads, n, n);
        let distances = bucketed_distances(n, r);
        let delta = |i: usize, j: usize| distances[i + n - 1 - j];
        let index = |at: &dyn Fn(usize, usize) -> i64| -> Result<Tensor> {
            let top = 2 * r.span as i64 - 1;
            let values: Vec<u32> = (0..n * n)
                .map(|ij| (at(ij / n, ij % n) + r.span as i64).clamp(0, top) as u32)
                .collect();
            Ok(Tensor::from_vec(values, (1, 1, n, n), q.device())?
                .broadcast_as(shape)?
                .contiguous()?)
        };
        if let Some(keys) = &self.position_keys {
            // [b, h, n, 2k]; entry (i, j) of the term is row i's column δ(i, j) + k.
            let to_positions = broadcast_matmul(q, &keys.t()?.unsqueeze(0)?)?;
            let at = index(&|i, j| delta(i, j))?;
            scores = (scores + (to_positions.gather(&at, 3)? / self.scale)?)?;
        }
        if let Some(queries) = &self.position_queries {
            // [b, h, n, 2k] read from the keys' side: entry (j, i) is key j's column
            // −δ(j, i) + k, then transposed to (i, j).
            let from_positions = broadcast_matmul(k, &queries.t()?.unsqueeze(0)?)?;
            let at = index(&|j, i| -delta(j, i))?;
            let term = from_positions.gather(&at, 3)?.transpose(2, 3)?;
            scores = (scores + (term / self.scale)?)?;
        }
        Ok(scores)
    }
}

/// δ(i, j) by distance: entry `i − j + n − 1` holds i − j, log-bucketed where
/// `position_buckets` says so (2n − 1 entries, one bucket each, shared by every pair at
/// that distance).
fn bucketed_distances(n: usize, r: &Relative) -> Vec<i64> {
    (1 - n as i64..n as i64)
        .map(|delta| match r.buckets {
            0 => delta,
            buckets => log_bucket(delta, buckets as i64, r.max_relative as i64),
        })
        .collect()
}

/// DeBERTa's log bucket of a relative position: itself within `buckets / 2` of zero, else
/// `mid + ⌈ln(|δ| / mid) / ln((max − 1) / mid) · (mid − 1)⌉` with δ's sign, computed in f32 as
/// transformers computes it (so that the buckets' edges fall where its do).
fn log_bucket(delta: i64, buckets: i64, max_relative: i64) -> i64 {
    let mid = buckets / 2;
    if delta.abs() <= mid {
        return delta;
    }
    let ratio = (((max_relative - 1) as f64 / mid as f64) as f32).ln();
    let scaled = ((delta.abs() as f32 / mid as f32).ln() / ratio * (mid - 1) as f32).ceil();
    (scaled + mid as f32) as i64 * delta.signum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JSON file of the repository, by its path there.
    fn repo_json(path: &str) -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn near_positions_keep_their_distance() {
        // deberta-v3-base: 256 buckets up to 512 positions; the far buckets' edges are
        // checked against transformers' in tests/families.rs.
        assert_eq!(log_bucket(5, 256, 512), 5);
        assert_eq!(log_bucket(-128, 256, 512), -128);
        assert_eq!(log_bucket(129, 256, 512), 129);
        assert!((130..256).contains(&log_bucket(400, 256, 512)));
        assert_eq!(log_bucket(-400, 256, 512), -log_bucket(400, 256, 512));
    }

    /// What transformers' DeBERTa-v2 code computes and bert-explain does not is refused, with
    /// what to do; the rest of a tiny checkpoint's config reads.
    #[test]
    fn configs_it_does_not_compute_are_refused() {
        let config = repo_json("models/tiny-deberta-v2-mlm/config.json");
        let dir = tempfile::tempdir().unwrap();
        let with = |key: &str, value: Value| {
            let mut changed = config.clone();
            changed[key] = value;
            let file = dir.path().join("config.json");
            std::fs::write(&file, changed.to_string()).unwrap();
            Settings::read(&file).err().map(|e| e.to_string())
        };
        assert_eq!(with("pos_att_type", "c2p|p2c".into()), None);
        let refusals = [
            ("conv_kernel_size", Value::from(3), "conv_kernel_size"),
            (
                "pos_att_type",
                Value::from("p2p|c2p"),
                "\"p2p\" is not supported",
            ),
            ("pooler_hidden_act", Value::from("tanh"), "only gelu"),
            ("attention_head_size", Value::from(5), "is not hidden_size"),
        ];
        for (key, value, says) in refusals {
            let message = with(key, value).unwrap_or_else(|| panic!("{key} was read"));
            assert!(message.contains(says), "{key}: {message}");
        }
    }

    /// Every relative position from −2047 to 2047 in transformers' buckets
    /// (scripts/reference/make_deberta_buckets.py), deberta-v3's settings among them.
    #[test]
    fn buckets_equal_transformers() {
        let fixture = repo_json("tests/fixtures/deberta-buckets.json");
        let first = fixture["first"].as_i64().unwrap();
        for case in fixture["cases"].as_array().unwrap() {
            let (buckets, max) = (
                case["buckets"].as_i64().unwrap(),
                case["max_relative"].as_i64().unwrap(),
            );
            for (k, want) in case["positions"].as_array().unwrap().iter().enumerate() {
                let delta = first + k as i64;
                let got = log_bucket(delta, buckets, max);
                assert_eq!(
                    got,
                    want.as_i64().unwrap(),
                    "δ {delta}, {buckets} buckets up to {max}"
                );
            }
        }
    }
}
