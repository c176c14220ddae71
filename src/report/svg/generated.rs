//! A generated text's figure (SVG, PNG): the generated-token ×
//! prompt-token map (mean over layers) beside the layer × prompt-token map of one generated
//! token, on the report renderers' colour scale.

use std::fmt::Write as _;

use super::{CHAR_W, FONT_FAMILY, MARGIN, MUTED, TARGET as HIGHLIGHT};
use crate::relevance::causal::CausalMethod;
use crate::report::causal::CausalReport;
use crate::report::colour::{hex, ramp, RAMP};
use crate::report::esc;

const GRID_TOP: i64 = 84;
const CELL_H: i64 = 22;
const GAP: i64 = 40;

/// One heatmap: rows top to bottom, one column per prompt token.
struct Panel<'a> {
    title: String,
    row_labels: Vec<String>,
    rows: Vec<Vec<f64>>,
    highlight: Option<usize>,
    columns: &'a [String],
}

/// The SVG figure for `method` and generated token `k` (< g); `None` when the report lacks
/// `method` or token `k`.
pub fn generated_figure(report: &CausalReport, method: CausalMethod, k: usize) -> Option<String> {
    let r = &report.relevance;
    let name = method.name().replace('_', " ");
    Some(figure(
        report,
        &name,
        r.token_map(method)?,
        r.layer_map(method, k)?,
        k,
    ))
}

/// The figure of a method named `name`: its generated × prompt map `token_map` (`[g][m]`) and
/// generated token `k`'s layer × prompt map `layer_map` (`[L][m]`, first layer first).
fn figure(
    report: &CausalReport,
    name: &str,
    token_map: Vec<Vec<f64>>,
    mut layer_map: Vec<Vec<f64>>,
    k: usize,
) -> String {
    layer_map.reverse(); // last layer on top, as the paper draws it
    let columns: Vec<String> = report.prompt_tokens.iter().map(|t| label(t)).collect();
    let panels = [
        Panel {
            title: format!("Each generated token: {name}, mean over layers"),
            row_labels: report.generated_tokens.iter().map(|t| label(t)).collect(),
            rows: token_map,
            highlight: Some(k),
            columns: &columns,
        },
        Panel {
            title: format!(
                "Generated token {k} {}: {name} per layer",
                label(&report.generated_tokens[k])
            ),
            row_labels: (1..=report.layers).rev().map(|l| format!("L{l}")).collect(),
            rows: layer_map,
            highlight: None,
            columns: &columns,
        },
    ];
    let max = panels
        .iter()
        .flat_map(|p| p.rows.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    let max = if max > 0.0 { max } else { 1.0 };
    let cell_w = (560 / columns.len().max(1) as i64).clamp(18, 40);
    let grid_w = cell_w * columns.len() as i64;
    let label_w = |labels: &[String]| text_width(labels) + 10;
    let x0 = MARGIN + label_w(&panels[0].row_labels);
    let x1 = x0 + grid_w + GAP + label_w(&panels[1].row_labels);
    let legend_x = x1 + grid_w + 30;
    let grid_h = panels
        .iter()
        .map(|p| p.rows.len() as i64)
        .max()
        .unwrap_or(1)
        * CELL_H;
    let width = legend_x + 70 + MARGIN;
    let height = GRID_TOP + grid_h.max(120) + text_width(&columns) + 16 + MARGIN;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"{FONT_FAMILY}\" font-size=\"12\" fill=\"#222\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
    );
    let _ = writeln!(
        svg,
        "<text x=\"{MARGIN}\" y=\"30\" font-size=\"16\">Which prompt tokens each generated token came from</text>\n\
         <text x=\"{MARGIN}\" y=\"52\" fill=\"{MUTED}\">{}</text>",
        esc(&format!(
            "{} · {} layers × {} heads · prompt: {} · generated: {}",
            report.model, report.layers, report.heads, report.prompt, report.generated_text
        ))
    );
    for (panel, x) in panels.iter().zip([x0, x1]) {
        draw(&mut svg, panel, x, cell_w, max);
    }
    // The gradient's id is the method's, so that one page can hold several figures.
    let id: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    legend(&mut svg, (legend_x, grid_h.max(120)), max, &id);
    svg += "</svg>\n";
    svg
}

fn draw(svg: &mut String, panel: &Panel, x0: i64, cell_w: i64, max: f64) {
    let _ = writeln!(
        svg,
        "<text x=\"{x0}\" y=\"{}\" font-size=\"13\">{}</text>",
        GRID_TOP - 10,
        esc(&panel.title)
    );
    for (i, (row, name)) in panel.rows.iter().zip(&panel.row_labels).enumerate() {
        let y = GRID_TOP + i as i64 * CELL_H;
        let colour = if panel.highlight == Some(i) {
            HIGHLIGHT
        } else {
            "#222"
        };
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{colour}\">{}</text>",
            x0 - 6,
            y + CELL_H / 2 + 4,
            esc(name)
        );
        for (j, value) in row.iter().enumerate() {
            let x = x0 + j as i64 * cell_w;
            let _ = writeln!(
                svg,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{cell_w}\" height=\"{CELL_H}\" fill=\"{}\"><title>{} ← {}: {value:.4}</title></rect>",
                hex(ramp(value / max)),
                esc(name),
                esc(&panel.columns[j])
            );
        }
    }
    if let Some(i) = panel.highlight {
        let _ = writeln!(
            svg,
            "<rect x=\"{x0}\" y=\"{}\" width=\"{}\" height=\"{CELL_H}\" fill=\"none\" stroke=\"{HIGHLIGHT}\" stroke-width=\"2\"/>",
            GRID_TOP + i as i64 * CELL_H,
            cell_w * panel.columns.len() as i64
        );
    }
    let bottom = GRID_TOP + panel.rows.len() as i64 * CELL_H + 8;
    for (j, column) in panel.columns.iter().enumerate() {
        let x = x0 + j as i64 * cell_w + cell_w / 2 + 4;
        let _ = writeln!(
            svg,
            "<text x=\"{x}\" y=\"{bottom}\" text-anchor=\"end\" transform=\"rotate(-60 {x} {bottom})\">{}</text>",
            esc(column)
        );
    }
}

fn legend(svg: &mut String, (x, h): (i64, i64), max: f64, id: &str) {
    let _ = writeln!(
        svg,
        "<defs><linearGradient id=\"scale-{id}\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">"
    );
    for (i, stop) in RAMP.iter().enumerate() {
        let offset = i as f64 / (RAMP.len() - 1) as f64;
        let _ = writeln!(
            svg,
            "<stop offset=\"{offset:.3}\" stop-color=\"{}\"/>",
            hex(*stop)
        );
    }
    let _ = writeln!(
        svg,
        "</linearGradient></defs>\n<rect x=\"{x}\" y=\"{GRID_TOP}\" width=\"14\" height=\"{h}\" fill=\"url(#scale-{id})\"/>\n\
         <text x=\"{}\" y=\"{}\">{max:.3}</text>\n<text x=\"{}\" y=\"{}\">0</text>",
        x + 20,
        GRID_TOP + 10,
        x + 20,
        GRID_TOP + h
    );
}

/// A token as a label: spaces shown as `·` so that " the" and "the" differ visibly.
fn label(token: &str) -> String {
    token.replace(' ', "·").replace('\n', "⏎")
}

fn text_width(texts: &[String]) -> i64 {
    let chars = texts.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    (chars as f64 * CHAR_W).ceil() as i64
}
