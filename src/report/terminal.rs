//! The human-readable report: the prediction, then each token's relevance as a table with
//! bars (last layer), or the whole layer × token grid for each method.

use std::io::Write;

use super::{Renderer, Report};

const BAR_WIDTH: usize = 12;
const EIGHTHS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];

/// Plain text for a terminal.
pub struct Terminal {
    /// Print every layer rather than the last one only.
    pub all_layers: bool,
}

impl Renderer for Terminal {
    fn render(&self, report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
        let target = &report.target;
        writeln!(
            out,
            "{} on {}: {} layers × {} heads, {} tokens, explaining position {} {}",
            report.model,
            report.device,
            report.layers,
            report.heads,
            report.tokens.len(),
            target.index,
            target.token
        )?;
        writeln!(out)?;
        write_prediction(report, out)?;
        if self.all_layers {
            write_grids(report, out)?;
        } else {
            writeln!(out)?;
            write_last_layer(report, out)?;
        }
        write_all_positions(report, out)
    }
}

fn write_prediction(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(prediction) = &report.prediction else {
        return writeln!(
            out,
            "Prediction: unavailable, the checkpoint has no masked-LM head (cls.predictions.*)"
        );
    };
    writeln!(out, "Prediction at position {}", report.target.index)?;
    for candidate in &prediction.candidates {
        writeln!(
            out,
            "  p({}) = {}",
            candidate.word,
            probability(candidate.probability)
        )?;
    }
    let top: Vec<String> = prediction
        .top
        .iter()
        .map(|w| format!("{} {}", w.word, probability(w.probability)))
        .collect();
    if !top.is_empty() {
        writeln!(out, "  top {}: {}", top.len(), top.join(", "))?;
    }
    Ok(())
}

fn write_last_layer(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let last = report.layers.saturating_sub(1);
    let methods = methods(report);
    writeln!(
        out,
        "Relevance of each input token, layer {} of {}",
        report.layers, report.layers
    )?;
    let width = token_width(report);
    let mut header = format!("  {:>3}  {:<width$}", "#", "token");
    for (name, _) in &methods {
        header += &format!("  {:<w$}", name, w = BAR_WIDTH + 7);
    }
    writeln!(out, "{}", header.trim_end())?;
    let maxima: Vec<f64> = methods
        .iter()
        .map(|(_, rows)| rows[last].iter().cloned().fold(0.0, f64::max))
        .collect();
    for (j, token) in report.tokens.iter().enumerate() {
        let mut line = format!("  {j:>3}  {token:<width$}");
        for ((_, rows), max) in methods.iter().zip(&maxima) {
            let value = rows[last][j];
            line += &format!("  {value:.4} {:<BAR_WIDTH$}", bar(value, *max));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn write_grids(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    for (name, rows) in methods(report) {
        let title = format!("{name}: layer × token, last layer on top");
        let labelled: Vec<(String, &Vec<f64>)> = rows
            .iter()
            .enumerate()
            .rev()
            .map(|(l, row)| ((l + 1).to_string(), row))
            .collect();
        write_grid(report, out, &title, "layer", &labelled)?;
    }
    Ok(())
}

/// With `--all-positions`: the last layer's maps from every position.
fn write_all_positions(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(all) = &report.all_positions else {
        return Ok(());
    };
    for (name, maps) in [("rollout", &all.rollout), ("flow", &all.flow)] {
        let Some(last) = maps.last() else { continue };
        let title = format!(
            "{name} from every position, layer {}: rows are positions, columns input tokens",
            maps.len()
        );
        let labelled: Vec<(String, &Vec<f64>)> = report
            .tokens
            .iter()
            .zip(last)
            .map(|(token, row)| (token.clone(), row))
            .collect();
        write_grid(report, out, &title, "from", &labelled)?;
    }
    Ok(())
}

fn write_grid(
    report: &Report,
    out: &mut dyn Write,
    title: &str,
    corner: &str,
    rows: &[(String, &Vec<f64>)],
) -> std::io::Result<()> {
    let width = token_width(report).max(6);
    writeln!(out)?;
    writeln!(out, "{title}")?;
    write!(out, "  {:>width$}", corner)?;
    for token in &report.tokens {
        write!(out, " {:>width$}", clip(token, width))?;
    }
    writeln!(out)?;
    for (label, row) in rows {
        write!(out, "  {:>width$}", clip(label, width))?;
        for value in row.iter() {
            write!(out, " {value:>width$.4}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Four decimals, or three significant digits below 0.001 where decimals would show 0.
fn probability(p: f64) -> String {
    if p >= 1e-3 || p == 0.0 {
        format!("{p:.4}")
    } else {
        format!("{p:.2e}")
    }
}

fn methods(report: &Report) -> [(&'static str, &Vec<Vec<f64>>); 3] {
    let r = &report.relevance;
    [("raw", &r.raw), ("rollout", &r.rollout), ("flow", &r.flow)]
}

fn token_width(report: &Report) -> usize {
    let longest = report.tokens.iter().map(|t| t.chars().count()).max();
    longest.unwrap_or(5).clamp(5, 12)
}

fn clip(token: &str, width: usize) -> String {
    if token.chars().count() <= width {
        token.to_string()
    } else {
        let kept: String = token.chars().take(width - 1).collect();
        format!("{kept}…")
    }
}

/// A bar of up to `BAR_WIDTH` cells in eighths, full at `max`.
fn bar(value: f64, max: f64) -> String {
    if max <= 0.0 || !value.is_finite() {
        return String::new();
    }
    let eighths = ((value / max).clamp(0.0, 1.0) * (BAR_WIDTH * 8) as f64).round() as usize;
    format!("{}{}", "█".repeat(eighths / 8), EIGHTHS[eighths % 8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_column_maximum() {
        assert_eq!(bar(1.0, 1.0), "█".repeat(BAR_WIDTH));
        assert_eq!(bar(0.5, 1.0), "█".repeat(BAR_WIDTH / 2));
        assert_eq!(bar(1.0 / 96.0, 1.0), "▏");
        assert_eq!(bar(0.0, 0.0), "");
    }

    #[test]
    fn small_probabilities_keep_their_digits() {
        assert_eq!(probability(0.10194), "0.1019");
        assert_eq!(probability(2.9401e-5), "2.94e-5");
    }

    #[test]
    fn long_tokens_are_clipped() {
        assert_eq!(clip("backache", 6), "backa…");
        assert_eq!(clip("book", 6), "book");
    }
}
