//! The rotary decoder body that Llama and the decoders after it share (Qwen2 and 3, Mistral,
//! Gemma 2 and 3, Phi-3): pre-RMSNorm blocks, rotary positions, grouped-query attention (kept
//! per query head), a gated MLP. What sets a family apart is data, a [`Spec`] that its file
//! in `families/` builds from config.json: q/k norms, Gemma's norms after each block and its
//! `(1 + w)` weights, soft caps, sliding windows, fused projections, a rotary table per layer
//! type. Tensor names are transformers' (`model.layers.<i>.self_attn.q_proj`, …).

use candle_core::{IndexOp, Module, Tensor};
use candle_nn::Embedding;

use super::attention::load_linear_with;
use super::body::Body;
use super::causal::{
    cached_attention, decoder_internals, last_rows, pack, soft_cap, unpack, AfterAttention,
    Attended, Cached, CausalDims, CausalLm, Fed, KvCache, Step, StepOutput,
};
use super::norm::RmsNorm;
use super::rotary::{Rope, Rotary};
use super::{rules, Keep, LayerTrace};
use crate::checkpoint::{WeightPath, Weights};
use crate::error::Result;
use crate::linalg::Dense;

/// The gate's nonlinearity in the MLP `down(act(gate(x)) · up(x))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// SwiGLU (Llama, Qwen, Mistral, Phi-3).
    Silu,
    /// GeGLU with the tanh GELU (Gemma's `gelu_pytorch_tanh`).
    GeluTanh,
}

/// What one layer attends to and with which rotary table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerKind {
    /// How far back the layer may look (itself included); `None` for everywhere.
    pub window: Option<usize>,
    /// Its table in [`Spec::ropes`].
    pub rope: usize,
}

/// Which projections carry biases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Biases {
    pub qkv: bool,
    pub output: bool,
    pub mlp: bool,
}

/// Everything the body needs to know about one checkpoint.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The family's main `model_type`, as reports name it.
    pub model_type: &'static str,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub heads: usize,
    pub kv_heads: usize,
    /// The width of one attention head (`head_dim`, which may differ from hidden / heads).
    pub head_size: usize,
    pub max_positions: usize,
    pub eps: f64,
    pub eos: Vec<u32>,
    /// The head is the token embeddings (else `lm_head.weight`).
    pub tied: bool,
    pub gate: Gate,
    pub biases: Biases,
    /// Phi-3: `self_attn.qkv_proj` and `mlp.gate_up_proj` hold q, k, v and gate, up in one.
    pub fused: bool,
    /// Qwen3, Gemma 3: an RMSNorm over each head's queries and keys before the rotation.
    pub qk_norm: bool,
    /// Gemma 2 and 3: a norm after attention and one after the MLP, each before its residual
    /// (`post_attention_layernorm`, `pre_feedforward_layernorm`, `post_feedforward_layernorm`).
    pub sandwich: bool,
    /// Gemma: every RMSNorm multiplies by `1 + weight`.
    pub norm_plus_one: bool,
    /// Gemma: the embeddings are multiplied by √hidden.
    pub embed_scale: Option<f64>,
    /// What the attention scores are multiplied by (1 / √head_dim, Gemma's
    /// 1 / √query_pre_attn_scalar).
    pub query_scale: f64,
    pub attention_softcap: Option<f64>,
    pub final_softcap: Option<f64>,
    pub ropes: Vec<Rope>,
    pub layers: Vec<LayerKind>,
    /// Where the body's tensors and the head's (when it is not tied) may be, the first
    /// whose `embed_tokens` is there taken: (`model`, `lm_head.weight`), and where a
    /// checkpoint nests the text model (Gemma 3's image-and-text ones) its places too.
    pub layouts: Vec<(&'static str, &'static str)>,
}

/// A decoder with its language-model head, of any family a [`Spec`] describes.
pub struct RotaryDecoder {
    embed_tokens: Embedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    /// `[vocab, hidden]`, no bias.
    lm_head: Dense,
    rotaries: Vec<Rotary>,
    spec: Spec,
}

