//! How the engine settled each layer's flows, counted when the environment sets
//! `BERT_EXPLAIN_FLOW_STATS` (for benchmarks; scripts/bench/RESULTS.md): per layer, how many
//! flows had a closed form, were settled by the flows below combined ([`super::Spread`]) or
//! by a lift, or were searched, and for the searches their phases, steps (the frames of the
//! depth-first searches), time and how far the upper bound they were given lay above the flow
//! they found. A flow map's end prints the table of the flows counted since the last one to
//! standard error. Off, the engine reads the environment once and records nothing.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How one flow was settled.
#[derive(Debug, Clone, Copy)]
pub enum Settlement {
    ClosedForm,
    Spread,
    Lifted,
    Searched(Search),
}

/// What one search cost.
#[derive(Debug, Clone, Copy)]
pub struct Search {
    /// The first phase, and each breadth-first search of levels after it (the last finds
    /// the sink out of reach, unless the flow reached its bound first).
    pub phases: u64,
    /// Arcs the depth-first searches tried to send flow along.
    pub steps: u64,
    pub time: Duration,
    /// The upper bound given, relative to the flow found, less 1 (0 where either is 0 or
    /// the bound is infinite).
    pub bound_above: f64,
}

/// One layer's counts.
#[derive(Debug, Default, Clone, PartialEq)]
struct Layer {
    closed_form: u64,
    spread: u64,
    lifted: u64,
    searched: u64,
    phases: u64,
    steps: u64,
    time: Duration,
    bound_above: f64,
}

/// Counts per layer, `[l - 1]`.
#[derive(Debug, Default, Clone, PartialEq)]
struct Counts(Vec<Layer>);

impl Counts {
    fn add(&mut self, layer: usize, how: Settlement) {
        if self.0.len() < layer {
            self.0.resize(layer, Layer::default());
        }
        let counts = &mut self.0[layer - 1];
        match how {
            Settlement::ClosedForm => counts.closed_form += 1,
            Settlement::Spread => counts.spread += 1,
            Settlement::Lifted => counts.lifted += 1,
            Settlement::Searched(search) => {
                counts.searched += 1;
                counts.phases += search.phases;
                counts.steps += search.steps;
                counts.time += search.time;
                counts.bound_above += search.bound_above;
            }
        }
    }

    /// A markdown table, a row per layer.
    fn table(&self) -> String {
        let mut out = String::from(
            "| layer | closed form | spread | lifted | searched | phases per search | steps per search | ms searching (all threads) | bound above the flow, mean |\n|---|---|---|---|---|---|---|---|---|\n",
        );
        for (l, c) in self.0.iter().enumerate() {
            let searches = c.searched.max(1) as f64;
            let per = |total: u64| total as f64 / searches;
            out += &format!(
                "| {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.1}% |\n",
                l + 1,
                c.closed_form,
                c.spread,
                c.lifted,
                c.searched,
                per(c.phases),
                per(c.steps),
                c.time.as_secs_f64() * 1e3,
                100.0 * c.bound_above / searches,
            );
        }
        out
    }
}

static COUNTS: Mutex<Counts> = Mutex::new(Counts(Vec::new()));

/// Whether the environment asks for the counts.
pub(super) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("BERT_EXPLAIN_FLOW_STATS").is_some())
}

/// Counts a flow from layer `layer` settled `how`, when [`enabled`].
pub(super) fn record(layer: usize, how: impl FnOnce() -> Settlement) {
    if enabled() {
        let how = how();
        COUNTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(layer, how);
    }
}

/// When [`enabled`], prints the counts since the last call to standard error and starts
/// again.
pub(super) fn print() {
    if enabled() {
        let counts = std::mem::take(&mut *COUNTS.lock().unwrap_or_else(|e| e.into_inner()));
        eprint!(
            "attention flow, how each layer's flows were settled:\n{}",
            counts.table()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_layer_and_averages_the_searches() {
        let mut counts = Counts::default();
        let search = |phases, steps, ms, bound_above| {
            Settlement::Searched(Search {
                phases,
                steps,
                time: Duration::from_millis(ms),
                bound_above,
            })
        };
        counts.add(1, Settlement::ClosedForm);
        counts.add(3, Settlement::Lifted);
        counts.add(3, Settlement::Spread);
        counts.add(3, search(2, 100, 3, 0.5));
        counts.add(3, search(4, 300, 5, 0.1));
        let table = counts.table();
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], "| 1 | 1 | 0 | 0 | 0 | 0.0 | 0 | 0.0 | 0.0% |");
        assert_eq!(rows[1], "| 2 | 0 | 0 | 0 | 0 | 0.0 | 0 | 0.0 | 0.0% |");
        assert_eq!(rows[2], "| 3 | 0 | 1 | 1 | 2 | 3.0 | 200 | 8.0 | 30.0% |");
    }
}
