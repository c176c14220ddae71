//! `--figure` and `--html`: the SVG as a snapshot, the PNG decoded, and bad output paths
//! failing early with a clear message and no file left behind.

mod common;

use std::path::Path;

use bert_explain::report::{figure, View};
use common::{bin, fixture, repo};

const SENTENCE: &str = "The author talked to Sara about [MASK] book";

fn model(name: &str) -> String {
    repo().join("models").join(name).display().to_string()
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn svg_figure_snapshot() {
    insta::assert_snapshot!(
        "figure_modern_author",
        figure(&View::full(fixture("modern-author")))
    );
}

#[test]
fn svg_figure_without_prediction_and_special_tokens_snapshot() {
    let view = View::hide_special(fixture("encoder-flowers"));
    insta::assert_snapshot!("figure_encoder_flowers_hidden", figure(&view));
}

#[test]
fn cli_writes_svg_png_and_html_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).display().to_string();
    let output = bin()
        .args(["--model", &model("tiny-bert-modern"), SENTENCE])
        .args(["--figure", &out("fig.svg"), "--figure", &out("fig.PNG")])
        .args(["--html", &out("page.html")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("Wrote {}", out("fig.svg"))),
        "{stderr}"
    );
    assert_eq!(listing(dir.path()), ["fig.PNG", "fig.svg", "page.html"]);

    let svg = std::fs::read_to_string(out("fig.svg")).unwrap();
    let want = figure(&View::full(fixture("modern-author")));
    // The same figure as the reference report's, up to the model path in the subtitle.
    assert_eq!(svg.lines().count(), want.lines().count());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out("fig.svg"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o600,
            0o600,
            "an ordinary file, not a private temp file"
        );
    }

    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(out("fig.PNG")).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    let (w, h) = svg_size(&svg);
    assert_eq!(
        (info.width, info.height),
        (2 * w, 2 * h),
        "twice the SVG's size"
    );
    let channels = info.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> =
        pixels[..info.buffer_size()].chunks(channels).collect();
    assert!(colours.len() > 100, "only {} colours", colours.len());
    let dark = pixels
        .chunks(channels)
        .filter(|p| p[..3].iter().all(|&c| c < 80))
        .count();
    assert!(
        dark > 2000,
        "{dark} dark pixels: no text or dark cells drawn"
    );

    let html = std::fs::read_to_string(out("page.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for external in ["src=", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(external), "the page loads {external}…");
    }
}

fn svg_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| -> u32 {
        let start = svg.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        let end = start + svg[start..].find('"').unwrap();
        svg[start..end].parse().unwrap()
    };
    (attr("width"), attr("height"))
}

/// Runs with a bad output path: status, stderr.
fn fails(args: &[&str]) -> (i32, String) {
    let output = bin()
        .args(["--model", &model("tiny-bert-modern"), SENTENCE])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (output.status.code().unwrap(), stderr)
}

#[test]
fn missing_folder_fails_before_the_model_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/folder/fig.svg");
    let output = bin()
        .args(["--model", "/no/such/model", SENTENCE, "--figure"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot create {}", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("folder does not exist"), "{stderr}");
    assert!(
        !stderr.contains("/no/such/model"),
        "checked before loading: {stderr}"
    );
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn unwritable_places_fail_with_status_1_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("fig.png");
    // A folder in the way of the final name: the rename fails after rendering.
    std::fs::create_dir(dir.path().join("taken.html")).unwrap();
    let taken = dir.path().join("taken.html");
    for (flag, path) in [
        ("--figure", under_file.display().to_string()),
        ("--figure", "/sys/bert-explain-figure.svg".to_string()),
        ("--html", "/proc/bert-explain-report.html".to_string()),
        ("--html", taken.display().to_string()),
    ] {
        let (code, stderr) = fails(&[flag, &path]);
        assert_eq!(code, 1, "{path}: {stderr}");
        assert!(stderr.contains(&path), "{path}: {stderr}");
    }
    assert_eq!(listing(dir.path()), ["plain-file", "taken.html"]);
    assert!(listing(&taken).is_empty());
    assert!(!Path::new("/sys/bert-explain-figure.svg").exists());
}

#[cfg(unix)]
#[test]
fn read_only_folder_fails_unless_root() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("read-only");
    std::fs::create_dir(&folder).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::write(folder.join("probe"), "").is_ok() {
        eprintln!("skipped: running as root, which may write into a read-only folder");
        return;
    }
    let path = folder.join("fig.svg").display().to_string();
    let (code, stderr) = fails(&["--figure", &path]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
    assert!(listing(&folder).is_empty());
}

#[test]
fn unknown_extensions_are_usage_errors() {
    for (flag, path, hint) in [
        ("--figure", "fig.jpg", ".svg or .png"),
        ("--figure", "figure", ".svg or .png"),
        ("--html", "report.txt", ".html"),
    ] {
        let (code, stderr) = fails(&[flag, path]);
        assert_eq!(code, 2, "{path}: {stderr}");
        assert!(stderr.contains(path) && stderr.contains(hint), "{stderr}");
    }
}
