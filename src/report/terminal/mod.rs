//! The human-readable report: the prediction, then each token's relevance as a table with
//! bars (last layer), or the whole layer × token grid for each method as coloured cells.

mod image;

use std::io::Write;

use super::causal::{rank_map, CausalReport, Ranking};
use super::colour::{is_dark, ramp, scale_max};
use super::escape::terminal as terminal_text;
use super::evaluation::write_evaluation;
use super::{probability, Explained, Prediction, Renderer, Report, View, SHOWN_LABELS};
use crate::faithfulness::correlations::Summary;
use crate::faithfulness::headline_scores;
use crate::relevance::causal::{layer_mean, CausalMethod};

const BAR_WIDTH: usize = 12;
const EIGHTHS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];

/// Text for a terminal.
pub struct Terminal {
    /// Print every layer rather than the last one only.
    pub all_layers: bool,
    /// How the layer × token grids show relevance besides the numbers.
    pub colour: Colour,
}

/// How grid cells are shaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// A shade character after each number (`░▒▓█`): pipes, files, NO_COLOR.
    Plain,
    /// Background colours from the 256-colour palette.
    Ansi256,
    /// 24-bit background colours.
    TrueColour,
}

impl Colour {
    /// Colour for a terminal, plain otherwise or when NO_COLOR is set (and not empty);
    /// 24-bit where COLORTERM says `truecolor` or `24bit`. `env` looks up a variable.
    pub fn detect(is_terminal: bool, env: impl Fn(&str) -> Option<String>) -> Self {
        let no_color = env("NO_COLOR").is_some_and(|v| !v.is_empty());
        if !is_terminal || no_color {
            return Self::Plain;
        }
        Self::depth(env)
    }

    /// The richest colour the terminal claims (COLORTERM), for `--color always`.
    pub fn depth(env: impl Fn(&str) -> Option<String>) -> Self {
        match env("COLORTERM").as_deref() {
            Some("truecolor" | "24bit") => Self::TrueColour,
            _ => Self::Ansi256,
        }
    }
}

impl Renderer for Terminal {
    fn render(&self, shown: &Explained, out: &mut dyn Write) -> std::io::Result<()> {
        match shown {
            Explained::Encoder(view) => self.encoder(view, out),
            Explained::Generated(generated) => self.generated(&generated.report, out),
        }
    }
}

impl Terminal {
    /// The prediction, then each token's relevance (with `all_layers`, every layer's grid).
    fn encoder(&self, view: &View, out: &mut dyn Write) -> std::io::Result<()> {
        let view = &view.map_text(terminal_text);
        let report = &view.report;
        writeln!(
            out,
            "{} on {}: {} layers × {} heads, {} tokens, explaining position {} {}",
            report.model,
            report.device,
            report.layers,
            report.heads,
            view.positions.len() + view.hidden.as_ref().map_or(0, Vec::len),
            view.target_position(),
            report.target.token
        )?;
        if let Some(hidden) = view.hidden.as_ref().filter(|h| !h.is_empty()) {
            let tokens: Vec<&str> = hidden.iter().map(|t| t.token.as_str()).collect();
            writeln!(
                out,
                "Left out: {} (each layer renormalised over the other tokens)",
                tokens.join(" ")
            )?;
        }
        writeln!(out)?;
        write_prediction(report, out)?;
        if report.image.is_some() {
            writeln!(out)?;
            self.image_maps(view, out)?;
        } else if self.all_layers {
            self.write_grids(view, out)?;
        } else {
            writeln!(out)?;
            write_last_layer(view, out)?;
        }
        self.write_all_positions(view, out)?;
        write_evaluation(report, out)
    }
}

fn write_prediction(report: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let Some(prediction) = &report.prediction else {
        return writeln!(
            out,
            "Prediction: unavailable, no prediction head ran (an encoder-only checkpoint, or --attention input)"
        );
    };
    writeln!(out, "Prediction at position {}", report.target.index)?;
    match prediction {
        Prediction::Words { candidates, top } => {
            for candidate in candidates {
                writeln!(
                    out,
                    "  p({}) = {}",
                    candidate.word,
                    probability(candidate.probability)
                )?;
            }
            let top: Vec<String> = top
                .iter()
                .map(|w| format!("{} {}", w.word, probability(w.probability)))
                .collect();
            if !top.is_empty() {
                writeln!(out, "  top {}: {}", top.len(), top.join(", "))?;
            }
        }
        Prediction::Labels { labels } => {
            for label in labels.iter().take(SHOWN_LABELS) {
                writeln!(
                    out,
                    "  p({}) = {}",
                    label.label,
                    probability(label.probability)
                )?;
            }
            if labels.len() > SHOWN_LABELS {
                let more = labels.len() - SHOWN_LABELS;
                writeln!(out, "  ... {more} more labels (--json has every one)")?;
            }
        }
    }
    Ok(())
}

