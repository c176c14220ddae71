//! The paper's figure (Abnar & Zuidema 2020, Fig. 2–4) as SVG: raw attention, rollout and
//! flow for the target as layer × token heatmaps side by side, last layer on top, on one
//! colour scale with its legend, and the candidate probabilities as bars.

use std::fmt::Write as _;
use std::io::Write;

use super::colour::{diverging, hex, ramp, scale_max, RAMP};
use super::escape::esc;
use super::{probability, Explained, Prediction, Renderer, View};
use crate::faithfulness::{headline_scores, Score};
use crate::relevance::causal::CausalMethod;

mod generated;
mod image;

pub use generated::generated_figure;
pub use image::image_figure;

/// The figure as an SVG document; values show on hover (`<title>`).
pub struct Svg;

impl Renderer for Svg {
    fn render(&self, shown: &Explained, out: &mut dyn Write) -> std::io::Result<()> {
        out.write_all(figure_of(shown)?.as_bytes())
    }
}

/// The figure of either kind of report: an encoder's ([`figure`]), or a generated text's
/// for its ranked method and the generated token shown ([`generated_figure`]).
pub fn figure_of(shown: &Explained) -> std::io::Result<String> {
    match shown {
        Explained::Encoder(view) if view.report.image.is_some() => Ok(image_figure(view)),
        Explained::Encoder(view) => Ok(figure(view)),
        Explained::Generated(generated) => {
            let report = &generated.report;
            let ranked = CausalMethod::from_name(&report.ranking.method);
            let method = ranked.unwrap_or(CausalMethod::Rollout);
            generated_figure(report, method, generated.token).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "the report has no {} map to draw; compute it, or rank by another method",
                        method.name()
                    ),
                )
            })
        }
    }
}

/// The fonts the figure asks for; PNG rendering embeds DejaVu Sans.
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, Arial, sans-serif";
pub(crate) const MARGIN: i64 = 20;
/// Advance of an average character at 12px in DejaVu Sans, rounded up.
pub(crate) const CHAR_W: f64 = 7.4;
const GRID_TOP: i64 = 96;
const ROW_LABELS: i64 = 28;
const PANEL_GAP: i64 = 18;
pub(crate) const TARGET: &str = "#c0392b";
pub(crate) const INK: &str = "#222";
pub(crate) const MUTED: &str = "#666";
const METHODS: [&str; 3] = ["Raw attention", "Attention rollout", "Attention flow"];

/// Where everything goes, in whole pixels so that the SVG text is stable.
struct Layout {
    cell_w: i64,
    cell_h: i64,
    grid_h: i64,
    panel_x: [i64; 3],
    legend_x: i64,
    legend_h: i64,
    chart_x: i64,
    /// From one band of three panels (title, grid, token labels) to the next.
    band_h: i64,
    width: i64,
    height: i64,
}

impl Layout {
    fn new(view: &View) -> Self {
        let r = &view.report;
        let n = r.tokens.len().max(1) as i64;
        let cell_w = (640 / n).clamp(15, 36);
        let cell_h = (260 / r.layers.max(1) as i64).clamp(16, 30);
        let grid_h = cell_h * r.layers as i64;
        let panel_w = cell_w * n;
        let first = MARGIN + 20 + ROW_LABELS;
        let panel_x =
            std::array::from_fn(|k| first + k as i64 * (panel_w + PANEL_GAP + ROW_LABELS));
        let legend_x = panel_x[2] + panel_w + 26;
        let legend_h = grid_h.max(120);
        let chart_x = legend_x + 80;
        let labels_h = text_width(r.tokens.iter().map(String::as_str)) + 8;
        let chart_h = 30 + 20 * chart_rows(view) as i64;
        let band_h = grid_h + 6 + labels_h + 44;
        let bands = other_methods(view).len() as i64;
        let importance = match importance_rows(view).len() as i64 {
            0 => 0,
            rows => 44 + rows * IMPORTANCE_ROW + 6 + labels_h,
        };
        let height = (GRID_TOP + grid_h + 6 + labels_h)
            .max(GRID_TOP + legend_h + 12)
            .max(GRID_TOP + chart_h)
            + MARGIN
            + bands * band_h
            + importance;
        Self {
            cell_w,
            cell_h,
            grid_h,
            panel_x,
            legend_x,
            legend_h,
            chart_x,
            band_h,
            width: chart_x + chart_width(view) + MARGIN,
            height,
        }
    }
}

/// The methods of `--mixing` besides attention, whose maps are the main panels.
fn other_methods(view: &View) -> Vec<(&String, &crate::methods::MethodMaps)> {
    let methods = view.report.methods.iter().flatten();
    methods
        .filter(|(name, _)| name.as_str() != "attention")
        .collect()
}