impl RotaryDecoder {
    pub fn load(weights: &Weights, spec: Spec) -> Result<Self> {
        let (prefix, head) = spec
            .layouts
            .iter()
            .copied()
            .find(|(prefix, _)| weights.contains(&format!("{prefix}.embed_tokens.weight")))
            .unwrap_or(spec.layouts[0]);
        let model = weights.pp(prefix);
        let (h, vocab) = (spec.hidden_size, spec.vocab_size);
        let embed = model.pp("embed_tokens").get("weight", &[vocab, h])?;
        let layers = (0..spec.layers.len())
            .map(|i| DecoderLayer::load(&model.pp("layers").pp(&i.to_string()), &spec, i))
            .collect::<Result<Vec<_>>>()?;
        let lm_head = match spec.tied {
            true => embed.clone(),
            false => weights.get(head, &[vocab, h])?,
        };
        let rotaries = spec
            .ropes
            .iter()
            .map(|rope| Rotary::new(spec.head_size, rope, embed.device()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embed_tokens: Embedding::new(embed, h),
            layers,
            norm: norm(&model.pp("norm"), h, &spec)?,
            lm_head: Dense::new(lm_head, None),
            rotaries,
            spec,
        })
    }

    /// `ids`: `[b, q]` → their embeddings `[b, q, hidden]`, × √hidden for Gemma.
    fn lookup(&self, ids: &Tensor) -> Result<Tensor> {
        let x = self.embed_tokens.forward(ids)?;
        Ok(match self.spec.embed_scale {
            Some(scale) => (x * scale)?,
            None => x,
        })
    }

    /// The rotary tables of every table in the spec, for positions `seen..seen + q`.
    fn tables(&self, seen: usize, q: usize) -> Result<Vec<(Tensor, Tensor)>> {
        self.rotaries.iter().map(|r| r.tables(seen, q)).collect()
    }

    /// The rotary tables of every table in the spec for the rows of lines `fed`, each line's
    /// its own (LongRoPE's factors by each line's length).
    fn tables_of_lines(&self, fed: &[Fed]) -> Result<Vec<(Tensor, Tensor)>> {
        let table = |rotary: &Rotary| -> Result<(Tensor, Tensor)> {
            let lines = (fed.iter())
                .map(|f| rotary.tables(f.seen, f.q))
                .collect::<Result<Vec<_>>>()?;
            let (cos, sin): (Vec<Tensor>, Vec<Tensor>) = lines.into_iter().unzip();
            Ok((Tensor::cat(&cos, 0)?, Tensor::cat(&sin, 0)?))
        };
        self.rotaries.iter().map(table).collect()
    }

    /// The next-token logits of the last layer's output `[..., hidden]`, its final norm
    /// first.
    fn logits(&self, x: &Tensor) -> Result<Tensor> {
        self.head(&self.norm.forward(x)?)
    }

    /// The next-token logits of the final norm's output `[..., hidden]`.
    fn head(&self, normed: &Tensor) -> Result<Tensor> {
        soft_cap(self.lm_head.forward(normed)?, self.spec.final_softcap)
    }
}

