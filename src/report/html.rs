//! One self-contained HTML page: the report inlined as JSON, the styles and the script
//! inline, no network requests. The sentence is shaded by relevance, with a method switch,
//! a layer slider, the three heatmaps (values on hover) and the prediction. A generated
//! text's report gets the same page: the prompt shaded for the generated token picked.

use std::io::Write;

use serde::Serialize;

use super::colour::{DIVERGING, RAMP};
use super::escape::esc;
use super::picture::data_uri;
use super::{Explained, Renderer};
use crate::faithfulness::{headline_scores, Score};

const CSS: &str = include_str!("html/page.css");
const SCRIPT: &str = include_str!("html/page.js");
/// An image report's part of the page, before the page's own script.
const IMAGE_SCRIPT: &str = include_str!("html/image.js");

/// Prints the HTML page.
pub struct Html;

/// What the page's script reads.
#[derive(Serialize)]
struct PageData<'a, R: Serialize> {
    report: &'a R,
    /// Position in the model's input of each shown token (an encoder's report).
    positions: &'a [usize],
    ramp: &'a [[u8; 3]],
    /// The ends of the signed scores' scale, at 1 and at −1.
    diverging: &'a [[u8; 3]; 2],
    /// The generated token the page opens on (a causal report).
    #[serde(skip_serializing_if = "Option::is_none")]
    generated: Option<usize>,
    /// The headline importance scores, in report order: which the page shows, under what
    /// label, and whether signed.
    scores: Vec<&'static Score>,
    /// An image report's picture as the model saw it, a PNG `data:` URI.
    #[serde(skip_serializing_if = "Option::is_none")]
    picture: Option<String>,
}

impl Renderer for Html {
    fn render(&self, shown: &Explained, out: &mut dyn Write) -> std::io::Result<()> {
        match shown {
            Explained::Encoder(view) => {
                let data = PageData {
                    report: view,
                    positions: &view.positions,
                    ramp: &RAMP,
                    diverging: &DIVERGING,
                    generated: None,
                    scores: headline_scores().collect(),
                    picture: view.report.picture.as_deref().map(data_uri).transpose()?,
                };
                let r = &view.report;
                let title = format!(
                    "bert-explain: {} at position {}",
                    r.model,
                    view.target_position()
                );
                write_page(out, &title, &data)
            }
            Explained::Generated(generated) => {
                let report = &generated.report;
                let data = PageData {
                    report,
                    positions: &[],
                    ramp: &RAMP,
                    diverging: &DIVERGING,
                    generated: Some(generated.token),
                    scores: headline_scores().collect(),
                    picture: None,
                };
                let title = format!("bert-explain: {}, {}", report.model, report.prompt);
                write_page(out, &title, &data)
            }
        }
    }
}

fn write_page<R: Serialize>(
    out: &mut dyn Write,
    title: &str,
    data: &PageData<R>,
) -> std::io::Result<()> {
    let json = script_safe(&serde_json::to_string(data)?);
    let title = esc(title);
    write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="bert-explain {version}">
<title>{title}</title>
<link rel="icon" href="data:,">
<style>
{CSS}</style>
</head>
<body>
<header>
<h1>What the model looked at</h1>
<p class="meta" id="meta"></p>
<p class="note" id="hidden-note"></p>
</header>
<section id="controls">
<fieldset id="mixing"><legend>Mixing</legend></fieldset>
<fieldset id="method"><legend>Method</legend></fieldset>
<label for="layer">Layer <input type="range" id="layer" min="1" step="1"> <output id="layer-value"></output></label>
</section>
<section>
<p class="note" id="selection"></p>
<div id="sentence"></div>
<p class="note" id="pick-note"></p>
</section>
<section class="columns">
<div id="ranking"><h2>Most relevant tokens</h2><ol></ol></div>
<div id="prediction"><h2>Prediction</h2></div>
</section>
<section>
<h2>Layer × token, last layer on top</h2>
<div id="heatmaps"></div>
<p id="legend"></p>
</section>
<section id="importance" hidden></section>
<noscript>This page draws the report with JavaScript; the data is in the script element below.</noscript>
<script type="application/json" id="report-data">{json}</script>
<script>
{IMAGE_SCRIPT}
{SCRIPT}</script>
</body>
</html>
"#,
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// JSON that cannot end the script element or open a comment: `<`, `>` and `&` only occur
/// inside JSON strings, where their \u escapes mean the same.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_json_cannot_close_the_script() {
        let json = serde_json::to_string("</script><!--&").unwrap();
        let safe = script_safe(&json);
        assert!(!safe.contains('<') && !safe.contains('>'));
        let back: String = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, "</script><!--&");
    }
}
