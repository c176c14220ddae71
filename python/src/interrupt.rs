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

/// `work(progress)` with the GIL released, `progress` being the command line's bar for a
/// long flow (on stderr, where that is a terminal). A signal whose handler raises (Ctrl-C's
/// `KeyboardInterrupt`) stops the flow, and once `work` has ended the exception is raised.
pub fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&Progress) -> anyhow::Result<T> + Send,
) -> PyResult<T> {
    let stop = Arc::new(AtomicBool::new(false));
    let progress = {
        let (bar, stop) = (flow_progress(), Arc::clone(&stop));
        Progress(Arc::new(move |done, total| {
            let _ = (bar.0)(done, total);
            match stop.load(Ordering::Relaxed) {
                true => ControlFlow::Break(()),
                false => ControlFlow::Continue(()),
            }
        }))
    };
    let mut raised = None;
    let result = py.detach(|| {
        std::thread::scope(|scope| {
            let (sender, receiver) = channel();
            scope.spawn(move || sender.send(work(&progress)));
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
