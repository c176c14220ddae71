//! An image's report in the terminal: the image's size and grid, then for each map the
//! tokens before the patches apart, the patches that matter most by row and column, and
//! the grid of patches shaded (each grid on its own scale, its largest patch).

use std::io::Write;

use super::{shade, Colour, Terminal};
use crate::report::colour::ramp;
use crate::report::patches::{patch_map, PatchMap};
use crate::report::View;

/// How many of the largest patches each map names.
const TOP_PATCHES: usize = 5;

impl Terminal {
    /// The image's line, then each map at the last layer (every layer with `all_layers`).
    pub(super) fn image_maps(&self, view: &View, out: &mut dyn Write) -> std::io::Result<()> {
        let report = &view.report;
        let Some(image) = &report.image else {
            return Ok(());
        };
        writeln!(
            out,
            "Image: {} × {} pixels, seen as {} × {} patches of {} pixels",
            image.width, image.height, image.grid[0], image.grid[1], image.patch
        )?;
        let mut maps: Vec<(String, &Vec<Vec<f64>>)> = (report.relevance.named())
            .map(|(name, rows)| (name.to_string(), rows))
            .collect();
        for (method, m) in report.methods.iter().flatten() {
            if method != "attention" {
                maps.extend(
                    m.named()
                        .map(|(name, rows)| (format!("{method} {name}"), rows)),
                );
            }
        }
        let layers: Vec<usize> = match self.all_layers {
            true => (0..report.layers).rev().collect(),
            false => vec![report.layers.saturating_sub(1)],
        };
        for (name, rows) in &maps {
            for &l in &layers {
                let Some(map) = rows.get(l).and_then(|row| patch_map(view, row)) else {
                    continue;
                };
                writeln!(out)?;
                writeln!(
                    out,
                    "{name}, layer {} of {}, from {}",
                    l + 1,
                    report.layers,
                    report.target.token
                )?;
                self.write_patch_map(&map, out)?;
            }
        }
        Ok(())
    }

    fn write_patch_map(&self, map: &PatchMap, out: &mut dyn Write) -> std::io::Result<()> {
        let mut apart: Vec<String> = (map.leading.iter())
            .map(|(token, v)| format!("{token} {v:.4}"))
            .collect();
        apart.push(format!("patches {:.4}", map.patch_total()));
        writeln!(out, "  {}", apart.join(", "))?;
        let top: Vec<String> = (map.top(TOP_PATCHES).iter())
            .map(|(r, c, v)| format!("r{r} c{c} {v:.4}"))
            .collect();
        writeln!(out, "  most: {}", top.join(", "))?;
        let max = map.max();
        let cols = map.grid.first().map_or(0, Vec::len);
        let header: String = (0..cols).map(|c| format!("{:<2}", c % 100)).collect();
        writeln!(out, "  {:>4} {}", "", header.trim_end())?;
        for (r, row) in map.grid.iter().enumerate() {
            let cells: String = row
                .iter()
                .map(|&v| self.patch_cell(if max > 0.0 { v / max } else { 0.0 }))
                .collect();
            writeln!(out, "  {:>4} {cells}", format!("r{r}"))?;
        }
        if self.colour == Colour::Plain {
            writeln!(out, "  shades: ░ ▒ ▓ █ of the largest patch, {max:.4}")?;
        }
        Ok(())
    }

    /// One patch, two columns wide: a shade, or a colour of the ramp.
    fn patch_cell(&self, t: f64) -> String {
        let [r, g, b] = ramp(t);
        match self.colour {
            Colour::Plain => shade(t).to_string().repeat(2),
            Colour::TrueColour => format!("\x1b[48;2;{r};{g};{b}m  \x1b[0m"),
            Colour::Ansi256 => format!("\x1b[48;5;{}m  \x1b[0m", super::ansi256([r, g, b])),
        }
    }
}
