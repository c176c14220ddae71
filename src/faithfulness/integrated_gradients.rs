//! Integrated gradients (Sundararajan et al. 2017) of p(class), from the baseline that puts
//! the blank's word embedding at every position, summed over the embedding: each
//! token's signed share of `p − p(baseline)`, with its completeness.

use candle_core::{Tensor, Var, D};

use super::importance::{host, probability, probability_in, scalar, PAIRS_PER_BATCH};
use super::{gradient_at_block, Attributed, Attribution, Check, Completeness, Score, Subject};
use crate::error::Result;

pub struct IntegratedGradients;

impl Attribution for IntegratedGradients {
    fn name(&self) -> &'static str {
        "integrated gradients"
    }

    fn scores(&self) -> &'static [Score] {
        &[Score {
            name: "integrated_gradients",
            label: "int. grad.",
            headline: true,
            signed: true,
        }]
    }

    fn attribute(&self, subject: &Subject) -> Result<Attributed> {
        let (values, check) = integrated_gradients(subject)?;
        Ok(Attributed {
            scores: vec![values],
            check: Some(Check::Completeness(check)),
        })
    }
}

/// Integrated gradients of p(`query.id`) at `target` along the straight path from the
/// blank's word embedding at every position to the input's, with the Gauss–Legendre
/// rule of `query.steps` points (as captum's default): per token, the attributions summed
/// over the embedding, and their completeness. The points go through the model a few at a
/// time (fewer the longer the input: each keeps every layer's activations for the backward
/// pass, or one layer's where the predictor runs its layers one at a time), so memory stays
/// that of a small batch whatever the steps.
fn integrated_gradients(subject: &Subject) -> Result<(Vec<f64>, Completeness)> {
    let (model, query, target) = (subject.model, subject.query, subject.target);
    let (words, types) = (&subject.words.input, &subject.words.types);
    let device = words.device();
    let n = subject.words.len().max(1);
    let points_at_a_time = (PAIRS_PER_BATCH / 4 / (n * n)).clamp(1, 10);
    let baseline = subject
        .words
        .blank
        .broadcast_as(words.shape())?
        .contiguous()?;
    let path = (words - &baseline)?;
    let (nodes, weights) = gauss_legendre(query.steps);
    let dtype = words.dtype();
    let mut total = path.zeros_like()?;
    for (alphas, weights) in nodes
        .chunks(points_at_a_time)
        .zip(weights.chunks(points_at_a_time))
    {
        let k = alphas.len();
        let alphas = Tensor::new(alphas, device)?
            .to_dtype(dtype)?
            .reshape((k, 1, 1))?;
        let points = Var::from_tensor(&baseline.broadcast_add(&path.broadcast_mul(&alphas)?)?)?;
        let block = model.embed(
            points.as_tensor(),
            &types.broadcast_as((k, n))?.contiguous()?,
        )?;
        let weights = Tensor::new(weights, device)?.to_dtype(dtype)?;
        // Σ_k w_k p(point k), differentiated at the block, then through it to the points.
        let (at_block, _) = gradient_at_block(model, &block, target, |logits| {
            Ok(probability_in(logits, query.id)?
                .reshape(k)?
                .mul(&weights)?
                .sum_all()?)
        })?;
        let through = (&block * &at_block)?.sum_all()?;
        let grad = through.backward()?.get(points.as_tensor()).cloned();
        let grad = grad.ok_or_else(|| {
            candle_core::Error::Msg("no gradient reached the path's embeddings".into())
        })?;
        total = (total + grad.sum_keepdim(0)?)?;
    }
    let attributions = host(&(total * &path)?.sum(D::Minus1)?.squeeze(0)?)?;
    let blank = scalar(&probability(model, &baseline, types, target, query.id)?)?;
    let sum: f64 = attributions.iter().sum();
    let difference = subject.probability - blank;
    let check = Completeness {
        steps: query.steps,
        sum,
        difference,
        delta: sum - difference,
    };
    Ok((attributions, check))
}

/// Gauss–Legendre quadrature on [0, 1] with `n` points: the nodes and their weights, which
/// sum to 1 (numpy's `leggauss` moved to [0, 1], as captum uses it). Each node is a root of
/// the Legendre polynomial P_n, found by Newton's method from the usual first guess.
pub fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    // P_n(x) and P_n'(x) by the three-term recurrence.
    let legendre = |x: f64| -> (f64, f64) {
        let (mut p, mut below) = (1.0, 0.0);
        for k in 0..n {
            let next = ((2 * k + 1) as f64 * x * p - k as f64 * below) / (k + 1) as f64;
            below = p;
            p = next;
        }
        (p, n as f64 * (x * p - below) / (x * x - 1.0))
    };
    (0..n)
        .map(|i| {
            let mut x = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
            for _ in 0..100 {
                let (p, dp) = legendre(x);
                let step = p / dp;
                x -= step;
                if step.abs() < 1e-16 {
                    break;
                }
            }
            let (_, dp) = legendre(x);
            ((1.0 + x) / 2.0, 1.0 / ((1.0 - x * x) * dp * dp))
        })
        .unzip()
}

#[cfg(test)]
mod tests {
    use super::gauss_legendre;

    #[test]
    fn gauss_legendre_integrates_polynomials_of_degree_below_2n_exactly() {
        for n in [1, 3, 50] {
            let (nodes, weights) = gauss_legendre(n);
            assert!(nodes.iter().all(|x| (0.0..=1.0).contains(x)));
            for k in 0..2 * n.min(10) {
                let integral: f64 = nodes
                    .iter()
                    .zip(&weights)
                    .map(|(x, w)| w * x.powi(k as i32))
                    .sum();
                assert!(
                    (integral - 1.0 / (k + 1) as f64).abs() < 1e-13,
                    "n {n}, x^{k}: {integral}"
                );
            }
        }
        // numpy.polynomial.legendre.leggauss(2) moved to [0, 1]: (1 ± 1/√3) / 2, weights 1/2.
        let (nodes, weights) = gauss_legendre(2);
        let low = (1.0 - 1.0 / 3f64.sqrt()) / 2.0;
        assert!((nodes[1] - low).abs() < 1e-15 && (weights[0] - 0.5).abs() < 1e-15);
    }
}
