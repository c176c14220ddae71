//! Seeded random attention graphs, shared by the flow tests and the benches (included with
//! `#[path]`, so both measure and check the very same graphs).
#![allow(dead_code)]

use bert_explain::attention::Matrix;

/// xorshift64*: small, fast, and the same sequence on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // Any seed, including 0, gives a non-zero state.
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Softmax attention of one head, `n × n`: row i is `softmax(sharpness · z)` with z
/// standard normal, so rows are row-stochastic and, like trained heads, uneven.
pub fn softmax_attention(rng: &mut Rng, n: usize, sharpness: f64) -> Matrix {
    let mut data: Vec<f64> = (0..n * n).map(|_| sharpness * rng.normal()).collect();
    for row in data.chunks_mut(n) {
        let top = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        row.iter_mut().for_each(|v| *v = (*v - top).exp());
        let sum: f64 = row.iter().sum();
        row.iter_mut().for_each(|v| *v /= sum);
    }
    Matrix { n, data }
}

/// `layers` matrices `Â_l`, each `n × n`: random softmax attention with the residual added
/// (α = 0.5), as the explainer builds them. The same seed gives the same graph.
pub fn augmented_attention(layers: usize, n: usize, seed: u64) -> Vec<Matrix> {
    let mut rng = Rng::new(seed);
    (0..layers)
        .map(|_| softmax_attention(&mut rng, n, 2.0).with_residual(0.5))
        .collect()
}

/// `layers` arbitrary capacity matrices, each `n × n`, uniform in [0, 1) with about
/// `zeros` of the entries exactly zero: graphs no attention produces, for the engine alone.
pub fn sparse_capacities(layers: usize, n: usize, zeros: f64, seed: u64) -> Vec<Matrix> {
    let mut rng = Rng::new(seed);
    (0..layers)
        .map(|_| Matrix {
            n,
            data: (0..n * n)
                .map(|_| {
                    if rng.uniform() < zeros {
                        0.0
                    } else {
                        rng.uniform()
                    }
                })
                .collect(),
        })
        .collect()
}
