//! The flow engine and rollout on seeded random attention (L = 12, residual added):
//! `cargo bench --bench flow`. The graphs come from benches/support/random_attention.rs,
//! the same generator the flow tests check against petgraph.

#[path = "support/random_attention.rs"]
mod random_attention;

use std::time::Duration;

use bert_explain::relevance::{flow, flow_from_every_position, max_flow, rollout};
use candle_core::{Device, Tensor};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

const LAYERS: usize = 12;
const SIZES: [usize; 4] = [16, 32, 64, 128];

fn engine(c: &mut Criterion) {
    let mut group = c.benchmark_group("max_flow");
    for n in SIZES {
        let graph = random_attention::augmented_attention(LAYERS, n, n as u64);
        // All 12 layers, from the middle position to the first input token.
        group.bench_with_input(BenchmarkId::from_parameter(n), &graph, |b, g| {
            b.iter(|| max_flow(g, n / 2, 0))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("flow_one_position");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for n in SIZES {
        let graph = random_attention::augmented_attention(LAYERS, n, n as u64);
        group.bench_with_input(BenchmarkId::from_parameter(n), &graph, |b, g| {
            b.iter(|| flow(g, n / 2))
        });
    }
    group.finish();

    // The cost of --all-positions: n times the problems of one position.
    let mut group = c.benchmark_group("flow_all_positions");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for n in [16, 32] {
        let graph = random_attention::augmented_attention(LAYERS, n, n as u64);
        group.bench_with_input(BenchmarkId::from_parameter(n), &graph, |b, g| {
            b.iter(|| flow_from_every_position(g))
        });
    }
    group.finish();
}

fn rollout_bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("rollout");
    for n in SIZES {
        let graph = random_attention::augmented_attention(LAYERS, n, n as u64);
        let flat: Vec<f64> = graph.iter().flat_map(|m| m.data.iter().copied()).collect();
        let tensor = Tensor::from_vec(flat, (LAYERS, n, n), &Device::Cpu).unwrap();
        group.bench_with_input(BenchmarkId::from_parameter(n), &tensor, |b, t| {
            b.iter(|| rollout(t, n / 2).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, engine, rollout_bench);
criterion_main!(benches);