impl CausalLm for RotaryDecoder {
    fn model_type(&self) -> &'static str {
        self.spec.model_type
    }

    fn dims(&self) -> CausalDims {
        CausalDims {
            vocab_size: self.spec.vocab_size,
            max_positions: self.spec.max_positions,
            layers: self.spec.layers.len(),
            heads: self.spec.heads,
            intermediate: self.spec.intermediate_size,
        }
    }

    fn eos(&self) -> &[u32] {
        &self.spec.eos
    }

    fn recomputes(&self, seen: usize, q: usize) -> bool {
        self.rotaries.iter().any(|r| r.switches(seen, q))
    }

    fn step(&self, ids: &Tensor, cache: &mut KvCache, keep: Keep) -> Result<StepOutput> {
        let (_, q) = ids.dims2()?;
        let seen = cache.len();
        cache.layers.resize(self.layers.len(), None);
        let tables = self.tables(seen, q)?;
        let mut x = self.lookup(ids)?;
        let mut layers = Vec::with_capacity(self.layers.len());
        for (layer, kv) in self.layers.iter().zip(cache.layers.iter_mut()) {
            let cached = Cached::Alike(kv, seen);
            let (next, trace) = layer.forward(&x, cached, &tables, keep, None, None)?;
            x = next;
            layers.push(trace);
        }
        Ok(StepOutput {
            logits: self.logits(&x.i((0, q - 1..q))?)?.squeeze(0)?,
            layers,
        })
    }

    fn step_lines(&self, feeds: &[&[u32]], caches: &mut [KvCache]) -> Result<Vec<StepOutput>> {
        let device = self.embed_tokens.embeddings().device();
        let (ids, fed) = pack(feeds, caches, self.layers.len(), device)?;
        let tables = self.tables_of_lines(&fed)?;
        let mut x = self.lookup(&ids)?;
        let mut traces = Vec::with_capacity(self.layers.len());
        for (layer, cached) in self.layers.iter().zip(Cached::lines(caches, &fed)) {
            let (next, trace) = layer.forward(&x, cached, &tables, Keep::default(), None, None)?;
            x = next;
            traces.push(trace);
        }
        unpack(&self.logits(&last_rows(&x, &fed)?)?, &traces, &fed)
    }

    fn embed_words(&self, ids: &Tensor) -> Result<Tensor> {
        self.lookup(ids)
    }

    fn next_logits(&self, words: &Tensor) -> Result<Tensor> {
        let (hidden, _) = Body::forward(self, words, Keep::default(), None)?;
        self.head(&hidden.i((.., hidden.dim(1)? - 1, ..))?)
    }

    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor> {
        let tables = self.tables(0, x.dim(1)?)?;
        let layer = &self.layers[layer];
        let cached = Cached::Alike(&mut None, 0);
        Ok(layer
            .forward(x, cached, &tables, Keep::default(), value_mask, None)?
            .0)
    }
}

/// The decoder read whole, without a cache, as a classifier's body: every position at once,
/// each seeing itself and those before it.
impl Body for RotaryDecoder {
    /// What the embedding lookup returns: with Gemma's √hidden, which transformers' lookup
    /// applies.
    fn embed_words(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.lookup(input_ids)
    }

    /// The word embeddings are what the first layer reads.
    fn embed(&self, words: &Tensor, _types: Option<&Tensor>) -> Result<Tensor> {
        Ok(words.clone())
    }

    /// The layers, then the final norm at every position.
    fn forward(
        &self,
        embedded: &Tensor,
        keep: Keep,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, Vec<LayerTrace>)> {
        let tables = self.tables(0, embedded.dim(1)?)?;
        let mut x = embedded.clone();
        let mut traces = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let cached = Cached::Alike(&mut None, 0);
            let (next, trace) = layer.forward(&x, cached, &tables, keep, None, lengths)?;
            x = next;
            traces.push(trace.keeping(keep.heads)?);
        }
        Ok((self.norm.forward(&x)?, traces))
    }

    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor> {
        CausalLm::run_layer(self, layer, x, value_mask)
    }

    fn max_tokens(&self) -> usize {
        self.spec.max_positions
    }

    fn pads_alike(&self, n: usize, to: usize) -> bool {
        self.rotaries.iter().all(|r| r.same_tables(n, to))
    }

    fn layers(&self) -> usize {
        self.layers.len()
    }

    fn intermediate_factor(&self) -> usize {
        self.spec
            .intermediate_size
            .div_ceil(self.spec.hidden_size.max(1))
    }

    fn word_table(&self) -> &Tensor {
        self.embed_tokens.embeddings()
    }
}

/// The spec's RMSNorm of `size` at `vb`.
fn norm(vb: &WeightPath, size: usize, spec: &Spec) -> Result<RmsNorm> {
    let norm = RmsNorm::load(vb, size, spec.eps)?;
    Ok(match spec.norm_plus_one {
        true => norm.plus_one()?,
        false => norm,
    })
}

