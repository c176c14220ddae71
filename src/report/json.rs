//! The JSON report of SPEC §4, on one line per report.

use std::io::Write;

use super::{Renderer, Report};

/// Prints the report as JSON and nothing else.
pub struct Json;

impl Renderer for Json {
    fn render(&self, report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, report)?;
        writeln!(out)
    }
}
