//! STUB (replaced by the image-input branch): the API the pipeline is written against.

use std::path::Path;

use crate::error::{Error, Result};

/// A decoded picture: 8-bit RGB, row-major, 3 bytes a pixel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Picture {
    pub width: u32,
    pub height: u32,
    pub rgb: Vec<u8>,
}

/// pixel_values of one image: `[3, height, width]` f32, channel-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Pixels {
    pub height: usize,
    pub width: usize,
    pub values: Vec<f32>,
}

pub fn decode(_bytes: &[u8]) -> Result<Picture> {
    Err(Error::Attention("stub".into()))
}

pub fn read_picture(_path: &Path) -> Result<Picture> {
    Err(Error::Attention("stub".into()))
}

/// The most bytes an image file may hold.
pub const IMAGE_LIMIT: u64 = 256 << 20;

pub struct ImageProcessor;

impl ImageProcessor {
    pub fn load(_path: &Path) -> Result<Self> {
        Ok(Self)
    }

    pub fn view(&self, picture: &Picture) -> Result<Picture> {
        Ok(picture.clone())
    }

    pub fn process(&self, _picture: &Picture) -> Result<Pixels> {
        Err(Error::Attention("stub".into()))
    }
}
