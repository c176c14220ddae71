//! An encoder's forward pass that keeps every layer's attention probabilities (candle's
//! models discard them, and they are what the explainer needs): a [`Body`] (BERT's, shared by
//! RoBERTa, XLM-R, DistilBERT, ALBERT, ELECTRA, told apart by [`Family`]: their tensor
//! names; or a family's own, such as a decoder read as a classifier) and the task head
//! config.json asks for.

pub(crate) mod attention;
pub mod body;
pub mod causal;
pub mod config;
pub mod decoder;
pub mod decoder_config;
mod embeddings;
pub mod families;
pub mod family;
pub mod heads;
mod layer;
pub(crate) mod norm;
mod rotary;
pub mod rules;
pub mod vision;

use std::path::Path;

use candle_core::{IndexOp, Tensor};

use crate::attention::{fuse_heads, HeadFusion};
use crate::checkpoint::Weights;
use crate::error::{Error, Result};
pub use body::Body;
use body::PostNormBody;
pub use config::{Activation, EncoderConfig};
pub use family::{BodyKind, Family};
use heads::{load_head, Found, Head};
pub use heads::{Predicts, Reads, Task};
pub(crate) use layer::activate;

/// An encoder of any family with its task head, when the checkpoint has one.
pub struct Model {
    family: &'static Family,
    body: Box<dyn Body>,
    head: Option<Box<dyn Head>>,
}

/// What a forward pass keeps besides the attention probabilities, each part computed only
/// when asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keep {
    /// Each layer's [`LayerInternals`].
    pub internals: bool,
    /// Each layer's [`LayerTrace::probe`], for gradients with respect to attention.
    pub probes: bool,
    /// What of each layer's heads [`LayerTrace::probs`] holds once the next layer runs.
    pub heads: Heads,
}

/// What of a layer's heads its trace keeps: every head, or their fusion (a long text's maps
/// need only the fused `[L, n, n]`, and every head of every layer would be `L · H` times that).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Heads {
    #[default]
    Every,
    Fused(HeadFusion),
}

impl LayerTrace {
    /// The trace with `probs` fused over its heads as `heads` says, `[b, 1, n, n]`
    /// ([`fuse_heads`]: in f64 but on Metal, read where the heads lie without a widened copy
    /// of them; every head as it was for [`Heads::Every`]), and `head_sums` set.
    pub fn keeping(self, heads: Heads) -> Result<Self> {
        let Heads::Fused(fusion) = heads else {
            return Ok(self);
        };
        Ok(Self {
            head_sums: Some(self.probs.sum((2, 3))?),
            probs: fuse_heads(&self.probs, fusion)?,
            ..self
        })
    }
}

/// What one layer exposes.
pub struct LayerTrace {
    /// `[b, heads, n, n]`: row i is the softmax over the positions that i attends to.
    pub probs: Tensor,
    /// With [`Keep::probes`]: zeros added to `probs`; their gradient is ∂s/∂A.
    pub probe: Option<candle_core::Var>,
    /// With [`Keep::internals`].
    pub internals: Option<LayerInternals>,
    /// Where `probs` holds the heads' reduction ([`LayerTrace::keeping`]): each head's sum,
    /// `[b, heads]`, finite exactly where the head is, so that a head that is not can be named.
    pub head_sums: Option<Tensor>,
}

/// What SPEC §8's mixing matrices read from a layer, beyond attention.
pub struct LayerInternals {
    /// `[b, n, hidden]`: X, the input of the attention block.
    pub input: Tensor,
    /// `[b, heads, n, hidden]`: f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h, each head's value
    /// vectors through its slice of the output projection (no output bias).
    pub head_values: Tensor,
    /// `[hidden]`: γ of the norm after the attention block (post-norm layers; `None` for
    /// pre-norm ones, whose norm comes before attention).
    pub norm_weight: Option<Tensor>,
    /// `[b, n]`: σ_i = sqrt(var(z_i) + eps), the scale that norm computed for position i.
    pub norm_scale: Option<Tensor>,
    /// `[hidden]`: β of that norm.
    pub norm_bias: Option<Tensor>,
    /// `[hidden]`: b_O, the output projection's bias.
    pub output_bias: Option<Tensor>,
    /// `[b, n]`: what row i's attention output is multiplied by before the residual (Gemma's
    /// norm after attention: 1 / rms_i, its weight already in `head_values`); `None`: 1.
    pub row_scale: Option<Tensor>,
}

/// What one forward pass over a batch of b sequences yields.
pub struct ModelOutput {
    /// `[b, classes]`: the head's logits at the explained position (vocabulary words or
    /// labels); `None` without a head.
    pub logits: Option<Tensor>,
    /// One trace per layer, first layer first.
    pub layers: Vec<LayerTrace>,
}