/// The estimated width of the longest of `texts` at 12px.
fn text_width<'a>(texts: impl Iterator<Item = &'a str>) -> i64 {
    let chars = texts.map(|t| t.chars().count()).max().unwrap_or(0);
    (chars as f64 * CHAR_W).ceil() as i64
}

/// The SVG text of the figure.
pub fn figure(view: &View) -> String {
    let layout = Layout::new(view);
    let (w, h) = (layout.width, layout.height);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"{FONT_FAMILY}\" font-size=\"12\" fill=\"{INK}\">\n"
    );
    svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
    header(&mut svg, view);
    let max = scale_max(view);
    let r = &view.report.relevance;
    // A map the report lacks (flow left out of a long text) is an empty panel saying so.
    let maps = [Some(&r.raw), Some(&r.rollout), r.flow.as_ref()];
    for (k, rows) in maps.into_iter().enumerate() {
        let title = titled(METHODS[k], rows.is_some());
        let rows = rows.map_or(&[][..], |rows| rows);
        panel(&mut svg, view, &layout, k, GRID_TOP, &title, rows, max);
    }
    // With --mixing, one band per other method, each on its own scale.
    for (i, (name, maps)) in other_methods(view).into_iter().enumerate() {
        let top = GRID_TOP + (i as i64 + 1) * layout.band_h;
        let maps = [Some(&maps.layer), Some(&maps.rollout), maps.flow.as_ref()];
        let max = maps
            .iter()
            .flatten()
            .flat_map(|rows| rows.iter().flatten())
            .fold(1e-12, |m: f64, v| m.max(*v));
        for (k, rows) in maps.into_iter().enumerate() {
            let title = titled(
                &format!("{name}: {}", ["layer", "rollout", "flow"][k]),
                rows.is_some(),
            );
            let rows = rows.map_or(&[][..], |rows| rows);
            panel(&mut svg, view, &layout, k, top, &title, rows, max);
        }
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" fill=\"{MUTED}\">own scale: 0 to {max:.4}</text>",
            layout.legend_x,
            top + 12
        );
    }
    let bands = other_methods(view).len() as i64 + 1;
    importance_band(&mut svg, view, &layout, GRID_TOP + bands * layout.band_h);
    legend(&mut svg, &layout, max);
    chart(&mut svg, view, &layout);
    svg += "</svg>\n";
    svg
}

fn header(svg: &mut String, view: &View) {
    let r = &view.report;
    let _ = writeln!(
        svg,
        "<text x=\"{MARGIN}\" y=\"30\" font-size=\"16\">Relevance of each input token for \
         position {} {}</text>",
        view.target_position(),
        esc(&r.target.token)
    );
    let mut note = format!(
        "{} · {} layers × {} heads · one colour scale for all three maps",
        r.model, r.layers, r.heads
    );
    if let Some(hidden) = view.hidden.as_ref().filter(|h| !h.is_empty()) {
        let tokens: Vec<&str> = hidden.iter().map(|t| t.token.as_str()).collect();
        let _ = write!(note, " · left out and renormalised: {}", tokens.join(" "));
    }
    let _ = writeln!(
        svg,
        "<text x=\"{MARGIN}\" y=\"52\" fill=\"{MUTED}\">{}</text>",
        esc(&note)
    );
}

/// The height of one importance score's row of cells.
const IMPORTANCE_ROW: i64 = 18;

/// The headline importance scores the report has (`--evaluate`, `--lrp`), in report order.
pub(super) fn importance_rows(view: &View) -> Vec<(&'static Score, &[f64])> {
    let Some(importance) = &view.report.importance else {
        return Vec::new();
    };
    headline_scores()
        .filter_map(|s| Some((s, importance.score(s.name)?)))
        .collect()
}

