//! The command line's larger modes, kept out of main.rs.

pub mod batch;
pub mod causal;
pub mod options;