/// `model.layers.<i>.*`: RMSNorm, attention, (Gemma: RMSNorm), residual; RMSNorm, gated MLP,
/// (Gemma: RMSNorm), residual.
struct DecoderLayer {
    input_layernorm: RmsNorm,
    attn: Attention,
    /// Gemma: the norm after attention.
    after_attention: Option<RmsNorm>,
    /// The norm before the MLP (`post_attention_layernorm`, Gemma's `pre_feedforward_layernorm`).
    before_mlp: RmsNorm,
    /// Gemma: the norm after the MLP.
    after_mlp: Option<RmsNorm>,
    gate_proj: Dense,
    up_proj: Dense,
    down_proj: Dense,
    gate: Gate,
    rope: usize,
}

impl DecoderLayer {
    fn load(vb: &WeightPath, spec: &Spec, index: usize) -> Result<Self> {
        let (h, inner) = (spec.hidden_size, spec.intermediate_size);
        let mlp = vb.pp("mlp");
        let bias = spec.biases.mlp;
        let (gate_proj, up_proj) = match spec.fused {
            true => {
                let both = load_linear_with(&mlp.pp("gate_up_proj"), h, 2 * inner, bias)?;
                (both.rows(0, inner)?, both.rows(inner, inner)?)
            }
            false => (
                load_linear_with(&mlp.pp("gate_proj"), h, inner, bias)?,
                load_linear_with(&mlp.pp("up_proj"), h, inner, bias)?,
            ),
        };
        let (after_attention, before_mlp, after_mlp) = match spec.sandwich {
            true => (
                Some(norm(&vb.pp("post_attention_layernorm"), h, spec)?),
                norm(&vb.pp("pre_feedforward_layernorm"), h, spec)?,
                Some(norm(&vb.pp("post_feedforward_layernorm"), h, spec)?),
            ),
            false => (
                None,
                norm(&vb.pp("post_attention_layernorm"), h, spec)?,
                None,
            ),
        };
        Ok(Self {
            input_layernorm: norm(&vb.pp("input_layernorm"), h, spec)?,
            attn: Attention::load(&vb.pp("self_attn"), spec, index)?,
            after_attention,
            before_mlp,
            after_mlp,
            gate_proj,
            up_proj,
            down_proj: load_linear_with(&mlp.pp("down_proj"), inner, h, bias)?,
            gate: spec.gate,
            rope: spec.layers[index].rope,
        })
    }

    /// `x`: `[b, q, hidden]` at the positions after `cache`'s, whose rotary tables (one per
    /// table of the spec) are `tables`; `lengths`: what [`Body::forward`] says → (`[b, q,
    /// hidden]`, the layer's trace).
    fn forward(
        &self,
        x: &Tensor,
        cache: Cached,
        tables: &[(Tensor, Tensor)],
        keep: Keep,
        value_mask: Option<&Tensor>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, LayerTrace)> {
        let normed = self.input_layernorm.forward(x)?;
        let step = Step {
            window: self.attn.window,
            scale: self.attn.scale,
            softcap: self.attn.softcap,
            keep,
            value_mask,
            lengths,
        };
        let (attended, step) = self
            .attn
            .forward(&normed, cache, step, &tables[self.rope])?;
        let (attended, after) = match &self.after_attention {
            Some(norm) => {
                let after = match keep.internals {
                    true => Some(AfterAttention {
                        weight: norm.weight().clone(),
                        inverse_rms: norm.rms(&attended)?.recip()?,
                    }),
                    false => None,
                };
                (norm.forward(&attended)?, after)
            }
            None => (attended, None),
        };
        let internals = decoder_internals(keep, x, &step.value, &self.attn.o_proj, after)?;
        let x = (x + attended)?;
        let normed = self.before_mlp.forward(&x)?;
        let gate = rules::gate(self.gate_proj.forward(&normed)?);
        let gate = rules::nonlinear(&gate, |gate| match self.gate {
            Gate::Silu => Ok(gate.silu()?),
            Gate::GeluTanh => Ok(gate.gelu()?),
        })?;
        let gated = rules::product((gate * self.up_proj.forward(&normed)?)?)?;
        let out = self.down_proj.forward(&gated)?;
        let out = match &self.after_mlp {
            Some(norm) => norm.forward(&out)?,
            None => out,
        };
        let trace = LayerTrace {
            probs: step.probs,
            probe: step.probe,
            internals,
            head_sums: None,
        };
        Ok(((x + out)?, trace))
    }
}

