//! Rotary position embeddings (Su et al. 2021, RoFormer) in Llama's "rotate half" layout,
//! from plain tensor ops (candle-nn's fused `rope` has no backward pass), with the config's
//! `rope_theta` and the scalings that keep the frequencies closed-form: none, linear, llama3.

use candle_core::{DType, Device, Tensor, D};
use serde_json::Value;

use crate::error::Result;

/// How the frequencies are rescaled for a longer context (`rope_scaling` / `rope_parameters`).
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    None,
    /// Positions divided by `factor` (equivalently, every frequency).
    Linear {
        factor: f64,
    },
    /// Llama 3.1+: low frequencies divided by `factor`, high ones kept, a smooth ramp between.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: f64,
    },
}

/// `rope_theta` and the scaling from a config.json: transformers 5's `rope_parameters`, or
/// the older top-level `rope_theta` and `rope_scaling`. Errors say what is unsupported.
pub fn rope_from_config(config: &Value) -> std::result::Result<(f64, RopeScaling), String> {
    let params = config.get("rope_parameters").filter(|v| v.is_object());
    let theta = params
        .and_then(|p| p.get("rope_theta"))
        .or_else(|| config.get("rope_theta"))
        .and_then(Value::as_f64)
        .unwrap_or(10_000.0);
    if !(theta > 1.0 && theta.is_finite()) {
        return Err(format!("rope_theta {theta} is not a number above 1"));
    }
    let scaling = params
        .or_else(|| config.get("rope_scaling").filter(|v| v.is_object()))
        .cloned()
        .unwrap_or(Value::Null);
    let kind = scaling
        .get("rope_type")
        .or_else(|| scaling.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let number = |key: &str| -> std::result::Result<f64, String> {
        scaling
            .get(key)
            .and_then(Value::as_f64)
            .filter(|x| *x > 0.0 && x.is_finite())
            .ok_or_else(|| format!("rope scaling {kind:?} needs a positive {key}"))
    };
    let scaling = match kind {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear {
            factor: number("factor")?,
        },
        "llama3" => RopeScaling::Llama3 {
            factor: number("factor")?,
            low_freq_factor: number("low_freq_factor")?,
            high_freq_factor: number("high_freq_factor")?,
            original_max_position_embeddings: number("original_max_position_embeddings")?,
        },
        other => {
            return Err(format!(
                "rope scaling {other:?} is not supported (only none, \"linear\" and \"llama3\")"
            ))
        }
    };
    Ok((theta, scaling))
}

/// The rotation frequencies of one head width.
pub struct Rotary {
    /// `[head_dim / 2]` f32.
    inv_freq: Tensor,
}

impl Rotary {
    pub fn new(
        head_dim: usize,
        theta: f64,
        scaling: &RopeScaling,
        device: &Device,
    ) -> Result<Self> {
        let inv_freq: Vec<f32> = (0..head_dim / 2)
            .map(|i| {
                let f = 1.0 / theta.powf(2.0 * i as f64 / head_dim as f64);
                scale(f, scaling) as f32
            })
            .collect();
        Ok(Self {
            inv_freq: Tensor::new(inv_freq, device)?,
        })
    }

    /// The cosines and sines, each `[q, head_dim]`, for positions `seen..seen + q`.
    pub fn tables(&self, seen: usize, q: usize) -> Result<(Tensor, Tensor)> {
        let positions = Tensor::arange(seen as u32, (seen + q) as u32, self.inv_freq.device())?
            .to_dtype(DType::F32)?
            .unsqueeze(1)?;
        let freqs = positions.broadcast_mul(&self.inv_freq.unsqueeze(0)?)?;
        let angles = Tensor::cat(&[&freqs, &freqs], D::Minus1)?;
        Ok((angles.cos()?, angles.sin()?))
    }

    /// `x`: `[b, heads, q, head_dim]`, `cos`/`sin` from [`Rotary::tables`] → the same shape,
    /// x·cos + rotate_half(x)·sin with rotate_half(x) = (−x₂, x₁) over the two halves.
    pub fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let half = x.dim(D::Minus1)? / 2;
        let (first, second) = (
            x.narrow(D::Minus1, 0, half)?,
            x.narrow(D::Minus1, half, half)?,
        );
        let rotated = Tensor::cat(&[&second.neg()?, &first], D::Minus1)?;
        Ok((x.broadcast_mul(cos)? + rotated.broadcast_mul(sin)?)?)
    }
}

/// One frequency under the scaling (transformers' `_compute_*_parameters`).
fn scale(freq: f64, scaling: &RopeScaling) -> f64 {
    match *scaling {
        RopeScaling::None => freq,
        RopeScaling::Linear { factor } => freq / factor,
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings: context,
        } => {
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            if wavelen < context / high_freq_factor {
                freq
            } else if wavelen > context / low_freq_factor {
                freq / factor
            } else {
                let smooth =
                    (context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                (1.0 - smooth) * freq / factor + smooth * freq
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_config_spellings_and_refuses_yarn() {
        let v5 = serde_json::json!({"rope_parameters": {"rope_type": "linear", "factor": 2.0,
            "rope_theta": 500.0}});
        assert_eq!(
            rope_from_config(&v5).unwrap(),
            (500.0, RopeScaling::Linear { factor: 2.0 })
        );
        let v4 = serde_json::json!({"rope_theta": 1e6, "rope_scaling": null});
        assert_eq!(rope_from_config(&v4).unwrap(), (1e6, RopeScaling::None));
        let yarn = serde_json::json!({"rope_scaling": {"type": "yarn", "factor": 4.0}});
        assert!(rope_from_config(&yarn).unwrap_err().contains("yarn"));
    }

    #[test]
    fn position_zero_is_the_identity_and_norms_are_kept() {
        let device = Device::Cpu;
        let rotary = Rotary::new(4, 10_000.0, &RopeScaling::None, &device).unwrap();
        let (cos, sin) = rotary.tables(0, 3).unwrap();
        assert_eq!(cos.dims(), &[3, 4]);
        let x = Tensor::new(&[1.0f32, 2.0, 3.0, 4.0], &device)
            .unwrap()
            .broadcast_as((1, 1, 3, 4))
            .unwrap();
        let y = Rotary::apply(&x, &cos, &sin).unwrap();
        let rows: Vec<Vec<f32>> = y.squeeze(0).unwrap().squeeze(0).unwrap().to_vec2().unwrap();
        assert_eq!(rows[0], [1.0, 2.0, 3.0, 4.0]);
        let norm = |r: &[f32]| r.iter().map(|v| v * v).sum::<f32>();
        assert!((norm(&rows[2]) - 30.0).abs() < 1e-4);
    }
}
