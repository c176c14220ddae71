//! LayerNorm and RMSNorm from plain tensor ops, so that gradients flow through them
//! (candle-nn's fused kernels have no backward pass, and input gradients need one).

use candle_core::{Tensor, D};

use super::rules;
use crate::checkpoint::WeightPath;
use crate::error::Result;

/// `LayerNorm.weight` and `LayerNorm.bias` over the last dimension.
pub struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    pub fn load(vb: &WeightPath, size: usize, eps: f64) -> Result<Self> {
        Self::load_with(vb, size, eps, true)
    }

    /// With a bias where `bias` says so, else none (a zero shift; ModernBERT's norms).
    pub fn load_with(vb: &WeightPath, size: usize, eps: f64, bias: bool) -> Result<Self> {
        let weight = vb.get("weight", &[size])?;
        let shift = match bias {
            true => vb.get("bias", &[size])?,
            false => weight.zeros_like()?,
        };
        Ok(Self::new(weight, shift, eps))
    }

    pub fn new(weight: Tensor, bias: Tensor, eps: f64) -> Self {
        Self { weight, bias, eps }
    }

    /// γ, the scale applied after normalising.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// β, the shift applied last.
    pub fn bias(&self) -> &Tensor {
        &self.bias
    }

    /// `x`: `[..., size]` → `[...]`: σ = sqrt(var(x) + eps) of each vector (the population
    /// variance, as the norm uses).
    pub fn scale(&self, x: &Tensor) -> Result<Tensor> {
        let centred = x.broadcast_sub(&x.mean_keepdim(D::Minus1)?)?;
        let variance = centred.sqr()?.mean(D::Minus1)?;
        Ok((variance + self.eps)?.sqrt()?)
    }

    /// `x`: `[..., size]` → the same shape, each vector normalised then scaled and shifted.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let centred = x.broadcast_sub(&x.mean_keepdim(D::Minus1)?)?;
        let variance = centred.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = centred.broadcast_div(&rules::scale((variance + self.eps)?.sqrt()?))?;
        Ok(normed
            .broadcast_mul(&self.weight)?
            .broadcast_add(&self.bias)?)
    }
}

/// RMSNorm (Zhang & Sennrich 2019) as Llama uses it: `weight` only, no centring, no bias.
pub struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    pub fn load(vb: &WeightPath, size: usize, eps: f64) -> Result<Self> {
        Ok(Self {
            weight: vb.get("weight", &[size])?,
            eps,
        })
    }

    /// Gemma's RMSNorm, which multiplies by `1 + weight`.
    pub fn plus_one(self) -> Result<Self> {
        Ok(Self {
            weight: (self.weight + 1.0)?,
            eps: self.eps,
        })
    }

    /// The factor each vector is multiplied by after normalising, `[size]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// `x`: `[..., size]` → `[...]`: sqrt(mean(x²) + eps) of each vector.
    pub fn rms(&self, x: &Tensor) -> Result<Tensor> {
        Ok((x.sqr()?.mean(D::Minus1)? + self.eps)?.sqrt()?)
    }

    /// `x`: `[..., size]` → the same shape: x / sqrt(mean(x²) + eps) · weight.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mean_square = x.sqr()?.mean_keepdim(D::Minus1)?;
        let normed = x.broadcast_div(&rules::scale((mean_square + self.eps)?.sqrt()?))?;
        Ok(normed.broadcast_mul(&self.weight)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Module};

    #[test]
    fn matches_candles_fused_layer_norm() {
        let device = Device::Cpu;
        let x = Tensor::new(&[[[1.0f32, -2.0, 0.5, 3.0], [0.0, 0.1, 0.2, 0.3]]], &device).unwrap();
        let weight = Tensor::new(&[1.0f32, 0.5, 2.0, -1.0], &device).unwrap();
        let bias = Tensor::new(&[0.1f32, 0.2, 0.3, 0.4], &device).unwrap();
        let ours = LayerNorm {
            weight: weight.clone(),
            bias: bias.clone(),
            eps: 1e-12,
        };
        let theirs = candle_nn::LayerNorm::new(weight, bias, 1e-12);
        let a: Vec<f32> = ours
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let b: Vec<f32> = theirs
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() < 1e-6, "{a:?} vs {b:?}");
        }
        assert_eq!(ours.forward(&x).unwrap().dims(), &[1, 2, 4]);
    }

    #[test]
    fn rms_norm_matches_candles_fused_kernel() {
        let device = Device::Cpu;
        let x = Tensor::new(&[[[1.0f32, -2.0, 0.5, 3.0], [0.0, 0.1, 0.2, 0.3]]], &device).unwrap();
        let weight = Tensor::new(&[1.0f32, 0.5, 2.0, -1.0], &device).unwrap();
        let ours = RmsNorm {
            weight: weight.clone(),
            eps: 1e-6,
        };
        let theirs = candle_nn::RmsNorm::new(weight, 1e-6);
        let flat = |t: Tensor| -> Vec<f32> { t.flatten_all().unwrap().to_vec1().unwrap() };
        let (a, b) = (
            flat(ours.forward(&x).unwrap()),
            flat(theirs.forward(&x).unwrap()),
        );
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() < 1e-6, "{a:?} vs {b:?}");
        }
    }
}
