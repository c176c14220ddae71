//! The JSON report of SPEC §4 (or a generated text's), on one line per report; with `--hide-special`, the kept
//! tokens only and an additive `"hidden"` list of the left-out positions and tokens.

use std::io::Write;

use super::{Explained, Renderer};

/// Prints the report as JSON and nothing else.
pub struct Json;

impl Renderer for Json {
    fn render(&self, shown: &Explained, out: &mut dyn Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, shown)?;
        writeln!(out)
    }
}
