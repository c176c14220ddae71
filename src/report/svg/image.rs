//! The paper's figure for an image (SPEC §10): one row per map (raw attention, rollout,
//! flow, and each `--mixing` method's rollout and flow), the picture the model saw first,
//! then one overlay per layer on the panel's own scale (its largest patch, as vit-explain
//! scales its masks): each patch veiled by how little it matters, so that the picture shows
//! where the map is high (without the picture, the patches in the figures' colour ramp). The
//! tokens before the patches
//! ([CLS], [DIST], registers) are never drawn into the grid: each panel says what share of
//! the map they hold. With importance scores, a last row: one panel per headline score.

use std::fmt::Write as _;

use super::{esc, importance_rows, FONT_FAMILY, INK, MARGIN, MUTED, TARGET};
use crate::report::colour::{diverging, hex, ramp};
use crate::report::patches::{patch_map, PatchMap};
use crate::report::picture::data_uri;
use crate::report::{probability, Prediction, View};

/// How dark the veil over a patch of no relevance is.
const VEIL: f64 = 0.8;
/// How strongly the largest importance score tints its patch over the picture.
const SCORE_TINT: f64 = 0.75;
const TOP: i64 = 100;
const LABEL_W: i64 = 150;
const GAP: i64 = 8;

/// The SVG text of an image report's figure.
pub fn image_figure(view: &View) -> String {
    let r = &view.report;
    let Some(image) = &r.image else {
        return String::new();
    };
    let [rows, cols] = image.grid;
    let maps = maps(view);
    let scores = importance_rows(view);
    // Panels as wide as a row of every layer allows, 56 to 160 pixels; a row of importance
    // scores (one panel each) under the maps where the report has them.
    let columns = r.layers.max(scores.len()) as i64 + 1;
    let side = (960 / columns).clamp(56, 160);
    let (pw, ph) = (side, (side * rows as i64 / cols.max(1) as i64).max(8));
    let row_h = ph + 34;
    let width = MARGIN + LABEL_W + columns * (pw + GAP) + MARGIN;
    let score_rows = i64::from(!scores.is_empty());
    let height = TOP + (maps.len() as i64 + score_rows) * row_h + MARGIN;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" \
         width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         font-family=\"{FONT_FAMILY}\" font-size=\"12\" fill=\"{INK}\">\n"
    );
    svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
    header(&mut svg, view);
    let photo = r.picture.as_deref().and_then(|p| data_uri(p).ok());
    if let Some(uri) = &photo {
        let _ = writeln!(
            svg,
            "<defs><image id=\"photo\" width=\"{pw}\" height=\"{ph}\" \
             preserveAspectRatio=\"none\" href=\"{uri}\"/></defs>"
        );
    }
    let x0 = MARGIN + LABEL_W;
    for l in 0..r.layers {
        let x = x0 + (l as i64 + 1) * (pw + GAP);
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{MUTED}\">layer {}</text>",
            x + pw / 2,
            TOP - 6,
            l + 1
        );
    }
    // A row's label at the left, and the picture where the page has it.
    let row_start = |svg: &mut String, y: i64, label: &str| {
        let _ = writeln!(
            svg,
            "<text x=\"{MARGIN}\" y=\"{}\" font-size=\"13\">{}</text>",
            y + ph / 2 + 4,
            esc(label)
        );
        if photo.is_some() {
            let _ = writeln!(svg, "<use href=\"#photo\" x=\"{x0}\" y=\"{y}\"/>");
        }
    };
    // A panel's caption under it, with a hover.
    let caption = |svg: &mut String, (x, y): (i64, i64), text: &str, hover: &str| {
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" \
             fill=\"{MUTED}\">{}<title>{}</title></text>",
            x + pw / 2,
            y + ph + 14,
            esc(text),
            esc(hover)
        );
    };
    for (k, (name, layers)) in maps.iter().enumerate() {
        let y = TOP + k as i64 * row_h;
        row_start(&mut svg, y, name);
        for (l, map) in layers.iter().enumerate() {
            let x = x0 + (l as i64 + 1) * (pw + GAP);
            overlay(&mut svg, map, (x, y), (pw, ph), photo.is_some());
            let label = format!("patches {:.2}", map.patch_total());
            caption(&mut svg, (x, y), &label, &leading_note(map));
        }
    }
    if let (Some(importance), false) = (&r.importance, scores.is_empty()) {
        let y = TOP + maps.len() as i64 * row_h;
        row_start(&mut svg, y, &format!("Importance for {}", importance.word));
        for (k, (score, values)) in scores.iter().enumerate() {
            let Some(map) = patch_map(view, values) else {
                continue;
            };
            let x = x0 + (k as i64 + 1) * (pw + GAP);
            let largest = score_overlay(&mut svg, &map, (x, y), (pw, ph), photo.is_some());
            let range = match score.signed {
                true => format!("±{largest:.3}"),
                false => format!("0 to {largest:.3}"),
            };
            let label = format!("{} {range}", score.label);
            caption(&mut svg, (x, y), &label, &leading_note(&map));
        }
    }
    svg += "</svg>\n";
    svg
}