/// Attention's maps at the last layer, then each other method's (`--mixing`).
fn write_last_layer(view: &View, out: &mut dyn Write) -> std::io::Result<()> {
    let report = &view.report;
    let title = format!(
        "Relevance of each input token, layer {} of {}",
        report.layers, report.layers
    );
    let columns: Vec<_> = report.relevance.named().collect();
    write_table(view, &title, &columns, out)?;
    for (name, maps) in report.methods.iter().flatten() {
        if name == "attention" {
            continue;
        }
        writeln!(out)?;
        let title = format!(
            "Method {name}, layer {} of {}",
            report.layers, report.layers
        );
        let columns: Vec<_> = maps.named().collect();
        write_table(view, &title, &columns, out)?;
    }
    Ok(())
}

/// One row per token: each map's value at the last layer, with a bar.
fn write_table(
    view: &View,
    title: &str,
    methods: &[(&'static str, &Vec<Vec<f64>>)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let report = &view.report;
    let last = report.layers.saturating_sub(1);
    writeln!(out, "{title}")?;
    let width = token_width(report);
    let mut header = format!("  {:>3}  {:<width$}", "#", "token");
    for (name, _) in methods {
        header += &format!("  {:<w$}", name, w = BAR_WIDTH + 7);
    }
    writeln!(out, "{}", header.trim_end())?;
    let maxima: Vec<f64> = methods
        .iter()
        .map(|(_, rows)| rows[last].iter().cloned().fold(0.0, f64::max))
        .collect();
    for (j, token) in report.tokens.iter().enumerate() {
        let position = view.positions[j];
        let mut line = format!("  {position:>3}  {token:<width$}");
        for ((_, rows), max) in methods.iter().zip(&maxima) {
            let value = rows[last][j];
            line += &format!("  {value:.4} {:<BAR_WIDTH$}", bar(value, *max));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

impl Terminal {
    /// Each method's layer × token grid, last layer on top, on one scale for all three.
    fn write_grids(&self, view: &View, out: &mut dyn Write) -> std::io::Result<()> {
        let max = scale_max(view);
        for (name, rows) in view.report.relevance.named() {
            let title = format!("{name}: layer × token, last layer on top");
            let labelled: Vec<(String, &Vec<f64>)> = rows
                .iter()
                .enumerate()
                .rev()
                .map(|(l, row)| ((l + 1).to_string(), row))
                .collect();
            self.write_grid(&view.report, out, &title, "layer", &labelled, max)?;
        }
        if self.colour == Colour::Plain {
            writeln!(out)?;
            writeln!(
                out,
                "Shades: ' ' < {:.4} ≤ ░ < {:.4} ≤ ▒ < {:.4} ≤ ▓ < {:.4} ≤ █ (of {max:.4})",
                max / 8.0,
                max * 3.0 / 8.0,
                max * 5.0 / 8.0,
                max * 7.0 / 8.0
            )?;
        }
        Ok(())
    }

    /// With `--all-positions`: the last layer's maps from every position.
    fn write_all_positions(&self, view: &View, out: &mut dyn Write) -> std::io::Result<()> {
        let report = &view.report;
        let Some(all) = &report.all_positions else {
            return Ok(());
        };
        let flow = all.flow.as_ref().map(|flow| ("flow", flow));
        for (name, maps) in std::iter::once(("rollout", &all.rollout)).chain(flow) {
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
            let max = last.iter().flatten().copied().fold(0.0, f64::max);
            self.write_grid(report, out, &title, "from", &labelled, max)?;
        }
        Ok(())
    }

    /// A grid of numbers, each cell shaded by its value on the scale 0 … `max`.
    fn write_grid(
        &self,
        report: &Report,
        out: &mut dyn Write,
        title: &str,
        corner: &str,
        rows: &[(String, &Vec<f64>)],
        max: f64,
    ) -> std::io::Result<()> {
        let width = token_width(report).max(6);
        writeln!(out)?;
        writeln!(out, "{title}")?;
        let mut header = format!("  {corner:>width$}");
        for token in &report.tokens {
            header += &format!(" {:>width$} ", clip(token, width));
        }
        writeln!(out, "{}", header.trim_end())?;
        for (label, row) in rows {
            write!(out, "  {:>width$}", clip(label, width))?;
            for &value in row.iter() {
                let t = if max > 0.0 { value / max } else { 0.0 };
                write!(out, "{}", self.cell(value, t, width))?;
            }
            writeln!(out)?;
        }
        Ok(())
    }

    /// One cell, `width + 2` columns wide: the value on its colour, or followed by a shade.
    fn cell(&self, value: f64, t: f64, width: usize) -> String {
        let rgb = ramp(t);
        let fg256 = if is_dark(rgb) { 231 } else { 16 };
        let [r, g, b] = rgb;
        match self.colour {
            Colour::Plain => format!(" {value:>width$.4}{}", shade(t)),
            Colour::TrueColour => {
                let [fr, fg, fb] = if is_dark(rgb) { [255; 3] } else { [0; 3] };
                format!("\x1b[48;2;{r};{g};{b};38;2;{fr};{fg};{fb}m {value:>width$.4} \x1b[0m")
            }
            Colour::Ansi256 => {
                format!(
                    "\x1b[48;5;{};38;5;{fg256}m {value:>width$.4} \x1b[0m",
                    ansi256(rgb)
                )
            }
        }
    }
}

/// A shade for `t` in [0, 1], in five steps.
fn shade(t: f64) -> char {
    const SHADES: [char; 5] = [' ', '░', '▒', '▓', '█'];
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    SHADES[(t * 4.0).round() as usize]
}

/// The nearest colour of the xterm 6 × 6 × 6 cube.
fn ansi256(rgb: [u8; 3]) -> u8 {
    const LEVELS: [u8; 6] = [0, 95, 135, 175, 215, 255];
    let [r, g, b] = rgb.map(|c| {
        (0..6)
            .min_by_key(|&i| (LEVELS[i] as i32 - c as i32).abs())
            .unwrap_or(0) as u8
    });
    16 + 36 * r + 6 * g + b
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

impl Terminal {
    /// The generation, then each generated token's top prompt tokens; with `all_layers`,
    /// also the generated × prompt map of the ranked method.
    fn generated(&self, report: &CausalReport, out: &mut dyn Write) -> std::io::Result<()> {
        let info = &report.generation;
        let strategy = match (info.seed, info.temperature) {
            (Some(seed), Some(t)) => format!("sampled with seed {seed}, temperature {t}"),
            _ => "greedy".to_string(),
        };
        writeln!(
            out,
            "{} on {}: {} layers × {} heads, {} prompt tokens, {} generated ({strategy}{})",
            terminal_text(&report.model),
            report.device,
            report.layers,
            report.heads,
            report.prompt_tokens.len(),
            report.generated_tokens.len(),
            if info.stopped_at_eos {
                ", stopped at end of text"
            } else {
                ""
            },
        )?;
        writeln!(out)?;
        writeln!(out, "Prompt:    {}", terminal_text(&report.prompt))?;
        writeln!(out, "Generated: {}", terminal_text(&report.generated_text))?;
        writeln!(out)?;
        let ranking = &report.ranking;
        write_ranking(report, ranking, LAYER_MEAN, out)?;
        // Each --mixing method ranked the same way, by its rollout.
        let keep = ranking.top.iter().map(Vec::len).max().unwrap_or(0);
        for (name, maps) in report.methods.iter().flatten() {
            let map = layer_mean(&maps.rollout);
            let method = format!("{name} rollout");
            let tokens = &report.prompt_tokens;
            writeln!(out)?;
            let ranked = rank_map(&map, &method, tokens, keep, ranking.skip_common);
            write_ranking(report, &ranked, LAYER_MEAN, out)?;
        }
        // Each headline importance score ranked the same way, over the prompt.
        let scored = report.importance.iter().flatten();
        let m = report.prompt_tokens.len();
        for score in headline_scores() {
            let map: Option<Vec<Vec<f64>>> = (scored.clone())
                .map(|i| Some(i.score(score.name)?[..m].to_vec()))
                .collect();
            let Some(map) = map.filter(|map| !map.is_empty()) else {
                continue;
            };
            writeln!(out)?;
            let tokens = &report.prompt_tokens;
            let ranked = rank_map(&map, score.label, tokens, keep, ranking.skip_common);
            write_ranking(report, &ranked, "importance score", out)?;
        }
        // The correlations of the maps with the scores, and ERASER, over the generated tokens.
        if let Some(evaluations) = &report.evaluation {
            let mut summary = Summary::default();
            evaluations.iter().for_each(|e| summary.add(e));
            writeln!(out)?;
            writeln!(
                out,
                "Faithfulness over the {} generated tokens (each over the prompt)",
                evaluations.len()
            )?;
            write!(out, "{summary}")?;
        }
        if self.all_layers {
            if let Some(method) = CausalMethod::from_name(&ranking.method) {
                write_map(report, method, out)?;
            }
        }
        Ok(())
    }
}

/// How a map's ranking scores its tokens.
const LAYER_MEAN: &str = "mean over layers";

/// Each generated token's top prompt tokens by `ranking`, whose scores are `how` (said in
/// the title).
fn write_ranking(
    report: &CausalReport,
    ranking: &Ranking,
    how: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "Top prompt tokens for each generated token ({}, {how}{})",
        ranking.method.replace('_', " "),
        if ranking.skip_common {
            ", common words skipped"
        } else {
            ""
        },
    )?;
    let width = column_width(&report.generated_tokens);
    for (k, (token, top)) in report.generated_tokens.iter().zip(&ranking.top).enumerate() {
        let picks: Vec<String> = top
            .iter()
            .map(|t| format!("{}@{} {:.3}", quoted(&t.token), t.index, t.score))
            .collect();
        let shown = quoted(token);
        writeln!(out, "  {k:>3}  {shown:<width$}  ← {}", picks.join("  "))?;
    }
    Ok(())
}

/// The generated × prompt table of `method`, layer means.
fn write_map(
    report: &CausalReport,
    method: CausalMethod,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(map) = report.relevance.token_map(method) else {
        return Ok(());
    };
    writeln!(out)?;
    writeln!(
        out,
        "{} (rows: generated tokens, columns: prompt tokens)",
        method.name()
    )?;
    let width = column_width(&report.generated_tokens);
    let cells: Vec<String> = report
        .prompt_tokens
        .iter()
        .map(|t| format!("{t:?}"))
        .collect();
    let cell = cells
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let header: String = cells.iter().map(|c| format!(" {c:>cell$}")).collect();
    writeln!(out, "  {:>3}  {:<width$} {header}", "#", "token")?;
    for (k, (token, row)) in report.generated_tokens.iter().zip(&map).enumerate() {
        let values: String = row.iter().map(|v| format!(" {v:>cell$.4}")).collect();
        writeln!(out, "  {k:>3}  {:<width$} {values}", quoted(token))?;
    }
    Ok(())
}

fn column_width(tokens: &[String]) -> usize {
    tokens
        .iter()
        .map(|t| quoted(t).chars().count())
        .max()
        .unwrap_or(0)
        .max(5)
}

/// A token in quotes, escaped so that it cannot act on the terminal.
fn quoted(token: &str) -> String {
    terminal_text(&format!("{token:?}"))
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

    #[test]
    fn colour_follows_the_terminal_and_no_color() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(Colour::detect(false, env(&[])), Colour::Plain);
        assert_eq!(Colour::detect(true, env(&[])), Colour::Ansi256);
        let truecolor = &[("COLORTERM", "truecolor")];
        assert_eq!(Colour::detect(true, env(truecolor)), Colour::TrueColour);
        let no_color = &[("COLORTERM", "24bit"), ("NO_COLOR", "1")];
        assert_eq!(Colour::detect(true, env(no_color)), Colour::Plain);
        assert_eq!(
            Colour::detect(true, env(&[("NO_COLOR", "")])),
            Colour::Ansi256
        );
    }

    #[test]
    fn shades_and_palette() {
        assert_eq!(
            [0.0, 0.2, 0.5, 0.8, 1.0].map(shade),
            [' ', '░', '▒', '▓', '█']
        );
        assert_eq!(ansi256([0, 0, 0]), 16);
        assert_eq!(ansi256([255, 255, 255]), 231);
        assert_eq!(ansi256([0x08, 0x1d, 0x58]), 17);
    }
}
