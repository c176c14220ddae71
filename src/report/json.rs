//! The JSON report of SPEC §4, on one line per report; with `--hide-special`, the kept
//! tokens only and an additive `"hidden"` list of the left-out positions and tokens.

use std::io::Write;

use super::{Renderer, View};

/// Prints the report as JSON and nothing else.
pub struct Json;

impl Renderer for Json {
    fn render(&self, view: &View, out: &mut dyn Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, view)?;
        writeln!(out)
    }
}
