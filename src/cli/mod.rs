//! The command line's larger modes, kept out of main.rs.

pub mod batch;
pub mod causal;
pub mod options;

use std::sync::Arc;

use bert_explain::explain::Progress;
use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

/// The bar on stderr for `--all-positions` (drawn only when stderr is a terminal; cleared
/// when the last flow is done, or when the options holding it are dropped after an error).
pub fn flow_progress() -> Progress {
    let bar = ProgressBar::new(0)
        .with_style(
            ProgressStyle::with_template(
                "{bar:40} {pos}/{len} (layer, position) flows, {per_sec}, {eta} left",
            )
            .expect("the progress template is valid"),
        )
        .with_finish(ProgressFinish::AndClear);
    Progress(Arc::new(move |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if done == total {
            bar.finish_and_clear();
        }
    }))
}