/// `self_attn.*`: q/k/v/o projections (or Phi-3's fused qkv); keys and values have
/// `kv_heads` heads.
struct Attention {
    q_proj: Dense,
    k_proj: Dense,
    v_proj: Dense,
    o_proj: Dense,
    /// Qwen3 and Gemma 3's norms over each head's queries and keys.
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    heads: usize,
    kv_heads: usize,
    head_size: usize,
    window: Option<usize>,
    scale: f64,
    softcap: Option<f64>,
}

impl Attention {
    fn load(vb: &WeightPath, spec: &Spec, index: usize) -> Result<Self> {
        let (h, d) = (spec.hidden_size, spec.head_size);
        let (heads, kv_heads) = (spec.heads, spec.kv_heads);
        let bias = spec.biases.qkv;
        let (q_proj, k_proj, v_proj) = match spec.fused {
            true => {
                let all =
                    load_linear_with(&vb.pp("qkv_proj"), h, (heads + 2 * kv_heads) * d, bias)?;
                let (q, kv) = (heads * d, kv_heads * d);
                (all.rows(0, q)?, all.rows(q, kv)?, all.rows(q + kv, kv)?)
            }
            false => (
                load_linear_with(&vb.pp("q_proj"), h, heads * d, bias)?,
                load_linear_with(&vb.pp("k_proj"), h, kv_heads * d, bias)?,
                load_linear_with(&vb.pp("v_proj"), h, kv_heads * d, bias)?,
            ),
        };
        let qk_norm = match spec.qk_norm {
            true => Some((
                norm(&vb.pp("q_norm"), d, spec)?,
                norm(&vb.pp("k_norm"), d, spec)?,
            )),
            false => None,
        };
        Ok(Self {
            q_proj,
            k_proj,
            v_proj,
            o_proj: load_linear_with(&vb.pp("o_proj"), heads * d, h, spec.biases.output)?,
            qk_norm,
            heads,
            kv_heads,
            head_size: d,
            window: spec.layers[index].window,
            scale: spec.query_scale,
            softcap: spec.attention_softcap,
        })
    }

    /// `x`: `[b, q, hidden]` (normed) at the step's positions → (the projected output, what
    /// the attention step yields, its values expanded to the query heads).
    fn forward(
        &self,
        x: &Tensor,
        cache: Cached,
        step: Step,
        (cos, sin): &(Tensor, Tensor),
    ) -> Result<(Tensor, Attended)> {
        let (batch, q, _) = x.dims3()?;
        let split = |t: Tensor, heads: usize| -> Result<Tensor> {
            Ok(t.reshape((batch, q, heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let mut query = split(self.q_proj.forward(x)?, self.heads)?;
        let mut key = split(self.k_proj.forward(x)?, self.kv_heads)?;
        if let Some((q_norm, k_norm)) = &self.qk_norm {
            query = q_norm.forward(&query)?;
            key = k_norm.forward(&key)?;
        }
        let query = Rotary::apply(&query, cos, sin)?;
        let key = Rotary::apply(&key, cos, sin)?;
        let value = split(self.v_proj.forward(x)?, self.kv_heads)?;
        let attended = cached_attention(&query, (key, value), cache, step, |t| self.expand(t))?;
        Ok((self.o_proj.forward(&attended.context)?, attended))
    }

    /// `[b, kv_heads, n, d]` → `[b, heads, n, d]`: query head h reads key/value head
    /// h / (heads / kv_heads), as transformers' `repeat_kv`.
    fn expand(&self, x: &Tensor) -> Result<Tensor> {
        let group = self.heads / self.kv_heads;
        if group == 1 {
            return Ok(x.clone());
        }
        let (b, kv, n, d) = x.dims4()?;
        Ok(x.unsqueeze(2)?
            .broadcast_as((b, kv, group, n, d))?
            .contiguous()?
            .reshape((b, kv * group, n, d))?)
    }
}
