//! Rotary position embeddings (Su et al. 2021, RoFormer) in Llama's "rotate half" layout,
//! from plain tensor ops (candle-nn's fused `rope` has no backward pass), with the config's
//! `rope_theta`, the scalings that keep the frequencies closed-form (none, linear, llama3,
//! LongRoPE's short and long factors) and a rotated part narrower than the head (Phi-3's
//! `partial_rotary_factor`).

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
    /// LongRoPE (Phi-3): each frequency divided by its own factor, the short ones while a
    /// sequence fits in `original` positions and the long ones past it; cosines and sines
    /// multiplied by `attention_factor`.
    LongRope {
        short: Vec<f64>,
        long: Vec<f64>,
        original: usize,
        attention_factor: f64,
    },
}

/// One rotary table's settings: the base, the scaling and how many of a head's dimensions
/// rotate.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    pub theta: f64,
    pub scaling: RopeScaling,
    /// The fraction of each head that rotates (`partial_rotary_factor`, 1 for all of it).
    pub partial: f64,
}

impl Rope {
    /// Whether these settings fit heads `head_dim` wide: an even rotated part, and with
    /// LongRoPE one factor per frequency. The error says what does not fit.
    pub fn check(&self, head_dim: usize) -> std::result::Result<(), String> {
        let rotated = (head_dim as f64 * self.partial) as usize;
        if rotated == 0 || !rotated.is_multiple_of(2) {
            return Err(format!(
                "the rotated part of a head ({rotated} of head_dim {head_dim}) must be even and positive"
            ));
        }
        if let RopeScaling::LongRope { short, long, .. } = &self.scaling {
            if short.len() != rotated / 2 || long.len() != rotated / 2 {
                return Err(format!(
                    "rope scaling \"longrope\" has {} short and {} long factors, but a head \
                     rotates {rotated} dimensions, which need {} each",
                    short.len(),
                    long.len(),
                    rotated / 2
                ));
            }
        }
        Ok(())
    }
}

/// One rotary table's settings from a config.json. `params`: the parameters of one layer
/// type (Gemma 3's `rope_parameters.sliding_attention`), else the config's own
/// (`rope_parameters`, or the older `rope_theta`, `rope_scaling` and `partial_rotary_factor`
/// at the top); `theta` where neither names one.
pub fn rope_of(
    config: &Value,
    params: Option<&Value>,
    theta: f64,
) -> std::result::Result<Rope, String> {
    // The top-level fields count for the config's own parameters, not for one layer type's.
    let top = |key: &str| match params {
        Some(_) => None,
        None => config.get(key),
    };
    let params = params.or_else(|| config.get("rope_parameters").filter(|v| v.is_object()));
    let theta = params
        .and_then(|p| p.get("rope_theta"))
        .or_else(|| top("rope_theta"))
        .and_then(Value::as_f64)
        .unwrap_or(theta);
    if !(theta > 1.0 && theta.is_finite()) {
        return Err(format!("rope_theta {theta} is not a number above 1"));
    }
    let partial = params
        .and_then(|p| p.get("partial_rotary_factor"))
        .or_else(|| top("partial_rotary_factor"))
        .and_then(Value::as_f64)
        .unwrap_or(1.0);
    if !(partial > 0.0 && partial <= 1.0) {
        return Err(format!("partial_rotary_factor {partial} is not in (0, 1]"));
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
        "longrope" | "su" => long_rope(config, &scaling)?,
        other => {
            return Err(format!(
                "rope scaling {other:?} is not supported (only none, \"linear\", \"llama3\" and \"longrope\")"
            ))
        }
    };
    Ok(Rope {
        theta,
        scaling,
        partial,
    })
}

/// LongRoPE's settings as transformers reads them: `original_max_position_embeddings` at the
/// top of the config before the one in the parameters, and unless the parameters give an
/// `attention_factor`, √(1 + ln s / ln original) with s = `factor`, or else
/// max_position_embeddings / original (1 where s ≤ 1).
fn long_rope(config: &Value, params: &Value) -> std::result::Result<RopeScaling, String> {
    let factors = |key: &str| -> std::result::Result<Vec<f64>, String> {
        let list = params.get(key).and_then(Value::as_array);
        let values: Option<Vec<f64>> = list.and_then(|l| l.iter().map(Value::as_f64).collect());
        values
            .filter(|v| !v.is_empty() && v.iter().all(|x| *x > 0.0 && x.is_finite()))
            .ok_or_else(|| {
                format!("rope scaling \"longrope\" needs {key}, a list of positive numbers")
            })
    };
    let positive = |v: Option<&Value>| {
        v.and_then(Value::as_f64)
            .filter(|x| *x > 0.0 && x.is_finite())
    };
    let context = positive(config.get("max_position_embeddings"));
    let original = positive(config.get("original_max_position_embeddings"))
        .or_else(|| positive(params.get("original_max_position_embeddings")))
        .or(context)
        .filter(|x| *x >= 2.0)
        .ok_or("rope scaling \"longrope\" needs original_max_position_embeddings of 2 or more")?;
    let factor = positive(params.get("factor"))
        .or_else(|| context.map(|c| c / original))
        .unwrap_or(1.0);
    let attention_factor = match positive(params.get("attention_factor")) {
        Some(given) => given,
        None if factor <= 1.0 => 1.0,
        None => (1.0 + factor.ln() / original.ln()).sqrt(),
    };
    Ok(RopeScaling::LongRope {
        short: factors("short_factor")?,
        long: factors("long_factor")?,
        original: original as usize,
        attention_factor,
    })
}

