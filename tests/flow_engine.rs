//! The flow engine against an independent general max-flow (petgraph's Dinic on an
//! ordinary graph), on hand-computed graphs, and against itself: parallel against serial,
//! every position against one position at a time.

#[path = "../benches/support/random_attention.rs"]
mod random_attention;

use std::ops::ControlFlow;
use std::sync::Mutex;

use bert_explain::attention::Matrix;
use bert_explain::relevance::{
    flow, flow_from_every_position, flow_from_every_position_with, flow_with, max_flow,
};
use bert_explain::Error;
use petgraph::algo::dinics;
use petgraph::graph::{DiGraph, NodeIndex};
use proptest::prelude::*;

/// Both sides compute in f64 from the same capacities; they differ only in rounding.
const TOLERANCE: f64 = 1e-9;

/// The layered graph as an ordinary directed graph: node `(k, i)` is `k * n + i`.
fn petgraph_max_flow(capacities: &[Matrix], source: usize, sink: usize) -> f64 {
    let n = capacities[0].n;
    let layers = capacities.len();
    let mut graph = DiGraph::<(), f64>::new();
    let nodes: Vec<NodeIndex> = (0..(layers + 1) * n).map(|_| graph.add_node(())).collect();
    for (k, m) in capacities.iter().enumerate() {
        for i in 0..n {
            for j in 0..n {
                if m.get(i, j) > 0.0 {
                    graph.add_edge(nodes[(k + 1) * n + i], nodes[k * n + j], m.get(i, j));
                }
            }
        }
    }
    dinics(&graph, nodes[layers * n + source], nodes[sink]).0
}

fn matrix(n: usize, data: &[f64]) -> Matrix {
    Matrix {
        n,
        data: data.to_vec(),
    }
}

