//! What is explained, read into what the model takes (SPEC §10): a text through the
//! checkpoint's tokenizer into token ids, or an image through its preprocessor_config.json
//! into pixel values, its tokens named `[CLS]`, `[DIST]`, `[REG1]`…, `patch r0 c0`…. The
//! rest of the pipeline sees a line's tokens and what the model reads ([`Feed`]).

use std::sync::Arc;

use candle_core::{Device, Tensor};

use crate::error::{Error, Result};
use crate::image::{Decoded, ImageProcessor, Picture, Pixels};
use crate::model::vision::Patches;
use crate::report::ImageInfo;
use crate::tokens::{Encoding, TextTokenizer};

/// What to explain.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    Text(&'a str),
    /// A decoded image (with the colour its file calls transparent, which a processor that
    /// converts to RGB paints white), preprocessed as the checkpoint says.
    Image(&'a Decoded),
    /// An image already preprocessed: pixel values as the model reads them.
    Pixels(&'a Pixels),
}

/// What the model reads for one line besides its tokens.
#[derive(Debug, Clone)]
pub(super) enum Feed {
    /// The encoding's ids and token types.
    Ids,
    Pixels {
        pixels: Pixels,
        image: ImageInfo,
        /// The picture as the model saw it (`None` for pixel values given as they are).
        picture: Option<Arc<Picture>>,
    },
}

impl Feed {
    /// The image's size and grid, for the report.
    pub(super) fn image(&self) -> Option<ImageInfo> {
        match self {
            Feed::Ids => None,
            Feed::Pixels { image, .. } => Some(image.clone()),
        }
    }

    /// The picture as the model saw it, for figures.
    pub(super) fn picture(&self) -> Option<Arc<Picture>> {
        match self {
            Feed::Ids => None,
            Feed::Pixels { picture, .. } => picture.clone(),
        }
    }
}

/// `[b, channels, H, W]` pixel values of `lines`, which must share a shape.
pub(super) fn stack_pixels(lines: &[&Pixels], channels: usize, device: &Device) -> Result<Tensor> {
    let (height, width) = (lines[0].height, lines[0].width);
    if lines.iter().any(|p| (p.height, p.width) != (height, width)) {
        return Err(Error::Attention(
            "images of different sizes cannot share a forward pass".into(),
        ));
    }
    let values: Vec<f32> = lines
        .iter()
        .flat_map(|p| p.values.iter().copied())
        .collect();
    Ok(Tensor::from_vec(
        values,
        (lines.len(), channels, height, width),
        device,
    )?)
}

/// A checkpoint's reader: its tokenizer, or its image processor.
pub(super) enum Reader {
    Text(Box<TextTokenizer>),
    Image {
        processor: ImageProcessor,
        patches: Patches,
    },
}

impl Reader {
    /// The tokenizer, for what only a text has (words, pairs, blanks).
    pub(super) fn text(&self) -> Result<&TextTokenizer> {
        match self {
            Reader::Text(tokenizer) => Ok(tokenizer),
            Reader::Image { .. } => Err(Error::InputKind(
                "an image model has no vocabulary: words, pairs and blank tokens are a text's"
                    .into(),
            )),
        }
    }

    /// The mask token's id (`None`: an image, or a vocabulary without one).
    pub(super) fn mask_id(&self) -> Option<u32> {
        self.text().ok().and_then(TextTokenizer::mask_id)
    }

    /// Vocabulary entry `id` (an image model's classes are labels, never tokens).
    pub(super) fn token(&self, id: u32) -> String {
        match self {
            Reader::Text(tokenizer) => tokenizer.token(id),
            Reader::Image { .. } => id.to_string(),
        }
    }

    /// An image as tokens (special: every one before the patches) and what the model reads.
    pub(super) fn image(&self, input: Input) -> Result<(Encoding, Feed)> {
        let Reader::Image { processor, patches } = self else {
            return Err(Error::InputKind(
                "this checkpoint reads text: give it a text, not an image".into(),
            ));
        };
        let (pixels, width, height, seen) = match input {
            Input::Image(decoded) => {
                let picture = processor.prepare(decoded.clone());
                let view = processor.view(&picture)?;
                (
                    processor.pixels(&view),
                    picture.width as usize,
                    picture.height as usize,
                    Some(Arc::new(view)),
                )
            }
            Input::Pixels(pixels) => {
                let expected = patches.channels * pixels.height * pixels.width;
                if pixels.values.len() != expected {
                    return Err(Error::InputKind(format!(
                        "{} pixel values for {} channels of {} × {}: give channels × height × width values",
                        pixels.values.len(),
                        patches.channels,
                        pixels.height,
                        pixels.width
                    )));
                }
                (pixels.clone(), pixels.width, pixels.height, None)
            }
            Input::Text(_) => {
                return Err(Error::InputKind(
                    "this checkpoint reads images: give it an image file, not a text".into(),
                ))
            }
        };
        if pixels.values.iter().any(|v| !v.is_finite()) {
            return Err(Error::NotFinite {
                what: "the pixel values".into(),
            });
        }
        let grid = [pixels.height / patches.size, pixels.width / patches.size];
        let mut tokens = patches.leading.clone();
        let lead = tokens.len();
        for r in 0..grid[0] {
            tokens.extend((0..grid[1]).map(|c| format!("patch r{r} c{c}")));
        }
        let n = tokens.len();
        let encoding = Encoding {
            ids: Vec::new(),
            type_ids: vec![0; n],
            special: (0..n).map(|i| i < lead).collect(),
            tokens,
        };
        let image = ImageInfo {
            width,
            height,
            grid,
            patch: patches.size,
        };
        let feed = Feed::Pixels {
            pixels,
            image,
            picture: seen,
        };
        Ok((encoding, feed))
    }
}
