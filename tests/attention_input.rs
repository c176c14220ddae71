//! `--attention FILE`: attention saved by another framework, explained without a model.

mod common;

use std::path::{Path, PathBuf};

use bert_explain::Report;
use candle_core::{Device, Tensor};
use common::{bin, fails, fixture, flow, report_of, AttentionFixture};

/// The reference's own attention for a tiny-model case and the stack as a tensor.
fn reference_attention(name: &str) -> (Tensor, AttentionFixture) {
    let fixture = AttentionFixture::load(name);
    (fixture.tensor(), fixture)
}

/// A tiny-model case's reference attention saved as a .npy stack in a fresh folder (kept
/// while the folder is), its path, and the case.
fn saved_npy(name: &str) -> (tempfile::TempDir, PathBuf, AttentionFixture) {
    let (attention, fixture) = reference_attention(name);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("attention.npy");
    attention.write_npy(&file).unwrap();
    (dir, file, fixture)
}

fn run(args: &[&str]) -> Report {
    report_of(bin().args(args))
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn assert_rows_close(got: &[Vec<f64>], want: &[Vec<f64>], tolerance: f64) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.len(), w.len());
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= tolerance, "{a} vs {b}");
        }
    }
}

#[test]
fn npy_stack_gives_the_reference_maps_without_a_model() {
    let (_dir, file, fixture) = saved_npy("modern-author");
    let tokens = fixture.tokens.join(" ");
    let report = run(&["--attention", arg(&file), "--tokens", &tokens, "--json"]);
    let want = common::fixture("modern-author");
    assert_eq!(
        report.target.index, fixture.target,
        "the [MASK] among --tokens"
    );
    assert_eq!(report.tokens, want.tokens);
    assert_eq!((report.layers, report.heads), (want.layers, want.heads));
    assert!(report.prediction.is_none());
    assert_eq!(report.model, file.display().to_string());
    // The same attention as the reference's, so only f64 rounding separates them.
    for (got, want) in [
        (&report.relevance.raw, &want.relevance.raw),
        (&report.relevance.rollout, &want.relevance.rollout),
        (flow(&report.relevance), flow(&want.relevance)),
    ] {
        assert_rows_close(got, want, 1e-9);
    }
}

#[test]
fn fused_safetensors_stack_with_a_target_and_default_tokens() {
    let (attention, fixture) = reference_attention("legacy-his-target");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fused.safetensors");
    // [L, n, n]: the heads already averaged, as a framework might save them.
    let fused = attention.mean(1).unwrap();
    candle_core::safetensors::save(
        &std::collections::HashMap::from([("attention", fused)]),
        &file,
    )
    .unwrap();
    let target = fixture.target.to_string();
    let report = run(&["--attention", arg(&file), "--target", &target, "--json"]);
    let n = fixture.tokens.len();
    assert_eq!(
        report.tokens,
        (0..n).map(|i| i.to_string()).collect::<Vec<_>>()
    );
    assert_eq!(report.heads, 1);
    let want = fixture_relevance("legacy-his-target");
    assert_rows_close(flow(&report.relevance), flow(&want), 1e-6);
    assert_rows_close(&report.relevance.rollout, &want.rollout, 1e-6);
}

fn fixture_relevance(name: &str) -> bert_explain::Relevance {
    fixture(name).relevance
}

#[test]
fn all_positions_holds_every_source_and_agrees_with_the_target_rows() {
    let (_dir, file, fixture) = saved_npy("encoder-flowers");
    let report = run(&[
        "--attention",
        arg(&file),
        "--target",
        "3",
        "--all-positions",
        "--json",
    ]);
    let all = report.all_positions.expect("all_positions in the report");
    let (layers, n) = (report.layers, fixture.tokens.len());
    // Raw rows are the model's f32 attention; rollout and flow are normalised in f64.
    for (maps, tolerance) in [
        (&all.raw, 1e-6),
        (&all.rollout, 1e-9),
        (all.flow.as_ref().unwrap(), 1e-9),
    ] {
        assert_eq!(maps.len(), layers);
        assert!(maps
            .iter()
            .all(|m| m.len() == n && m.iter().all(|r| r.len() == n)));
        for row in maps.iter().flatten() {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < tolerance);
        }
    }
    for l in 0..layers {
        assert_eq!(all.flow.as_ref().unwrap()[l][3], flow(&report.relevance)[l]);
        assert_rows_close(
            &[all.raw[l][3].clone()],
            &[report.relevance.raw[l].clone()],
            1e-15,
        );
        assert_rows_close(
            &[all.rollout[l][3].clone()],
            &[report.relevance.rollout[l].clone()],
            1e-15,
        );
    }
}

/// Writes `values` with `dims` as .npy and returns the path.
fn npy(dir: &Path, values: Vec<f32>, dims: &[usize]) -> PathBuf {
    let path = dir.join(format!("bad-{}.npy", values.len()));
    Tensor::from_vec(values, dims, &Device::Cpu)
        .unwrap()
        .write_npy(&path)
        .unwrap();
    path
}