/// Layered capacities in [0, 1] with many exact zeros, `layers × n × n`.
fn capacities() -> impl Strategy<Value = Vec<Matrix>> {
    (1usize..=5, 1usize..=7).prop_flat_map(|(layers, n)| {
        let entry = prop_oneof![2 => Just(0.0), 5 => 0.0..1.0f64, 1 => Just(1.0)];
        proptest::collection::vec(proptest::collection::vec(entry, n * n), layers)
            .prop_map(move |layers| layers.into_iter().map(|d| matrix(n, &d)).collect())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn max_flow_agrees_with_petgraph(caps in capacities(), source in 0usize..7, sink in 0usize..7) {
        let n = caps[0].n;
        let (source, sink) = (source % n, sink % n);
        let got = max_flow(&caps, source, sink);
        let want = petgraph_max_flow(&caps, source, sink);
        prop_assert!((got - want).abs() <= TOLERANCE, "{got} vs petgraph {want}");
    }

    #[test]
    fn flow_agrees_with_petgraph_on_random_attention(layers in 1usize..=6, n in 1usize..=10, seed in any::<u64>()) {
        let graph = random_attention::augmented_attention(layers, n, seed);
        let target = seed as usize % n;
        let rows = flow(&graph, target);
        prop_assert_eq!(rows.len(), layers);
        for (l, row) in rows.iter().enumerate() {
            prop_assert_eq!(row.len(), n);
            let raw: Vec<f64> = (0..n).map(|j| petgraph_max_flow(&graph[..=l], target, j)).collect();
            let total: f64 = raw.iter().sum();
            for (got, want) in row.iter().zip(&raw) {
                prop_assert!((got - want / total).abs() <= TOLERANCE, "layer {}: {got} vs {}", l + 1, want / total);
            }
        }
    }
}

#[test]
fn sparse_graphs_agree_with_petgraph() {
    for (trial, zeros) in [0.0, 0.3, 0.6, 0.85].into_iter().enumerate() {
        let caps = random_attention::sparse_capacities(6, 12, zeros, trial as u64);
        for (source, sink) in [(0, 0), (3, 7), (11, 2)] {
            let got = max_flow(&caps, source, sink);
            let want = petgraph_max_flow(&caps, source, sink);
            assert!(
                (got - want).abs() <= TOLERANCE,
                "zeros {zeros}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn two_layers_by_hand() {
    // Paths from (2,1) to (0,2) run through one middle node each:
    // min(0.2, 0.5) + min(0.3, 0.1) + min(0.5, 0.25) = 0.2 + 0.1 + 0.25.
    let below = matrix(3, &[0.3, 0.2, 0.5, 0.6, 0.3, 0.1, 0.25, 0.5, 0.25]);
    let above = matrix(3, &[1.0, 0.0, 0.0, 0.2, 0.3, 0.5, 0.0, 0.0, 1.0]);
    let caps = [below, above];
    assert!((max_flow(&caps, 1, 2) - 0.55).abs() < 1e-15);
    // To (0,0): min(0.2, 0.3) + min(0.3, 0.6) + min(0.5, 0.25) = 0.75; to (0,1):
    // min(0.2, 0.2) + min(0.3, 0.3) + min(0.5, 0.5) = 1.
    let row = &flow(&caps, 1)[1];
    let total = 0.75 + 1.0 + 0.55;
    for (got, want) in row.iter().zip([0.75 / total, 1.0 / total, 0.55 / total]) {
        assert!((got - want).abs() < 1e-15, "{row:?}");
    }
    // A source that only keeps to itself passes on what its own column below carries.
    assert_eq!(flow(&caps, 0)[1], vec![0.3, 0.2, 0.5]);
}

#[test]
fn a_layer_of_zeros_stops_all_flow() {
    let caps = [
        matrix(2, &[0.5, 0.5, 0.5, 0.5]),
        matrix(2, &[0.0; 4]),
        matrix(2, &[0.5, 0.5, 0.5, 0.5]),
    ];
    assert_eq!(max_flow(&caps, 0, 1), 0.0);
    // Nothing reaches the inputs: the row stays zero rather than dividing by zero.
    assert_eq!(flow(&caps, 0)[2], vec![0.0, 0.0]);
}

/// Larger graphs than the property tests reach, where the engine's per-sink bounds, its
/// chains of live nodes and its arcs back up all come into play: every map of every layer
/// against petgraph, from the first, the middle and the last position.
#[test]
fn larger_graphs_agree_with_petgraph_from_every_layer() {
    for (seed, n) in [(3, 24), (4, 31)] {
        let graph = random_attention::augmented_attention(7, n, seed);
        for target in [0, n / 2, n - 1] {
            let rows = flow(&graph, target);
            for (l, row) in rows.iter().enumerate() {
                let raw: Vec<f64> = (0..n)
                    .map(|j| petgraph_max_flow(&graph[..=l], target, j))
                    .collect();
                let total: f64 = raw.iter().sum();
                for (j, (got, want)) in row.iter().zip(&raw).enumerate() {
                    assert!(
                        (got - want / total).abs() <= TOLERANCE,
                        "n {n} target {target} layer {} sink {j}: {got} vs {}",
                        l + 1,
                        want / total
                    );
                }
            }
        }
    }
}

#[test]
fn every_position_reports_its_progress_to_the_end() {
    let graph = random_attention::augmented_attention(3, 7, 5);
    let seen = Mutex::new(Vec::new());
    let all = flow_from_every_position_with(&graph, &|done, total| {
        seen.lock().unwrap().push((done, total));
        ControlFlow::Continue(())
    });
    assert_eq!(all.unwrap(), flow_from_every_position(&graph));
    // In order, though the sinks are done on several threads: even a progress that takes
    // its time over some counts sees them one at a time.
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen, (1..=21).map(|done| (done, 21)).collect::<Vec<_>>());
    let seen = Mutex::new(Vec::new());
    let graph = random_attention::augmented_attention(4, 64, 3);
    flow_with(&graph, 9, &|done, total| {
        std::thread::sleep(std::time::Duration::from_micros(300 * (done % 3) as u64));
        seen.lock().unwrap().push((done, total));
        ControlFlow::Continue(())
    })
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen, (1..=64).map(|done| (done, 64)).collect::<Vec<_>>());
}

/// A progress that asks to stop at its `at`-th call, recording every call.
fn stop_at(
    at: usize,
    seen: &Mutex<Vec<usize>>,
) -> impl Fn(usize, usize) -> ControlFlow<()> + Sync + '_ {
    move |done, _| {
        seen.lock().unwrap().push(done);
        match done >= at {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    }
}

#[test]
fn a_flow_stops_when_its_progress_asks_and_fails_as_interrupted() {
    let graph = random_attention::augmented_attention(6, 40, 11);
    // One position: 40 sinks, stopped at the third; the sinks under way on other threads end.
    let seen = Mutex::new(Vec::new());
    let one = flow_with(&graph, 5, &stop_at(3, &seen));
    assert!(matches!(one, Err(Error::Interrupted)), "{one:?}");
    let calls = seen.into_inner().unwrap().len();
    assert!(
        (3..3 + rayon::current_num_threads()).contains(&calls),
        "{calls} of 40"
    );
    // Every position: 6 × 40 (layer, sink) counts, stopped at the first.
    let seen = Mutex::new(Vec::new());
    let all = flow_from_every_position_with(&graph, &stop_at(1, &seen));
    assert!(matches!(all, Err(Error::Interrupted)));
    let calls = seen.into_inner().unwrap().len();
    assert!(
        (1..1 + rayon::current_num_threads()).contains(&calls),
        "{calls} of 240"
    );
    // Unwatched, the same flows run to the end.
    let watched = flow_with(&graph, 5, &|_, _| ControlFlow::Continue(()));
    assert_eq!(watched.unwrap(), flow(&graph, 5));
}

#[test]
fn parallel_results_are_bit_identical_to_serial() {
    let graph = random_attention::augmented_attention(12, 24, 7);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| (flow(&graph, 5), flow_from_every_position(&graph[..4])))
    };
    let bits =
        |rows: &[Vec<f64>]| -> Vec<u64> { rows.iter().flatten().map(|v| v.to_bits()).collect() };
    let (serial_one, serial_all) = run(1);
    for threads in [2, 3, 8] {
        let (one, all) = run(threads);
        assert_eq!(bits(&one), bits(&serial_one), "{threads} threads");
        for (a, b) in all.iter().zip(&serial_all) {
            assert_eq!(bits(a), bits(b), "{threads} threads");
        }
    }
}

/// Flow from every position settles deep layers by bounds (within 1e-13 relative) where one
/// position at a time searches, so the two agree to rounding, not bit for bit.
#[test]
fn every_position_agrees_with_one_position_at_a_time() {
    for (layers, n, seed) in [(5, 9, 11), (12, 8, 2)] {
        let graph = random_attention::augmented_attention(layers, n, seed);
        let all = flow_from_every_position(&graph);
        assert_eq!(all.len(), layers);
        for target in 0..n {
            let one = flow(&graph, target);
            for l in 0..layers {
                assert_eq!(all[l].len(), n);
                for (a, b) in all[l][target].iter().zip(&one[l]) {
                    assert!(
                        (a - b).abs() <= 1e-12 * b.abs(),
                        "layer {} position {target}: {a} vs {b}",
                        l + 1
                    );
                }
            }
        }
        for row in all.iter().flatten() {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }
}

/// Every position of a deep graph, where most flows are settled by bounds, against petgraph.
#[test]
fn every_position_of_a_deep_graph_agrees_with_petgraph() {
    let (layers, n) = (10, 7);
    let graph = random_attention::augmented_attention(layers, n, 9);
    let all = flow_from_every_position(&graph);
    for (l, maps) in all.iter().enumerate() {
        for (source, row) in maps.iter().enumerate() {
            let raw: Vec<f64> = (0..n)
                .map(|j| petgraph_max_flow(&graph[..=l], source, j))
                .collect();
            let total: f64 = raw.iter().sum();
            for (got, want) in row.iter().zip(&raw) {
                assert!(
                    (got - want / total).abs() <= TOLERANCE,
                    "layer {} source {source}",
                    l + 1
                );
            }
        }
    }
}

#[test]
fn random_attention_is_row_stochastic_and_seeded() {
    let a = random_attention::augmented_attention(3, 6, 1);
    assert_eq!(a, random_attention::augmented_attention(3, 6, 1));
    assert_ne!(a, random_attention::augmented_attention(3, 6, 2));
    for m in &a {
        assert_eq!(m.data.len(), 36);
        for i in 0..6 {
            assert!((m.row(i).iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(m.get(i, i) >= 0.5);
        }
    }
}