/// The rotation frequencies of one head width.
pub struct Rotary {
    /// `[rotated / 2]` f32.
    inv_freq: Tensor,
    /// LongRoPE: the frequencies of sequences longer than the given number of positions.
    long: Option<(Tensor, usize)>,
    /// What the cosines and sines are multiplied by (LongRoPE's attention factor, else 1).
    attention_factor: f64,
}

impl Rotary {
    /// The tables of heads `head_dim` wide, of which the first `head_dim · rope.partial`
    /// (rounded down) rotate.
    pub fn new(head_dim: usize, rope: &Rope, device: &Device) -> Result<Self> {
        let rotated = (head_dim as f64 * rope.partial) as usize;
        let frequencies = |divisors: Option<&[f64]>| -> Result<Tensor> {
            let values: Vec<f32> = (0..rotated / 2)
                .map(|i| {
                    let f = 1.0 / rope.theta.powf(2.0 * i as f64 / rotated as f64);
                    let f = match divisors {
                        Some(d) => f / d.get(i).copied().unwrap_or(1.0),
                        None => scale(f, &rope.scaling),
                    };
                    f as f32
                })
                .collect();
            Ok(Tensor::new(values, device)?)
        };
        Ok(match &rope.scaling {
            RopeScaling::LongRope {
                short,
                long,
                original,
                attention_factor,
            } => Self {
                inv_freq: frequencies(Some(short))?,
                long: Some((frequencies(Some(long))?, *original)),
                attention_factor: *attention_factor,
            },
            _ => Self {
                inv_freq: frequencies(None)?,
                long: None,
                attention_factor: 1.0,
            },
        })
    }

    /// Whether a step from `seen` cached positions with `q` new ones is the first past the
    /// original context of LongRoPE, where the keys in the cache were rotated with the short
    /// factors and every position now takes the long ones.
    pub fn switches(&self, seen: usize, q: usize) -> bool {
        matches!(self.long, Some((_, original)) if seen > 0 && seen <= original && seen + q > original)
    }

    /// Whether the first `n` positions of `to` (from none seen) take the tables that `n`
    /// alone does: not where LongRoPE's long factors start between the two.
    pub fn same_tables(&self, n: usize, to: usize) -> bool {
        !matches!(self.long, Some((_, original)) if n <= original && to > original)
    }

    /// The cosines and sines, each `[q, rotated]`, for positions `seen..seen + q`. LongRoPE
    /// takes its long factors once `seen + q` passes the original context, as transformers
    /// does at each step (so keys already cached keep the rotation they were made with).
    pub fn tables(&self, seen: usize, q: usize) -> Result<(Tensor, Tensor)> {
        let inv_freq = match &self.long {
            Some((long, original)) if seen + q > *original => long,
            _ => &self.inv_freq,
        };
        let positions = Tensor::arange(seen as u32, (seen + q) as u32, inv_freq.device())?
            .to_dtype(DType::F32)?
            .unsqueeze(1)?;
        let freqs = positions.broadcast_mul(&inv_freq.unsqueeze(0)?)?;
        let angles = Tensor::cat(&[&freqs, &freqs], D::Minus1)?;
        let (cos, sin) = (angles.cos()?, angles.sin()?);
        Ok(match self.attention_factor {
            1.0 => (cos, sin),
            factor => ((cos * factor)?, (sin * factor)?),
        })
    }

    /// `x`: `[b, heads, q, head_dim]`, `cos`/`sin` from [`Rotary::tables`] → the same shape:
    /// the first `rotated` dimensions r become r·cos + rotate_half(r)·sin with
    /// rotate_half(r) = (−r₂, r₁) over their two halves; the rest pass unchanged.
    pub fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let (width, rotated) = (x.dim(D::Minus1)?, cos.dim(D::Minus1)?);
        let part = x.narrow(D::Minus1, 0, rotated)?;
        let half = rotated / 2;
        let (first, second) = (
            part.narrow(D::Minus1, 0, half)?,
            part.narrow(D::Minus1, half, half)?,
        );
        let turned = Tensor::cat(&[&second.neg()?, &first], D::Minus1)?;
        let rotated_part = (part.broadcast_mul(cos)? + turned.broadcast_mul(sin)?)?;
        if rotated == width {
            return Ok(rotated_part);
        }
        let rest = x.narrow(D::Minus1, rotated, width - rotated)?;
        Ok(Tensor::cat(&[&rotated_part, &rest], D::Minus1)?)
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
        // Its factors are per frequency (Rotary::new).
        RopeScaling::LongRope { .. } => freq,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_config_spellings_and_refuses_yarn() {
        let v5 = serde_json::json!({"rope_parameters": {"rope_type": "linear", "factor": 2.0,
            "rope_theta": 500.0}});
        let rope = |config: &Value| rope_of(config, None, 10_000.0);
        let v5 = rope(&v5).unwrap();
        assert_eq!(
            (v5.theta, v5.scaling),
            (500.0, RopeScaling::Linear { factor: 2.0 })
        );
        let v4 = serde_json::json!({"rope_theta": 1e6, "rope_scaling": null,
            "partial_rotary_factor": 0.5});
        let v4 = rope(&v4).unwrap();
        assert_eq!(
            (v4.theta, v4.scaling, v4.partial),
            (1e6, RopeScaling::None, 0.5)
        );
        let yarn = serde_json::json!({"rope_scaling": {"type": "yarn", "factor": 4.0}});
        assert!(rope(&yarn).unwrap_err().contains("yarn"));
    }

    #[test]
    fn position_zero_is_the_identity_and_norms_are_kept() {
        let device = Device::Cpu;
        let rope = Rope {
            theta: 10_000.0,
            scaling: RopeScaling::None,
            partial: 1.0,
        };
        let rotary = Rotary::new(4, &rope, &device).unwrap();
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