#[test]
fn bad_attention_files_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let wrong_shape = npy(dir.path(), vec![0.5; 12], &[2, 2, 3]);
    fails(
        &["--attention", arg(&wrong_shape), "--target", "0"],
        1,
        &["[2, 2, 3]"],
    );
    let mut values = vec![0.5f32; 8];
    values[5] = f32::INFINITY;
    let infinite = npy(dir.path(), values, &[2, 2, 2]);
    fails(
        &["--attention", arg(&infinite), "--target", "0"],
        1,
        &["layer 2 head 0 row 0 holds inf"],
    );
    let scores = npy(dir.path(), vec![0.6; 18], &[2, 3, 3]);
    fails(
        &["--attention", arg(&scores), "--target", "0"],
        1,
        &["sums to 1.8"],
    );
    let good = npy(dir.path(), vec![0.5; 4], &[1, 2, 2]);
    fails(
        &[
            "--attention",
            arg(&good),
            "--tokens",
            "a b c",
            "--target",
            "0",
        ],
        2,
        &["3 tokens"],
    );
    fails(&["--attention", arg(&good)], 2, &["--target"]);
    fails(
        &["--attention", arg(&good), "--target", "2"],
        2,
        &["out of range"],
    );
    fails(
        &[
            "--attention",
            arg(&dir.path().join("none.npy")),
            "--target",
            "0",
        ],
        1,
        &["no such file"],
    );
    let text = dir.path().join("a.txt");
    std::fs::write(&text, "0.5").unwrap();
    fails(
        &["--attention", arg(&text), "--target", "0"],
        1,
        &["neither .npy nor .safetensors"],
    );
    fails(
        &["--attention", arg(&good), "a sentence [MASK]"],
        2,
        &["cannot be used with"],
    );
}

/// BERT_EXPLAIN_FLOW_STATS adds to standard error a table of how each layer's flows were
/// settled, one row per layer, and changes nothing on standard output.
#[test]
fn flow_counts_on_standard_error_when_asked_for() {
    let (_dir, file, fixture) = saved_npy("modern-author");
    let target = fixture.target.to_string();
    let args = ["--attention", arg(&file), "--target", &target, "--json"];
    let plain = bin().args(args).output().unwrap();
    let counted = bin()
        .args(args)
        .env("BERT_EXPLAIN_FLOW_STATS", "1")
        .output()
        .unwrap();
    assert!(plain.status.success() && counted.status.success());
    assert_eq!(plain.stdout, counted.stdout);
    let plain_err = String::from_utf8(plain.stderr).unwrap();
    assert!(!plain_err.contains("how each layer's flows were settled"));
    let err = String::from_utf8(counted.stderr).unwrap();
    let rows: Vec<&str> = err
        .lines()
        .skip_while(|line| !line.contains("how each layer's flows were settled"))
        .skip(3)
        .take_while(|line| line.starts_with('|'))
        .collect();
    let n = fixture.tokens.len();
    assert_eq!(rows.len(), common::fixture("modern-author").layers, "{err}");
    for (l, row) in rows.iter().enumerate() {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[1], (l + 1).to_string());
        // Every sink's flow from the target is settled once per layer, one way or another.
        let settled: usize = cells[2..6]
            .iter()
            .map(|c| c.parse::<usize>().unwrap())
            .sum();
        assert_eq!(settled, n, "layer {}: {row}", l + 1);
        if l < 2 {
            assert_eq!(cells[2], n.to_string(), "layers 1 and 2 have a closed form");
        }
    }
}

/// Past 1,024 tokens flow is left out unless asked for, with a note saying how to ask; with
/// `--flow` it is there, and `--flow --no-flow` is a usage error.
#[test]
fn flow_is_left_out_of_long_texts_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1025;
    // One layer where each position attends to itself and the position after it.
    let mut values = vec![0f32; n * n];
    for i in 0..n {
        values[i * n + i] += 0.5;
        values[i * n + (i + 1) % n] += 0.5;
    }
    let file = npy(dir.path(), values, &[1, n, n]);
    let args = ["--attention", arg(&file), "--target", "3", "--json"];
    let output = bin().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Report = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report.relevance.flow.is_none());
    assert_eq!(report.relevance.rollout[0][3..5], [0.75, 0.25]);
    assert!(
        stderr.contains("attention flow was left out: 1025 tokens is more than 1024")
            && stderr.contains("--flow"),
        "{stderr}"
    );
    let asked: Report = report_of(bin().args(args).arg("--flow"));
    assert_eq!(flow(&asked.relevance)[0][3..5], [0.75, 0.25]);
    assert_eq!(asked.relevance.rollout, report.relevance.rollout);
    fails(
        &[&args[..], &["--flow", "--no-flow"]].concat(),
        2,
        &["--no-flow"],
    );
}
