//! Times the flow engine alone on seeded random attention (L = 12), without criterion's
//! repetitions: `cargo run --release --example flow_timing -- [N ...] [--all-positions]`.

#[path = "../benches/support/random_attention.rs"]
mod random_attention;

use std::time::Instant;

use bert_explain::relevance::{flow, flow_from_every_position};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = args.iter().any(|a| a == "--all-positions");
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![16, 32, 64, 128]
    } else {
        sizes
    };
    println!("n\tflow_one_position_s\tflow_all_positions_s");
    for n in sizes {
        let graph = random_attention::augmented_attention(12, n, n as u64);
        let start = Instant::now();
        let rows = flow(&graph, n / 2);
        let one = start.elapsed().as_secs_f64();
        assert_eq!(rows.len(), 12);
        let every = if all {
            let start = Instant::now();
            let maps = flow_from_every_position(&graph);
            assert_eq!(maps[11].len(), n);
            format!("{:.6}", start.elapsed().as_secs_f64())
        } else {
            "-".into()
        };
        println!("{n}\t{one:.6}\t{every}");
    }
}
