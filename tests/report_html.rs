//! `--html` in a real browser: tests/browser/check-report.mjs (check-causal-report.mjs for a
//! generated text) opens the page in headless
//! Chromium (playwright-core) and checks that it loads offline without console errors, that
//! the layer slider and the method switch change the shading, and writes a screenshot to
//! target/tmp/report-html/. Set up with scripts/setup-browser.sh; the test fails when the
//! browser is missing unless BERT_EXPLAIN_SKIP_BROWSER=1.

mod common;

use std::path::{Path, PathBuf};

use common::{bin, repo, AttentionFixture};

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-html");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the page with `args`, then checks it in Chromium; returns the screenshot's path.
fn check_in_browser(name: &str, args: &[&str]) -> PathBuf {
    check_with("check-report.mjs", name, args)
}

/// [`check_in_browser`] with the browser script `script` (tests/browser/).
fn check_with(script: &str, name: &str, args: &[&str]) -> PathBuf {
    let dir = out_dir();
    let page = dir.join(format!("{name}.html"));
    let output = bin().args(args).arg("--html").arg(&page).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let screenshot = dir.join(format!("{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    common::run_browser_check(script, &[&page, &screenshot]);
    let size = std::fs::metadata(&screenshot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "{name}: screenshot of {size} bytes");
    eprintln!("{name}: screenshot {}", screenshot.display());
    screenshot
}

/// A causal model's page: the encoders' page reading a generated text's report
/// (tests/browser/check-causal-report.mjs).
#[test]
fn page_of_a_generated_text_works_in_chromium() {
    if !common::browser_available() {
        return;
    }
    let model = repo().join("models/tiny-gpt2");
    check_with(
        "check-causal-report.mjs",
        "gpt2-author",
        &[
            "--model",
            model.to_str().unwrap(),
            "--generate",
            "3",
            "--flow",
            "--mixing",
            "norm",
            "--lrp",
            "The author talked to",
        ],
    );
}

#[test]
fn page_with_a_prediction_works_in_chromium() {
    if !common::browser_available() {
        return;
    }
    let model = repo().join("models/tiny-bert-modern");
    check_in_browser(
        "modern-author",
        &[
            "--model",
            model.to_str().unwrap(),
            "--evaluate",
            "The author talked to Sara about [MASK] book",
        ],
    );
}

/// A report without flow (`--no-flow`, as a long text's): flow is not offered, its cells say
/// why, and the other maps (a method's, every position's) work as with it.
#[test]
fn page_without_flow_works_in_chromium() {
    if !common::browser_available() {
        return;
    }
    let model = repo().join("models/tiny-bert-modern");
    check_in_browser(
        "modern-author-no-flow",
        &[
            "--model",
            model.to_str().unwrap(),
            "--no-flow",
            "--mixing",
            "norm",
            "--all-positions",
            "The author talked to Sara about [MASK] book",
        ],
    );
}

/// `--attention` input (no prediction) with `--hide-special` and `--all-positions`.
#[test]
fn page_from_an_attention_file_works_in_chromium() {
    if !common::browser_available() {
        return;
    }
    let fixture = AttentionFixture::load("encoder-flowers");
    let file = out_dir().join("encoder-flowers.npy");
    fixture.tensor().write_npy(&file).unwrap();
    let tokens = fixture.tokens.join(" ");
    check_in_browser(
        "attention-file-hidden",
        &[
            "--attention",
            file.to_str().unwrap(),
            "--tokens",
            &tokens,
            "--hide-special",
            "--all-positions",
        ],
    );
}

/// `--mixing all`: the mixing switch shows each method's maps.
#[test]
fn page_with_every_method_works_in_chromium() {
    if !common::browser_available() {
        return;
    }
    let model = repo().join("models/tiny-bert-modern");
    check_in_browser(
        "modern-author-methods",
        &[
            "--model",
            model.to_str().unwrap(),
            "--mixing",
            "all",
            "--all-positions",
            "The author talked to Sara about [MASK] book",
        ],
    );
}

/// An image's page: the picture under its patches, the slider, the method switch, the row of
/// overlays by layer and the importance scores' (tests/browser/check-image-report.mjs).
#[test]
fn page_of_an_image_works_in_chromium() {
    if !common::browser_available() {
        return;
    }
    let model = repo().join("models/tiny-dinov2-registers-cls");
    let image = repo().join("tests/fixtures/vision/images/tall.png");
    check_with(
        "check-image-report.mjs",
        "dinov2-registers-tall",
        &[
            "--model",
            model.to_str().unwrap(),
            "--evaluate",
            image.to_str().unwrap(),
        ],
    );
}
