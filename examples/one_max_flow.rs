//! Times the flow engine's search on single problems, each from no flow, with no lift or
//! climb: the maximum flow from `(LAYER, SOURCE)` to `(0, sink)` for each sink given. Since
//! 2026-11-27 `max_flow` gives the search the upper bound of bounds.rs (its time included),
//! which sets the search's zero and may spare it the last phase; the runs of
//! scripts/bench/RESULTS.md before that day had no bound.
//! scripts/bench/other_maxflow.py runs it beside other max-flow codes on the same problems.
//!
//!     cargo run --release --example one_max_flow -- LAYERS.f64 L N LAYER SOURCE SINK[,SINK…]
//!
//! LAYERS.f64: `L` augmented layers, `N × N` each, little-endian f64, row-major (`[k][i][j]`
//! the capacity of the arc `(k + 1, i) → (k, j)`). Prints one line per sink: the sink, the
//! flow and the milliseconds.

use std::time::Instant;

use bert_explain::attention::Matrix;
use bert_explain::relevance::max_flow;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [path, layers, n, layer, source, sinks] = &args[..] else {
        eprintln!("usage: one_max_flow LAYERS.f64 L N LAYER SOURCE SINK[,SINK…]");
        std::process::exit(2);
    };
    let number = |text: &str| -> usize {
        text.parse().unwrap_or_else(|_| {
            eprintln!("{text:?} is not a count");
            std::process::exit(2)
        })
    };
    let (layers, n, layer, source) = (number(layers), number(n), number(layer), number(source));
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("cannot read {path}: {e}");
        std::process::exit(1)
    });
    if bytes.len() != layers * n * n * 8 || layer == 0 || layer > layers || source >= n {
        eprintln!(
            "{path} does not hold {layers} layers of {n} × {n}, or LAYER or SOURCE is out of range"
        );
        std::process::exit(2);
    }
    let values: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("eight bytes")))
        .collect();
    let matrices: Vec<Matrix> = values
        .chunks_exact(n * n)
        .take(layer)
        .map(|data| Matrix {
            n,
            data: data.to_vec(),
        })
        .collect();
    for sink in sinks.split(',').map(number) {
        if sink >= n {
            eprintln!("sink {sink} is out of range");
            std::process::exit(2);
        }
        let start = Instant::now();
        let value = max_flow(&matrices, source, sink);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        println!("{sink}\t{value:.15}\t{ms:.3}");
    }
}
