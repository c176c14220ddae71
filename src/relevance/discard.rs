//! vit-explain's `discard_ratio` (Gildenblat, jacobgil/vit-explain): before rollout and flow,
//! the smallest entries of each fused layer are set to zero, so that the weakest links stop
//! spreading relevance. The fraction counts every entry of the n × n matrix, and entry
//! (0, 0), the class token's own, is never zeroed. The residual and each row's
//! normalisation come after ([`crate::attention::with_residual`]), so a layer stays
//! row-stochastic; raw attention is the layer as it was.

use candle_core::{Device, Tensor};

use crate::error::{Error, Result};

/// `fused` (`[L, n, n]` f64 on the host) with the `⌊ratio · n²⌋` smallest entries of each
/// layer zeroed (ties: the first in row-major order first), entry (0, 0) kept.
pub fn discard(fused: &Tensor, ratio: f64) -> Result<Tensor> {
    if !(0.0..1.0).contains(&ratio) {
        return Err(Error::Attention(format!(
            "a discard ratio of {ratio} is not in [0, 1): give the fraction of each layer's \
             entries to set to zero, such as 0.9"
        )));
    }
    let (layers, n, _) = fused.dims3()?;
    let count = (ratio * (n * n) as f64).floor() as usize;
    let mut values: Vec<f64> = fused.flatten_all()?.to_vec1()?;
    if count == 0 {
        return Ok(fused.clone());
    }
    let mut order: Vec<usize> = Vec::with_capacity(n * n);
    for layer in values.chunks_exact_mut(n * n) {
        order.clear();
        order.extend(0..n * n);
        let key = |&k: &usize| (layer[k], k);
        order.select_nth_unstable_by(count - 1, |a, b| {
            let (va, ka) = key(a);
            let (vb, kb) = key(b);
            va.total_cmp(&vb).then(ka.cmp(&kb))
        });
        for &k in &order[..count] {
            if k != 0 {
                layer[k] = 0.0;
            }
        }
    }
    Ok(Tensor::from_vec(values, (layers, n, n), &Device::Cpu)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(values: Vec<f64>, n: usize) -> Tensor {
        Tensor::from_vec(values, (1, n, n), &Device::Cpu).unwrap()
    }

    #[test]
    fn zeroes_the_smallest_entries_but_the_class_tokens_own() {
        let fused = layer(vec![0.1, 0.9, 0.3, 0.7], 2);
        let kept = |ratio| -> Vec<f64> {
            discard(&fused, ratio)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        assert_eq!(kept(0.0), [0.1, 0.9, 0.3, 0.7]);
        assert_eq!(
            kept(0.25),
            [0.1, 0.9, 0.3, 0.7],
            "(0, 0) is the smallest, and kept"
        );
        assert_eq!(kept(0.5), [0.1, 0.9, 0.0, 0.7]);
        assert_eq!(kept(0.75), [0.1, 0.9, 0.0, 0.0]);
    }

    #[test]
    fn ties_go_in_row_major_order() {
        let fused = layer(vec![0.5, 0.2, 0.2, 0.2], 2);
        let out: Vec<f64> = discard(&fused, 0.5)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(out, [0.5, 0.0, 0.0, 0.2]);
    }

    #[test]
    fn refuses_a_ratio_outside_zero_to_one() {
        let fused = layer(vec![1.0], 1);
        for ratio in [-0.1, 1.0, f64::NAN] {
            assert!(discard(&fused, ratio).is_err(), "{ratio}");
        }
    }
}