/// One importance score's panel on its own scale (the largest patch in size): red where a
/// patch raises the prediction, blue where it lowers it, over the picture as strongly as
/// the patch's share of the largest (the picture shows through where a score is near 0).
/// Returns that largest size.
fn score_overlay(
    svg: &mut String,
    map: &PatchMap,
    (x, y): (i64, i64),
    (w, h): (i64, i64),
    over: bool,
) -> f64 {
    if over {
        let _ = writeln!(svg, "<use href=\"#photo\" x=\"{x}\" y=\"{y}\"/>");
    }
    let largest = map
        .grid
        .iter()
        .flatten()
        .fold(1e-12, |m: f64, v| m.max(v.abs()));
    let rows = map.grid.len().max(1) as f64;
    let cols = map.grid.first().map_or(1, Vec::len).max(1) as f64;
    let (cw, ch) = (w as f64 / cols, h as f64 / rows);
    for (r, row) in map.grid.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            let t = v / largest;
            let (fill, opacity) = match over {
                true => (hex(diverging(t.signum())), SCORE_TINT * t.abs()),
                false => (hex(diverging(t)), 1.0),
            };
            let _ = writeln!(
                svg,
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{cw:.2}\" height=\"{ch:.2}\" \
                 fill=\"{fill}\" fill-opacity=\"{opacity:.3}\"><title>r{r} c{c}: {v:.4}</title></rect>",
                x as f64 + c as f64 * cw,
                y as f64 + r as f64 * ch,
            );
        }
    }
    let _ = writeln!(
        svg,
        "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#999\" \
         stroke-width=\"0.5\"/>"
    );
    largest
}

/// Each map's layers, split: attention's raw, rollout and flow, then each other method's
/// rollout and flow.
fn maps(view: &View) -> Vec<(String, Vec<PatchMap<'_>>)> {
    let r = &view.report;
    let split = |rows: &Vec<Vec<f64>>| -> Vec<PatchMap<'_>> {
        rows.iter().filter_map(|row| patch_map(view, row)).collect()
    };
    let mut maps: Vec<(String, Vec<PatchMap>)> = (r.relevance.named())
        .map(|(name, rows)| (format!("Attention {name}"), split(rows)))
        .collect();
    for (method, m) in r.methods.iter().flatten() {
        if method == "attention" {
            continue;
        }
        maps.push((format!("{method} rollout"), split(&m.rollout)));
        if let Some(flow) = &m.flow {
            maps.push((format!("{method} flow"), split(flow)));
        }
    }
    maps
}

/// One panel: the patches tinted over the picture (or drawn alone without it).
fn overlay(svg: &mut String, map: &PatchMap, (x, y): (i64, i64), (w, h): (i64, i64), over: bool) {
    if over {
        let _ = writeln!(svg, "<use href=\"#photo\" x=\"{x}\" y=\"{y}\"/>");
    }
    let max = map.max();
    let rows = map.grid.len().max(1) as f64;
    let cols = map.grid.first().map_or(1, Vec::len).max(1) as f64;
    let (cw, ch) = (w as f64 / cols, h as f64 / rows);
    for (r, row) in map.grid.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            let t = if max > 0.0 { v / max } else { 0.0 };
            let (fill, opacity) = match over {
                true => ("#000".to_string(), VEIL * (1.0 - t)),
                false => (hex(ramp(t)), 1.0),
            };
            let _ = writeln!(
                svg,
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\" fill=\"{}\" \
                 fill-opacity=\"{opacity:.3}\"><title>r{r} c{c}: {v:.4}</title></rect>",
                x as f64 + c as f64 * cw,
                y as f64 + r as f64 * ch,
                cw,
                ch,
                fill
            );
        }
    }
    let _ = writeln!(
        svg,
        "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#999\" \
         stroke-width=\"0.5\"/>"
    );
}

/// What the tokens before the patches hold of a map, for a panel's hover.
fn leading_note(map: &PatchMap) -> String {
    let apart: Vec<String> = (map.leading.iter())
        .map(|(token, v)| format!("{token} {v:.4}"))
        .collect();
    format!(
        "{}; patches {:.4}; largest patch {:.4}",
        apart.join(", "),
        map.patch_total(),
        map.max()
    )
}

fn header(svg: &mut String, view: &View) {
    let r = &view.report;
    let mut title = format!("What {} looked at, from {}", r.model, r.target.token);
    if let Some(Prediction::Labels { labels }) = &r.prediction {
        if let Some(top) = labels.first() {
            let _ = write!(title, ": {} {}", top.label, probability(top.probability));
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"{MARGIN}\" y=\"30\" font-size=\"16\" fill=\"{TARGET}\">{}</text>",
        esc(&title)
    );
    let image = r.image.as_ref().expect("an image report");
    let mut notes = vec![
        format!(
            "{} × {} pixels as {} × {} patches · {} layers × {} heads",
            image.width, image.height, image.grid[0], image.grid[1], r.layers, r.heads
        ),
        "each panel on its own scale: the clearer a patch, the more it matters (its largest \
         patch clear); under it, the patches' share"
            .to_string(),
    ];
    if let Some(importance) = &r.importance {
        notes.push(format!(
            "importance: red where a patch raises p({}), blue where it lowers it, the largest \
             in size strongest (blank-out makes a patch the {})",
            importance.word, importance.blank_token
        ));
    }
    for (k, note) in notes.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<text x=\"{MARGIN}\" y=\"{}\" fill=\"{MUTED}\">{}</text>",
            50 + 16 * k,
            esc(note)
        );
    }
}