impl Model {
    /// Builds the model from the checkpoint's tensors (`config_path`: its config.json, which
    /// a body of the family's own may read), with the first head of [`heads::HEADS`] the
    /// checkpoint wants (by `architectures`, else by its tensors).
    pub fn load(
        weights: &Weights,
        family: &'static Family,
        config: &EncoderConfig,
        config_path: &Path,
    ) -> Result<Self> {
        let root = weights.pp("");
        let body: Box<dyn Body> = match family.body {
            BodyKind::PostNorm => Box::new(PostNormBody::load(&root, family, config)?),
            BodyKind::Own(load) => load(weights, config_path)?,
        };
        let head = load_head(&Found {
            root: &root,
            family,
            config,
            word_table: body.word_table(),
        })?;
        Ok(Self { family, body, head })
    }

    pub fn family(&self) -> &'static Family {
        self.family
    }

    /// What the head predicts ([`Task::ENCODER`] without one).
    pub fn task(&self) -> Task {
        self.head.as_ref().map_or(Task::ENCODER, |head| head.task())
    }

    /// How many labels the head chooses from (0 for words, or without a head).
    pub fn labels(&self) -> usize {
        self.head.as_ref().map_or(0, |head| head.labels())
    }

    /// The name of label `id` (`config`: the checkpoint's).
    pub fn label(&self, id: usize, config: &EncoderConfig) -> String {
        match &self.head {
            Some(head) => head.label(id, config),
            None => config.label_name(id),
        }
    }

    /// How many tokens the positions allow.
    pub fn max_tokens(&self) -> usize {
        self.body.max_tokens()
    }

    /// An image model's patches and the tokens before them; `None` for a text model.
    pub fn patches(&self) -> Option<vision::Patches> {
        self.body.patches()
    }

    /// An image model's body ([`Body::vision`]); `None` for a text model.
    pub fn vision(&self) -> Option<&vision::VisionBody> {
        self.body.vision()
    }

    /// Whether a line of `n` tokens may be padded to `to` in a batch ([`Body::pads_alike`]).
    pub fn pads_alike(&self, n: usize, to: usize) -> bool {
        self.body.pads_alike(n, to)
    }

    /// How many layers a forward pass runs.
    pub fn layers(&self) -> usize {
        self.body.layers()
    }

    /// Layer `layer` (0-based) alone on its input `x` (`[b, n, hidden]`), each position's
    /// value vectors multiplied by `value_mask` (`[b, n]`) → its output `[b, n, hidden]`.
    pub fn run_layer(
        &self,
        layer: usize,
        x: &Tensor,
        value_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        self.body.run_layer(layer, x, value_mask)
    }

    /// How many times wider the feed-forward block is than the hidden states.
    pub fn intermediate_factor(&self) -> usize {
        self.body.intermediate_factor()
    }

    /// Whether gradient × input at the word embeddings is zero by construction
    /// ([`Body::scale_free_words`]).
    pub fn scale_free_words(&self) -> bool {
        self.body.scale_free_words()
    }

    /// Whether the sum of the gradient's components at the word embeddings is zero by
    /// construction ([`Body::shift_free_words`]).
    pub fn shift_free_words(&self) -> bool {
        self.body.shift_free_words()
    }

    /// The device the weights live on.
    pub fn device(&self) -> &candle_core::Device {
        self.body.word_table().device()
    }

    /// `input_ids`: `[b, n]` u32 → the word embeddings, `[b, n, width]`, the input that
    /// gradients are taken with respect to.
    pub fn embed_words(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.body.embed_words(input_ids)
    }

    /// `input_ids`: `[b, n]` u32, each sequence filling all n positions (no padding);
    /// `types`: `[b, n]` u32 token types (`None`: all 0); `at` < n is where a masked-LM or
    /// discriminator head looks (a classifier reads its first or last token).
    pub fn forward(
        &self,
        input_ids: &Tensor,
        types: Option<&Tensor>,
        at: usize,
        keep: Keep,
    ) -> Result<ModelOutput> {
        self.forward_words(&self.embed_words(input_ids)?, types, at, keep)
    }

    /// The same from word embeddings `[b, n, width]`, so that gradients can reach them.
    pub fn forward_words(
        &self,
        words: &Tensor,
        types: Option<&Tensor>,
        at: usize,
        keep: Keep,
    ) -> Result<ModelOutput> {
        self.forward_embedded(&self.embed(words, types)?, at, keep)
    }

    /// The embedding block's output from word embeddings: what the first layer reads,
    /// `[b, n, hidden]`.
    pub fn embed(&self, words: &Tensor, types: Option<&Tensor>) -> Result<Tensor> {
        self.body.embed(words, types)
    }

    /// One forward pass over lines of different lengths: `input_ids` and `types` `[b, n]`,
    /// line i's `lengths[i]` tokens first and padding after them; `at[i]` is where line i's
    /// masked-LM or discriminator head looks (a classifier reads its first or last real
    /// token, or the mean of its real tokens). Each line's attention runs on its own tokens
    /// alone ([`Body::forward`]), so its positions take the values it gets alone and its
    /// `[L, n_i, n_i]` can be cut out of the traces; the logits are `[b, classes]`, each
    /// line's head run on its own row (a product of one row, as the line alone).
    pub fn forward_padded(
        &self,
        input_ids: &Tensor,
        types: &Tensor,
        lengths: &[usize],
        at: &[usize],
        keep: Keep,
    ) -> Result<ModelOutput> {
        if keep.probes || keep.internals {
            return Err(Error::Attention(
                "a padded batch keeps the attention only; run lines one at a time for gradients or a layer's internals".into(),
            ));
        }
        let embedded = self.embed(&self.embed_words(input_ids)?, Some(types))?;
        let (hidden, layers) = self.body.forward(&embedded, keep, Some(lengths))?;
        let logits = match &self.head {
            Some(head) => {
                let rows = (0..lengths.len())
                    .map(|i| {
                        let line = hidden.i(i)?;
                        let row = match head.task().reads {
                            Reads::Target => line.i(at[i])?,
                            Reads::First => line.i(0)?,
                            Reads::Last => line.i(lengths[i] - 1)?,
                            Reads::Mean => line.narrow(0, 0, lengths[i])?.mean(0)?,
                            Reads::Whole => line.narrow(0, 0, lengths[i])?,
                        };
                        head.forward(&row.unsqueeze(0)?)
                    })
                    .collect::<Result<Vec<_>>>()?;
                Some(Tensor::cat(&rows, 0)?)
            }
            None => None,
        };
        Ok(ModelOutput { logits, layers })
    }

    /// The layers and the head from the embedding block's output ([`Model::embed`]).
    pub fn forward_embedded(
        &self,
        embedded: &Tensor,
        at: usize,
        keep: Keep,
    ) -> Result<ModelOutput> {
        let (hidden, layers) = self.body.forward(embedded, keep, None)?;
        let logits = self.head_logits(&hidden, at)?;
        Ok(ModelOutput { logits, layers })
    }

    /// The head's logits `[b, classes]` from the last hidden states `[b, n, hidden]` (after
    /// any final norm), read where the head reads; `None` without a head.
    pub fn head_logits(&self, hidden: &Tensor, at: usize) -> Result<Option<Tensor>> {
        let Some(head) = &self.head else {
            return Ok(None);
        };
        let read = match head.task().reads {
            Reads::Target => hidden.i((.., at, ..))?,
            Reads::First => hidden.i((.., 0, ..))?,
            Reads::Last => hidden.i((.., hidden.dim(1)? - 1, ..))?,
            Reads::Mean => hidden.mean(1)?,
            Reads::Whole => hidden.clone(),
        };
        Ok(Some(head.forward(&read)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(values: Vec<f32>) -> LayerTrace {
        let probs = Tensor::from_vec(values, (1, 2, 2, 2), &candle_core::Device::Cpu).unwrap();
        LayerTrace {
            probs,
            probe: None,
            internals: None,
            head_sums: None,
        }
    }

    #[test]
    fn heads_are_reduced_entry_by_entry_and_each_heads_sum_kept() {
        let heads = vec![0.5, 0.5, 1.0, 0.0, 0.25, 0.75, 0.0, 1.0];
        let mean = trace(heads.clone())
            .keeping(Heads::Fused(HeadFusion::Mean))
            .unwrap()
            .probs;
        assert_eq!(mean.dims(), &[1, 1, 2, 2]);
        let mean: Vec<f64> = mean.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(mean, [0.375, 0.625, 0.5, 0.5]);
        let max = trace(heads.clone())
            .keeping(Heads::Fused(HeadFusion::Max))
            .unwrap()
            .probs;
        let max: Vec<f64> = max.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(max, [0.5, 0.75, 1.0, 1.0]);
        let every = trace(heads.clone()).keeping(Heads::Every).unwrap().probs;
        assert_eq!(every.dims(), &[1, 2, 2, 2]);
        let mut bad = heads;
        bad[4] = f32::NAN;
        let sums = trace(bad)
            .keeping(Heads::Fused(HeadFusion::Min))
            .unwrap()
            .head_sums
            .unwrap();
        assert_eq!(sums.dims(), &[1, 2]);
        let sums: Vec<f32> = sums.flatten_all().unwrap().to_vec1().unwrap();
        assert!(sums[0] == 2.0 && sums[1].is_nan(), "{sums:?}");
    }
}