/// With importance scores, one row of cells per headline score under the maps, each on its
/// own scale (signed ones red where they raise the prediction, blue where they lower it),
/// its top edge at `top`.
fn importance_band(svg: &mut String, view: &View, at: &Layout, top: i64) {
    let rows = importance_rows(view);
    let Some(importance) = rows.first().and(view.report.importance.as_ref()) else {
        return;
    };
    let r = &view.report;
    let (x0, cw, ch) = (at.panel_x[0], at.cell_w, IMPORTANCE_ROW);
    let _ = writeln!(
        svg,
        "<text x=\"{x0}\" y=\"{}\" font-size=\"14\">{}</text>",
        top - 12,
        esc(&format!(
            "Importance of each token for “{}” (each row on its own scale; red raises it, blue lowers it)",
            importance.word
        ))
    );
    let width = cw * r.tokens.len() as i64;
    for (i, (score, values)) in rows.iter().enumerate() {
        let y = top + i as i64 * ch;
        let largest = values.iter().fold(1e-12, |m: f64, v| m.max(v.abs()));
        for (j, value) in values.iter().enumerate() {
            let colour = match score.signed {
                true => diverging(value / largest),
                false => ramp(value / largest),
            };
            let _ = writeln!(
                svg,
                "<rect x=\"{}\" y=\"{y}\" width=\"{cw}\" height=\"{ch}\" fill=\"{}\">\
                 <title>{}, {}: {value:.4}</title></rect>",
                x0 + j as i64 * cw,
                hex(colour),
                score.label,
                esc(&r.tokens[j]),
            );
        }
        let range = match score.signed {
            true => format!("±{largest:.4}"),
            false => format!("0 to {largest:.4}"),
        };
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" fill=\"{MUTED}\">{} ({range})</text>",
            x0 + width + 6,
            y + ch / 2 + 4,
            score.label
        );
    }
    let height = ch * rows.len() as i64;
    let _ = writeln!(
        svg,
        "<rect x=\"{x0}\" y=\"{top}\" width=\"{width}\" height=\"{height}\" fill=\"none\" \
         stroke=\"#999\" stroke-width=\"0.5\"/>"
    );
    token_labels(svg, &r.tokens, (x0, cw), top + height + 6, None);
}

/// A panel's title, saying so where its map was not computed.
fn titled(title: &str, computed: bool) -> String {
    match computed {
        true => title.to_string(),
        false => format!("{title} (not computed: --flow)"),
    }
}

/// One map as a layer × token heatmap, its top edge at `top`.
#[allow(clippy::too_many_arguments)]
fn panel(
    svg: &mut String,
    view: &View,
    at: &Layout,
    k: usize,
    top: i64,
    name: &str,
    rows: &[Vec<f64>],
    max: f64,
) {
    let r = &view.report;
    let x0 = at.panel_x[k];
    let (cw, ch) = (at.cell_w, at.cell_h);
    let name = esc(name);
    let _ = writeln!(
        svg,
        "<text x=\"{x0}\" y=\"{}\" font-size=\"14\">{name}</text>",
        top - 12
    );
    if k == 0 {
        let (x, y) = (MARGIN + 8, top + at.grid_h / 2);
        let _ = writeln!(
            svg,
            "<text transform=\"translate({x},{y}) rotate(-90)\" text-anchor=\"middle\" \
             fill=\"{MUTED}\">layer</text>"
        );
    }
    let layers = rows.len();
    for (l, row) in rows.iter().enumerate() {
        // The last layer on top, as in the paper.
        let y = top + (layers - 1 - l) as i64 * ch;
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{MUTED}\">{}</text>",
            x0 - 6,
            y + ch / 2 + 4,
            l + 1
        );
        for (j, value) in row.iter().enumerate() {
            let _ = writeln!(
                svg,
                "<rect x=\"{}\" y=\"{y}\" width=\"{cw}\" height=\"{ch}\" fill=\"{}\">\
                 <title>{name}, layer {}, {}: {value:.4}</title></rect>",
                x0 + j as i64 * cw,
                hex(ramp(value / max)),
                l + 1,
                esc(&r.tokens[j]),
            );
        }
    }
    let width = cw * r.tokens.len() as i64;
    let _ = writeln!(
        svg,
        "<rect x=\"{x0}\" y=\"{top}\" width=\"{width}\" height=\"{}\" fill=\"none\" \
         stroke=\"#999\" stroke-width=\"0.5\"/>",
        at.grid_h
    );
    let tx = x0 + r.target.index as i64 * cw;
    let _ = writeln!(
        svg,
        "<rect x=\"{tx}\" y=\"{top}\" width=\"{cw}\" height=\"{}\" fill=\"none\" \
         stroke=\"{TARGET}\" stroke-width=\"1.5\"/>",
        at.grid_h
    );
    token_labels(
        svg,
        &r.tokens,
        (x0, cw),
        top + at.grid_h + 6,
        Some(r.target.index),
    );
}

/// The tokens under a grid whose columns start at `x0` and are `cw` wide, turned upright,
/// from `y` down; the `target`'s in its colour.
fn token_labels(
    svg: &mut String,
    tokens: &[String],
    (x0, cw): (i64, i64),
    y: i64,
    target: Option<usize>,
) {
    for (j, token) in tokens.iter().enumerate() {
        let x = x0 + j as i64 * cw + cw / 2 + 4;
        let colour = if Some(j) == target { TARGET } else { INK };
        let _ = writeln!(
            svg,
            "<text transform=\"translate({x},{y}) rotate(-90)\" text-anchor=\"end\" \
             fill=\"{colour}\">{}</text>",
            esc(token)
        );
    }
}

