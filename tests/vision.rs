//! Vision transformers (SPEC §10) against transformers: the tiny ViT, DeiT and DINOv2
//! checkpoints of scripts/reference/make_tiny_vision.py (fixed seeds), the reference
//! reports of scripts/reference/vision_reference.py (eager attention, the paper's rollout,
//! networkx's flow), each case's pixel values saved beside its report.

mod common;

use std::path::{Path, PathBuf};

use bert_explain::explain::Input;
use bert_explain::image::Pixels;
use bert_explain::report::Prediction;
use bert_explain::{ExplainOptions, Explainer, ModelSource, Report};
use candle_core::{Device, Tensor};
use common::{assert_matches, repo};
use serde::Deserialize;

/// Probabilities and every map, as for the text families.
const TOLERANCE: f64 = 1e-5;

/// One row of tests/fixtures/vision/cases.json.
#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    model: String,
    image: PathBuf,
    target: Option<usize>,
}

fn fixtures() -> PathBuf {
    repo().join("tests/fixtures/vision")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fixture(name: &str) -> Report {
    let path = fixtures().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// The pixel values transformers' image processor gave the case.
fn pixels(name: &str) -> Pixels {
    let path = fixtures().join(format!("{name}.pixels.npy"));
    let tensor = Tensor::read_npy(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let tensor = match tensor.rank() {
        4 => tensor.squeeze(0).unwrap(),
        _ => tensor,
    };
    let (_, height, width) = tensor.dims3().unwrap();
    Pixels {
        height,
        width,
        values: tensor.flatten_all().unwrap().to_vec1().unwrap(),
    }
}

fn explainer(model: &str) -> Explainer {
    let folder = repo().join("models").join(model);
    Explainer::load(&ModelSource::Folder(folder), &Device::Cpu).unwrap()
}

/// Every case's report from transformers' own pixel values: the model, the tokens, the
/// prediction and the maps, apart from the preprocessing.
#[test]
fn every_family_agrees_with_transformers_on_its_pixel_values() {
    let cases = cases();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    for model in [
        "tiny-vit-cls",
        "tiny-vit-encoder",
        "tiny-deit-teacher",
        "tiny-dinov2-cls",
        "tiny-dinov2-registers-cls",
        "tiny-dinov2-encoder",
    ] {
        assert!(cases.iter().any(|c| c.model == model), "{model}: no cases");
    }
    let mut loaded: Vec<(String, Explainer)> = Vec::new();
    for case in &cases {
        if !loaded.iter().any(|(m, _)| *m == case.model) {
            loaded.push((case.model.clone(), explainer(&case.model)));
        }
        let (_, explainer) = loaded.iter().find(|(m, _)| *m == case.model).unwrap();
        let options = ExplainOptions {
            target: case.target,
            ..ExplainOptions::default()
        };
        let pixels = pixels(&case.name);
        let got = explainer
            .explain_input(Input::Pixels(&pixels), &options)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let want = fixture(&case.name);
        assert_matches(&case.name, &got, &want, TOLERANCE);
        assert_eq!(got.family, want.family, "{}: family", case.name);
        assert_eq!(got.task, want.task, "{}: task", case.name);
        let (got_image, want_image) = (got.image.unwrap(), want.image.clone().unwrap());
        assert_eq!(
            (got_image.grid, got_image.patch),
            (want_image.grid, want_image.patch),
            "{}: grid",
            case.name
        );
        if let Some(Prediction::Labels { labels }) = &want.prediction {
            assert_eq!(labels.len(), 3, "{}: every label", case.name);
        }
        let _ = Path::new(&case.image);
    }
}
