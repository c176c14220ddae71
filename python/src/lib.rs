//! The native half of the `bert_explain` Python package: thin glue over the bert-explain
//! library, which stays the single implementation. Arrays arrive as bytes with their shape
//! (the Python half converts NumPy arrays, torch tensors and transformers' tuples), reports
//! leave as the JSON the command line prints, and every computation runs with the GIL
//! released.

mod arrays;
mod errors;
mod explainer;
mod interrupt;
mod options;

use pyo3::prelude::*;

/// Runs the `bert-explain` command line on `argv` (the program name first) and returns its
/// exit status; what it prints goes to this process's stdout and stderr.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| bert_explain::cli::main(argv))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("UsageError", py.get_type::<errors::UsageError>())?;
    m.add("ExplainError", py.get_type::<errors::ExplainError>())?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::attention_maps, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::explain_attention, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::render, m)?)?;
    m.add_function(wrap_pyfunction!(explainer::evaluation_summary, m)?)?;
    m.add_class::<explainer::Explainer>()?;
    Ok(())
}
