//! Long computations that Ctrl-C stops, and whose flows show a bar. Python raises
//! `KeyboardInterrupt` only when its own thread runs Python code, and a flow runs for minutes
//! with the GIL released; so the work runs on a thread of its own while the calling thread
//! looks for signals, and a flow asked to stop ends within the sinks or positions under way
//! (`bert_explain::Error::Interrupted`). The bar is the command line's on stderr where that is
//! a terminal; in a Jupyter kernel, whose stderr is not, the calling thread draws one in the
//! cell's output (`bert_explain._progress`).

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bert_explain::cli::flow_progress;
use bert_explain::relevance::Progress;
use pyo3::prelude::*;

use crate::errors::to_py;

/// How often the calling thread looks for a signal while the work runs.
const LOOK: Duration = Duration::from_millis(50);
/// How long the work runs before a notebook shows its bar, as the command line waits.
const SHOWN_AFTER: Duration = Duration::from_secs(1);

/// What [`interruptible`] gives its work: the progress its flows report to, and a check
/// for Ctrl-C between its texts or lines.
pub struct Watch {
    /// The command line's bar for a long flow, stopping the flow once Ctrl-C has come.
    shown: Progress,
    stop: Arc<AtomicBool>,
    /// The last count the flows told, `(done, total)`, for a notebook's bar.
    count: Arc<Mutex<(usize, usize)>>,
}

impl Watch {
    fn new() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(Mutex::new((0, 0)));
        let (bar, heard, told) = (flow_progress(), Arc::clone(&stop), Arc::clone(&count));
        let shown = Progress(Arc::new(move |done, total| {
            let _ = (bar.0)(done, total);
            *told.lock().unwrap_or_else(|e| e.into_inner()) = (done, total);
            stopping(&heard)
        }));
        Self { shown, stop, count }
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

    /// The last count the flows told, `(done, total)`.
    fn count(&self) -> (usize, usize) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner())
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
    let watch = &Watch::new();
    let (started, mut notebook) = (Instant::now(), NotebookBar::default());
    let mut raised = None;
    let result = py.detach(|| {
        std::thread::scope(|scope| {
            let (sender, receiver) = channel();
            scope.spawn(move || sender.send(work(watch)));
            loop {
                match receiver.recv_timeout(LOOK) {
                    Ok(result) => break Some(result),
                    // The work panicked: the scope raises it again.
                    Err(RecvTimeoutError::Disconnected) => break None,
                    Err(RecvTimeoutError::Timeout) => Python::attach(|py| {
                        if raised.is_none() {
                            if let Err(err) = py.check_signals() {
                                raised = Some(err);
                                watch.stop.store(true, Ordering::Relaxed);
                            }
                        }
                        if started.elapsed() >= SHOWN_AFTER {
                            notebook.show(py, watch.count());
                        }
                    }),
                }
            }
        })
    });
    // A bar already drawn is left showing the last count.
    notebook.finish(py, watch.count());
    if let Some(err) = raised {
        return Err(err);
    }
    result
        .expect("the work ended with a result or the scope raised its panic")
        .map_err(to_py)
}

/// The bar in a notebook cell's output (`bert_explain._progress.notebook_bar`): looked for
/// the first time a flow has a count to show, and kept as `None` outside a Jupyter kernel.
#[derive(Default)]
struct NotebookBar {
    bar: Option<Option<Py<PyAny>>>,
    shown: (usize, usize),
}

impl NotebookBar {
    /// Draws `count` if it is a flow's and new.
    fn show(&mut self, py: Python<'_>, count: (usize, usize)) {
        if count.1 == 0 || count == self.shown {
            return;
        }
        // A bar is only a display: where IPython cannot draw one, the work goes on without.
        let bar = self.bar.get_or_insert_with(|| {
            let made = py
                .import("bert_explain._progress")
                .and_then(|module| module.call_method0("notebook_bar"));
            made.ok().filter(|bar| !bar.is_none()).map(Bound::unbind)
        });
        if let Some(bar) = bar {
            let _ = bar.call_method1(py, "show", count);
            self.shown = count;
        }
    }

    /// The last count, on a bar already drawn.
    fn finish(&mut self, py: Python<'_>, count: (usize, usize)) {
        if matches!(self.bar, Some(Some(_))) {
            self.show(py, count);
        }
    }
}
