//! Long computations that Ctrl-C stops. Python raises `KeyboardInterrupt` only when its own
//! thread runs Python code, and a flow runs for minutes with the GIL released; so the work
//! runs on a thread of its own while the calling thread looks for signals, and a flow asked
//! to stop ends within the sinks or positions under way (`bert_explain::Error::Interrupted`).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use bert_explain::cli::flow_progress;
use bert_explain::relevance::Progress;
use pyo3::prelude::*;

use crate::errors::to_py;

/// How often the calling thread looks for a signal while the work runs.
const LOOK: Duration = Duration::from_millis(50);

/// What [`interruptible`] gives its work: the progress its flows report to, and a check
/// for Ctrl-C between its texts or lines.
pub struct Watch {
    /// The command line's bar for a long flow, stopping the flow once Ctrl-C has come.
    shown: Progress,
    stop: Arc<AtomicBool>,
}

impl Watch {
    fn new() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (bar, heard) = (flow_progress(), Arc::clone(&stop));
        let shown = Progress(Arc::new(move |done, total| {
            let _ = (bar.0)(done, total);
            stopping(&heard)
        }));
        Self { shown, stop }
    }

    /// Progress for a flow, with the bar (on stderr, where that is a terminal).
    pub fn progress(&self) -> &Progress {
        &self.shown
    }

    /// Progress for a flow that draws nothing (batch mode's lines have no bar) but stops.
    pub fn quiet(&self) -> Progress {
        let heard = Arc::clone(&self.stop);
        Progress(Arc::new(move |_, _| stopping(&heard)))
    }

    /// An error once Ctrl-C has come, for work between its texts or lines.
    pub fn check(&self) -> anyhow::Result<()> {
        match self.stop.load(Ordering::Relaxed) {
            true => Err(bert_explain::Error::Interrupted.into()),
            false => Ok(()),
        }
    }
}

/// Whether a flow watched by `stop` should end.
fn stopping(stop: &AtomicBool) -> ControlFlow<()> {
    match stop.load(Ordering::Relaxed) {
        true => ControlFlow::Break(()),
        false => ControlFlow::Continue(()),
    }
}

/// `work(watch)` with the GIL released. A signal whose handler raises (Ctrl-C's
/// `KeyboardInterrupt`) stops the flow under way and the work's next [`Watch::check`], and
/// once `work` has ended the exception is raised.
pub fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&Watch) -> anyhow::Result<T> + Send,
) -> PyResult<T> {
    let watch = Watch::new();
    let stop = Arc::clone(&watch.stop);
    let mut raised = None;
    let result = py.detach(|| {
        std::thread::scope(|scope| {
            let (sender, receiver) = channel();
            scope.spawn(move || sender.send(work(&watch)));
            loop {
                match receiver.recv_timeout(LOOK) {
                    Ok(result) => break Some(result),
                    // The work panicked: the scope raises it again.
                    Err(RecvTimeoutError::Disconnected) => break None,
                    Err(RecvTimeoutError::Timeout) if raised.is_none() => {
                        if let Err(err) = Python::attach(|py| py.check_signals()) {
                            raised = Some(err);
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                }
            }
        })
    });
    if let Some(err) = raised {
        return Err(err);
    }
    result
        .expect("the work ended with a result or the scope raised its panic")
        .map_err(to_py)
}
