//! The body seam (DESIGN.md: family × head): what embeds the ids and runs the layer stack,
//! whatever the block. BERT's post-LayerNorm block serves every encoder family that only
//! names its tensors differently ([`PostNormBody`]); a family whose block differs brings a
//! body of its own (the decoders' [`crate::model::decoder::RotaryDecoder`], read as a
//! classifier), one file in `families/`.

use candle_core::Tensor;

use super::config::EncoderConfig;
use super::embeddings::{Embeddings, InputEmbeddings};
use super::family::Family;
use super::layer::Layer;
use super::{Keep, LayerTrace};
use crate::checkpoint::WeightPath;
use crate::error::Result;

/// Embeddings and layers of one checkpoint.
pub trait Body: Send + Sync {
    /// `input_ids`: `[b, n]` u32 → the word embeddings `[b, n, width]`: what the embedding
    /// lookup returns, the input that gradients are taken with respect to.
    fn embed_words(&self, input_ids: &Tensor) -> Result<Tensor>;

    /// From the word embeddings to what the first layer reads, `[b, n, hidden]` (positions,
    /// token types `[b, n]` where the body has them, norms, projections, scales).
    fn embed(&self, words: &Tensor, types: Option<&Tensor>) -> Result<Tensor>;

    /// The layers (and any final norm) on the embedding block's output → the last hidden
    /// states `[b, n, hidden]` and one trace per layer, first layer first. `lengths`: each
    /// line's tokens where lines of different lengths were padded on the right; each line's
    /// attention then runs on its own tokens alone (`attention::line_by_line`), the rest of
    /// the layers on the whole batch.
    fn forward(
        &self,
        embedded: &Tensor,
        keep: Keep,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, Vec<LayerTrace>)>;

    /// Layer `layer` (0-based) alone on its input `x` (`[b, n, hidden]`), each position's
    /// value vectors multiplied by `value_mask` (`[b, n]`) → its output `[b, n, hidden]`.
    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor>;

    /// How many tokens the positions allow.
    fn max_tokens(&self) -> usize;

    /// An image model's patches and the tokens before them ([`crate::model::vision`]);
    /// `None` for a body that reads token ids.
    fn patches(&self) -> Option<super::vision::Patches> {
        None
    }

    /// An image model's body, whose embedding block splits in two for importance scores
    /// ([`super::vision::VisionBody::tokens`], [`super::vision::VisionBody::place`]); `None`
    /// for a body that reads token ids.
    fn vision(&self) -> Option<&super::vision::VisionBody> {
        None
    }

    /// Whether a line of `n` tokens padded on the right to `to` gives the same values at its
    /// own positions as it does alone (LongRoPE's frequencies depend on the whole length).
    fn pads_alike(&self, _n: usize, _to: usize) -> bool {
        true
    }

    /// How many layers a forward pass runs (and keeps a trace of).
    fn layers(&self) -> usize;

    /// How many times wider the feed-forward block is than the hidden states (rounded up).
    fn intermediate_factor(&self) -> usize;

    /// `[vocab, width]`: the word embeddings, which a head may share.
    fn word_table(&self) -> &Tensor;

    /// Whether the layers see the word embeddings only through a normalisation of them
    /// alone (nothing added before it: ModernBERT, DeBERTa-v3): the model then answers e and
    /// αe alike, and gradient × input at the words, the derivative along e, is zero.
    fn scale_free_words(&self) -> bool {
        false
    }

    /// Whether a LayerNorm's mean comes first on every path from the word embeddings (every
    /// post-norm encoder, ModernBERT): the model then answers e and e + c·1 alike, and the
    /// sum of the gradient's components at the words is zero.
    fn shift_free_words(&self) -> bool {
        false
    }
}

/// The layers one after another from `embedded` (`[b, n, hidden]`), each run by `forward`
/// and its trace kept as `keep.heads` says → the last layer's output and the traces.
pub(crate) fn run_layers<L>(
    layers: &[L],
    embedded: &Tensor,
    keep: Keep,
    forward: impl Fn(&L, &Tensor) -> Result<(Tensor, LayerTrace)>,
) -> Result<(Tensor, Vec<LayerTrace>)> {
    let mut hidden = embedded.clone();
    let mut traces = Vec::with_capacity(layers.len());
    for layer in layers {
        let (next, trace) = forward(layer, &hidden)?;
        hidden = next;
        traces.push(trace.keeping(keep.heads)?);
    }
    Ok((hidden, traces))
}

/// BERT's body: embeddings, then post-LayerNorm layers, with the family's tensor names (or a
/// family's own embeddings and attention logits, [`PostNormBody::new`]).
pub struct PostNormBody {
    embeddings: Box<dyn InputEmbeddings>,
    layers: Vec<Layer>,
}

impl PostNormBody {
    /// A body of a family's own parts.
    pub fn new(embeddings: Box<dyn InputEmbeddings>, layers: Vec<Layer>) -> Self {
        Self { embeddings, layers }
    }

    /// `root`: the checkpoint's tensors under the family's base prefix.
    pub fn load(root: &WeightPath, family: &Family, config: &EncoderConfig) -> Result<Self> {
        let embeddings = Embeddings::load(root, &family.embeddings, config)?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(&root.pp(&(family.layer.prefix)(i)), &family.layer, config))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self::new(Box::new(embeddings), layers))
    }
}

impl Body for PostNormBody {
    fn embed_words(&self, input_ids: &Tensor) -> Result<Tensor> {
        self.embeddings.words(input_ids)
    }

    fn embed(&self, words: &Tensor, types: Option<&Tensor>) -> Result<Tensor> {
        self.embeddings.forward(words, types)
    }

    fn forward(
        &self,
        embedded: &Tensor,
        keep: Keep,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor, Vec<LayerTrace>)> {
        run_layers(&self.layers, embedded, keep, |layer, x| {
            layer.forward(x, keep, None, lengths)
        })
    }

    fn run_layer(&self, layer: usize, x: &Tensor, value_mask: Option<&Tensor>) -> Result<Tensor> {
        Ok(self.layers[layer]
            .forward(x, Keep::default(), value_mask, None)?
            .0)
    }

    fn max_tokens(&self) -> usize {
        self.embeddings.max_tokens()
    }

    fn layers(&self) -> usize {
        self.layers.len()
    }

    fn intermediate_factor(&self) -> usize {
        self.layers.first().map_or(1, Layer::intermediate_factor)
    }

    fn word_table(&self) -> &Tensor {
        self.embeddings.word_table()
    }

    fn scale_free_words(&self) -> bool {
        self.embeddings.scale_free()
    }

    fn shift_free_words(&self) -> bool {
        self.embeddings.shift_free()
    }
}
