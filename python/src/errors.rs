//! Library errors as Python exceptions, split as the command line's exit status is: a
//! mistake in the input (exit status 2) is a `UsageError` (a `ValueError`), anything else
//! (exit status 1) an `ExplainError` (a `RuntimeError`). The message is the command line's.

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::PyErr;

create_exception!(
    _native,
    UsageError,
    PyValueError,
    "A mistake in the input: where the command line exits with status 2."
);
create_exception!(
    _native,
    ExplainError,
    PyRuntimeError,
    "Anything else that went wrong (a missing or bad checkpoint, a bad attention array, a file \
     that cannot be written): where the command line exits with status 1."
);

/// The command line's message for `err` (its `Error: ...` line without the prefix) in the
/// exception its exit status calls for.
pub fn to_py(err: impl Into<anyhow::Error>) -> PyErr {
    let err = err.into();
    let message = format!("{err:#}");
    let usage = err
        .downcast_ref::<bert_explain::Error>()
        .is_some_and(bert_explain::Error::is_usage);
    match usage {
        true => UsageError::new_err(message),
        false => ExplainError::new_err(message),
    }
}

/// A mistake in a keyword argument, which the command line's parser would have refused.
pub fn usage(message: impl Into<String>) -> PyErr {
    UsageError::new_err(message.into())
}
