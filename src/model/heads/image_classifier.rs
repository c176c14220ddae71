//! Image classification (`*ForImageClassification`, DeiT's `...WithTeacher`): one label for
//! the image, from projections of the last hidden states that the family pools its own way
//! (ViT: the class token; DeiT with its teacher: the class token's and the distillation
//! token's logits averaged; DINOv2: the class token beside the mean of the patches).

use candle_core::{IndexOp, Module, Tensor};

use super::{Head, HeadKind, Predicts, Reads, Task};
use crate::checkpoint::WeightPath;
use crate::error::{Error, Result};
use crate::linalg::Dense;
use crate::model::config::EncoderConfig;

pub const TASK: Task = Task {
    name: "image-classification",
    predicts: Predicts::Labels,
    reads: Reads::Whole,
    options: &["label"],
    models: "image classifiers (labels)",
};

/// One way a family's checkpoints classify: projections whose logits are averaged.
pub struct ImageClassifierNames {
    pub outputs: &'static [(&'static str, Pool)],
}

/// What a projection onto the labels reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// Token i's hidden state.
    Token(usize),
    /// The class token's beside the mean of the patches' (after any register tokens).
    ClassAndPatches,
}

/// Wanted where `architectures` names an image classifier, or, without `architectures`,
/// where the tensors hold one of the family's.
pub const KIND: HeadKind = HeadKind {
    task: TASK,
    wanted: |found| {
        let Some(image) = &found.family.image else {
            return false;
        };
        let named = found
            .config
            .architecture_ends_with("ForImageClassification")
            || found
                .config
                .architecture_ends_with("ForImageClassificationWithTeacher");
        named || (found.config.architectures.is_empty() && held(found.root, image).is_some())
    },
    load: |found| {
        let image = found
            .family
            .image
            .as_ref()
            .expect("wanted by an image family");
        // Where none is held whole, the first one's loading names the missing tensor.
        let names = held(found.root, image).unwrap_or(&image.classifiers[0]);
        Ok(Box::new(ImageClassifier::load(
            found.root,
            names,
            found.config,
        )?))
    },
};

/// The first of the family's classifiers whose every projection the checkpoint holds.
fn held<'a>(
    vb: &WeightPath,
    image: &'a crate::model::family::ImageNames,
) -> Option<&'a ImageClassifierNames> {
    image
        .classifiers
        .iter()
        .find(|names| (names.outputs.iter()).all(|(name, _)| vb.pp(name).contains("weight")))
}

pub struct ImageClassifier {
    outputs: Vec<(Dense, Pool)>,
    labels: usize,
    /// Tokens before the patches.
    skip: usize,
}

impl ImageClassifier {
    fn load(vb: &WeightPath, names: &ImageClassifierNames, config: &EncoderConfig) -> Result<Self> {
        let hidden = config.hidden_size;
        let labels = config.num_labels.unwrap_or(config.id2label.len().max(2));
        let outputs = names
            .outputs
            .iter()
            .map(|&(name, pool)| {
                let width = match pool {
                    Pool::Token(_) => hidden,
                    Pool::ClassAndPatches => 2 * hidden,
                };
                let output = vb.pp(name);
                let dense = Dense::new(
                    output.get("weight", &[labels, width])?,
                    Some(output.get("bias", &[labels])?),
                );
                Ok((dense, pool))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            outputs,
            labels,
            skip: 1 + config.num_register_tokens,
        })
    }
}

impl Head for ImageClassifier {
    fn task(&self) -> Task {
        TASK
    }

    fn labels(&self) -> usize {
        self.labels
    }

    /// `hidden`: every token's, `[b, n, hidden]` → logits `[b, labels]`.
    fn forward(&self, hidden: &Tensor) -> Result<Tensor> {
        let n = hidden.dim(1)?;
        let mut sum: Option<Tensor> = None;
        for (dense, pool) in &self.outputs {
            let read = match pool {
                Pool::Token(i) => hidden.i((.., *i, ..))?,
                Pool::ClassAndPatches => {
                    let patches = hidden.narrow(1, self.skip, n - self.skip)?.mean(1)?;
                    Tensor::cat(&[hidden.i((.., 0, ..))?, patches], 1)?
                }
            };
            let logits = dense.forward(&read)?;
            sum = Some(match sum {
                Some(sum) => (sum + logits)?,
                None => logits,
            });
        }
        let sum =
            sum.ok_or_else(|| Error::Attention("an image classifier without outputs".into()))?;
        Ok((sum / self.outputs.len() as f64)?)
    }
}