fn legend(svg: &mut String, at: &Layout, max: f64) {
    let (x, h) = (at.legend_x, at.legend_h);
    let _ = writeln!(
        svg,
        "<text x=\"{x}\" y=\"{}\" font-size=\"14\">Scale</text>",
        GRID_TOP - 12
    );
    svg.push_str("<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">");
    for (i, colour) in RAMP.iter().enumerate() {
        let offset = i as f64 / (RAMP.len() - 1) as f64;
        let _ = write!(
            svg,
            "<stop offset=\"{offset:.3}\" stop-color=\"{}\"/>",
            hex(*colour)
        );
    }
    svg.push_str("</linearGradient></defs>\n");
    let _ = writeln!(
        svg,
        "<rect x=\"{x}\" y=\"{GRID_TOP}\" width=\"14\" height=\"{h}\" fill=\"url(#scale)\" \
         stroke=\"#999\" stroke-width=\"0.5\"/>"
    );
    let (step, decimals) = tick_step(max);
    let mut tick = 0.0;
    while tick <= max * (1.0 + 1e-9) {
        let y = GRID_TOP + h - ((tick / max) * h as f64).round() as i64;
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{INK}\"/>\
             <text x=\"{}\" y=\"{}\">{tick:.decimals$}</text>",
            x + 14,
            x + 18,
            x + 21,
            y + 4
        );
        tick += step;
    }
}

/// A round step giving 3 to 6 ticks from 0 to `max`, and the decimals it needs.
fn tick_step(max: f64) -> (f64, usize) {
    let rough = max / 4.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let factor = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|f| f * magnitude >= rough)
        .unwrap_or(10.0);
    let step = factor * magnitude;
    let decimals = (-step.log10().floor()).max(0.0) as usize + usize::from(factor == 2.5);
    (step, decimals)
}

fn chart_rows(view: &View) -> usize {
    match &view.report.prediction {
        Some(p) => p.groups().iter().map(|(_, items)| items.len() + 1).sum(),
        None => 3,
    }
}

fn chart_width(view: &View) -> i64 {
    let groups = view.report.prediction.as_ref().map(Prediction::groups);
    let words = groups
        .iter()
        .flatten()
        .flat_map(|(_, items)| items.iter().map(|(w, _)| *w));
    text_width(words).max(40) + 8 + 120 + 64
}

/// Horizontal bars: the candidates, then the top predictions (or a classifier's labels), on
/// one axis.
fn chart(svg: &mut String, view: &View, at: &Layout) {
    let x = at.chart_x;
    let _ = writeln!(
        svg,
        "<text x=\"{x}\" y=\"{}\" font-size=\"14\">Prediction</text>",
        GRID_TOP - 12
    );
    let Some(prediction) = &view.report.prediction else {
        for (i, line) in ["Unavailable: this report", "has no prediction head."]
            .iter()
            .enumerate()
        {
            let _ = writeln!(
                svg,
                "<text x=\"{x}\" y=\"{}\" fill=\"{MUTED}\">{line}</text>",
                GRID_TOP + 12 + 18 * i as i64
            );
        }
        return;
    };
    let groups = prediction.groups();
    let all = groups.iter().flat_map(|(_, items)| items);
    let max = all.clone().map(|(_, p)| *p).fold(0.0, f64::max);
    let bar_x = x + text_width(all.map(|(w, _)| *w)).max(40) + 8;
    let mut y = GRID_TOP + 12;
    let colours = ["#225ea8", "#8c8c8c"];
    for ((title, words), colour) in groups.iter().zip(colours.iter().cycle()) {
        if words.is_empty() {
            continue;
        }
        let _ = writeln!(
            svg,
            "<text x=\"{x}\" y=\"{y}\" fill=\"{MUTED}\">{title}</text>"
        );
        y += 20;
        for (word, p) in words {
            let len = if max > 0.0 {
                (p / max * 120.0).round() as i64
            } else {
                0
            };
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{y}\" text-anchor=\"end\">{}</text>\
                 <rect x=\"{bar_x}\" y=\"{}\" width=\"{len}\" height=\"13\" fill=\"{colour}\">\
                 <title>p({}) = {}</title></rect>\
                 <text x=\"{}\" y=\"{y}\" fill=\"{MUTED}\">{}</text>",
                bar_x - 8,
                esc(word),
                y - 11,
                esc(word),
                p,
                bar_x + len + 4,
                probability(*p)
            );
            y += 20;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(1.0), (0.25, 2));
        assert_eq!(tick_step(0.6), (0.2, 1));
        assert_eq!(tick_step(0.08), (0.02, 2));
    }
}
