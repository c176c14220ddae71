//! The causal mode from the command line: a GPT-2 --model selects it; reports, seeded
//! sampling, Hub and vocab.json + merges.txt checkpoints, and clear errors for bad input.

mod common;

use std::path::{Path, PathBuf};

use bert_explain::causal::CausalReport;
use common::{bin, fails, repo};

const PROMPT: &str = "The author talked to Sara about";

fn tiny() -> PathBuf {
    repo().join("models/tiny-gpt2")
}

/// Runs the binary, expecting success, and returns stdout.
fn run(args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = bin();
    for (key, value) in env {
        cmd.env(key, value);
    }
    let output = cmd.args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

fn json(model: &Path, extra: &[&str]) -> CausalReport {
    let model = model.display().to_string();
    let mut args = vec!["--json", "--model", &model];
    args.extend_from_slice(extra);
    args.push(PROMPT);
    serde_json::from_str(&run(&args, &[])).expect("stdout is one JSON report")
}

/// A scratch copy of tiny-gpt2 without the files named in `leave_out`.
fn copy_of_tiny(leave_out: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(tiny()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if !leave_out.iter().any(|l| name == *l) {
            std::fs::copy(&path, dir.path().join(name)).unwrap();
        }
    }
    dir
}

#[test]
fn json_report_has_the_reference_tokens_and_g_by_m_by_l_arrays() {
    let report = json(&tiny(), &["--generate", "8", "--correction"]);
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/fixtures/causal/author.json")).unwrap(),
    )
    .unwrap();
    let ids: Vec<u32> = serde_json::from_value(fixture["generated_ids"].clone()).unwrap();
    assert_eq!(report.mode, "causal");
    assert_eq!(report.generated_ids, ids);
    assert_eq!(report.generation.strategy, "greedy");
    let (g, m, l) = (ids.len(), report.prompt_tokens.len(), report.layers);
    for method in [
        &report.relevance.rollout,
        report.relevance.rollout_corrected.as_ref().unwrap(),
    ] {
        assert_eq!(method.len(), g);
        assert!(method
            .iter()
            .all(|k| k.len() == m && k.iter().all(|j| j.len() == l)));
    }
    assert!(report.relevance.flow.is_none(), "flow only with --flow");
    assert_eq!(report.ranking.method, "rollout_corrected");
    assert!(report.ranking.top.iter().all(|top| top.len() == 3));
}

#[test]
fn terminal_report_lists_top_prompt_tokens_and_skips_common_words() {
    let model = tiny().display().to_string();
    let out = run(
        &[
            "--model",
            &model,
            "--generate",
            "3",
            "--top-prompt",
            "2",
            PROMPT,
        ],
        &[],
    );
    assert!(out.contains("Generated: "), "{out}");
    assert!(
        out.contains("Top prompt tokens for each generated token (rollout"),
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.contains(" ← ")).count(),
        3,
        "{out}"
    );
    let skipped = json(
        &tiny(),
        &["--generate", "3", "--skip-common", "--top-prompt", "9"],
    );
    for top in &skipped.ranking.top {
        assert!(top
            .iter()
            .all(|t| ![" to", " about", "The"].contains(&t.token.as_str())));
    }
}

#[test]
fn the_same_seed_gives_the_same_tokens_and_seeds_differ() {
    let sample = |seed: u64| {
        let seed = seed.to_string();
        let args = [
            "--generate",
            "8",
            "--sample",
            "--seed",
            &seed,
            "--temperature",
            "1.5",
        ];
        json(&tiny(), &args).generated_ids
    };
    assert_eq!(sample(1), sample(1));
    let distinct: std::collections::HashSet<Vec<u32>> = (1..=4).map(sample).collect();
    assert!(
        distinct.len() > 1,
        "four seeds gave the same tokens: {distinct:?}"
    );
    let report = json(&tiny(), &["--generate", "2", "--sample", "--seed", "9"]);
    assert_eq!(
        (report.generation.seed, report.generation.temperature),
        (Some(9), Some(1.0))
    );
}

#[test]
fn loads_vocab_json_and_merges_and_the_hub_cache() {
    let greedy = json(&tiny(), &["--generate", "5"]).generated_ids;
    let two_files = copy_of_tiny(&["tokenizer.json"]);
    assert_eq!(
        json(two_files.path(), &["--generate", "5"]).generated_ids,
        greedy
    );

    let cache = tempfile::tempdir().unwrap();
    let repo_dir = cache.path().join("models--org--tiny-gpt2");
    let snapshot = repo_dir.join("snapshots/0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo_dir.join("refs")).unwrap();
    std::fs::write(repo_dir.join("refs/main"), "0123abcd").unwrap();
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(tiny().join(file), snapshot.join(file)).unwrap();
    }
    let out = run(
        &[
            "--json",
            "--model",
            "org/tiny-gpt2",
            "--generate",
            "5",
            PROMPT,
        ],
        &[("HF_HUB_CACHE", cache.path())],
    );
    let report: CausalReport = serde_json::from_str(&out).unwrap();
    assert_eq!(report.generated_ids, greedy);
    assert_eq!(report.model, "org/tiny-gpt2");
}

#[test]
fn bad_input_gets_clear_errors() {
    let model = tiny().display().to_string();
    let m = model.as_str();
    fails(&["--model", m, ""], 2, &["prompt is empty"]);
    fails(
        &["--model", m, "--generate", "0", PROMPT],
        2,
        &["--generate 0"],
    );
    let long = "word ".repeat(40);
    fails(&["--model", m, &long], 2, &["context holds only 32"]);
    fails(
        &["--model", m, "--generate", "30", PROMPT],
        2,
        &["plus --generate 30", "at most 24"],
    );
    fails(&["--model", m, "--seed", "3", PROMPT], 2, &["--sample"]);
    fails(
        &["--model", m, "--sample", "--temperature", "0", PROMPT],
        2,
        &["positive"],
    );
    fails(
        &["--model", m, "--target", "2", PROMPT],
        2,
        &["--target applies to encoders"],
    );
    let bert = repo().join("models/tiny-bert-modern").display().to_string();
    fails(
        &["--model", &bert, "--generate", "3", "a [MASK] b"],
        2,
        &["--generate applies to causal language models", "is not one"],
    );
}

#[test]
fn broken_or_foreign_checkpoints_are_named() {
    let falcon = copy_of_tiny(&[]);
    let config = falcon.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("\"gpt2\"", "\"falcon\"")).unwrap();
    fails(
        &["--model", &falcon.path().display().to_string(), PROMPT],
        1,
        &[
            "\"falcon\"",
            "electra, modernbert, deberta-v2, vit, deit, dinov2, dinov2_with_registers, gpt2, llama, \
             qwen2, mistral, qwen3, gemma, gemma2",
        ],
    );

    let wide = copy_of_tiny(&[]);
    let config = wide.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("\"n_positions\": 32", "\"n_positions\": 64"),
    )
    .unwrap();
    let wide = wide.path().display().to_string();
    fails(
        &["--model", &wide, PROMPT],
        1,
        &["transformer.wpe.weight", "[32, 32]"],
    );

    let truncated = copy_of_tiny(&[]);
    let weights = truncated.path().join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let truncated = truncated.path().display().to_string();
    fails(
        &["--model", &truncated, PROMPT],
        1,
        &["model.safetensors", "truncated"],
    );
}

#[test]
fn figures_draw_both_maps_and_the_page_opens_on_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let (svg, png, html) = (
        dir.path().join("c.svg"),
        dir.path().join("c.png"),
        dir.path().join("c.html"),
    );
    let model = tiny().display().to_string();
    let paths = [&svg, &png, &html].map(|p| p.display().to_string());
    let args = [
        "--model",
        &model,
        "--generate",
        "4",
        "--figure-token",
        "1",
        "--figure",
        &paths[0],
    ];
    let mut args = args.to_vec();
    args.extend(["--figure", &paths[1], "--html", &paths[2], PROMPT]);
    run(&args, &[]);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("mean over layers") && text.contains("Generated token 1"),
        "{text}"
    );
    // 4 generated × 8 prompt cells, then 3 layers × 8 prompt cells, each with a hover title.
    assert_eq!(text.matches("<title>").count(), 4 * 8 + 3 * 8);
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    // The interactive page (tests/report_html.rs drives it), opened on --figure-token's
    // generated token.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(r#"id="report-data""#) && page.contains(r#""generated":1"#),
        "{page}"
    );
    fails(
        &[
            "--model",
            &model,
            "--generate",
            "2",
            "--figure-token",
            "5",
            "--figure",
            &paths[0],
            PROMPT,
        ],
        2,
        &["--figure-token 5 is out of range", "tokens 0 to 1"],
    );
    // A folder that does not exist: a clear error before the model runs, and no file.
    let missing = dir.path().join("no-such-folder").join("c.svg");
    let missing_arg = missing.display().to_string();
    fails(
        &[
            "--model",
            &model,
            "--generate",
            "2",
            "--figure",
            &missing_arg,
            PROMPT,
        ],
        1,
        &["cannot create", "no-such-folder", "does not exist"],
    );
    assert!(!missing.exists() && !dir.path().join("no-such-folder").exists());
}

/// Batch mode on a causal model: each line's report equals the single-prompt command's on the
/// same prompt and options (a line's "generate" and "seed" standing for --generate and
/// --sample --seed), for the other families too; a line with an encoder's fields, a bad line
/// and an empty prompt get error records with their line numbers, and the rest still run.
#[test]
fn batch_mode_equals_the_single_prompt_command_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("prompts.jsonl");
    let lines = [
        r#"{"text": "The author talked to Sara about"}"#,
        r#"{"text": "Once upon a time", "generate": 3}"#,
        "",
        r#"{"text": "She said that", "seed": 7, "generate": 2}"#,
        r#"{"text": "x", "target": 1}"#,
        "not json",
        r#"{"text": ""}"#,
    ];
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let flags = ["--flow", "--correction", "--mixing", "norm,alti"];
    for family in ["tiny-gpt2", "tiny-llama"] {
        let model = repo().join("models").join(family);
        let output = dir.path().join(format!("{family}.jsonl"));
        let (model_arg, input_arg) = (model.display().to_string(), input.display().to_string());
        let output_arg = output.display().to_string();
        let mut args = vec!["--model", &model_arg, "--input", &input_arg];
        // A prompt at a time: prompts generated together agree within float32 rounding
        // (tests/batching.rs), and this compares every bit.
        args.extend([
            "--output",
            &output_arg,
            "--generate",
            "4",
            "--batch-size",
            "1",
        ]);
        args.extend(flags);
        let summary = run(&args, &[]);
        assert!(summary.starts_with("6 prompts (3 failed)"), "{summary}");
        let records: Vec<serde_json::Value> = std::fs::read_to_string(&output)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(records.len(), 6);
        let singles: [(&str, &[&str]); 3] = [
            ("The author talked to Sara about", &["--generate", "4"]),
            ("Once upon a time", &["--generate", "3"]),
            (
                "She said that",
                &["--generate", "2", "--sample", "--seed", "7"],
            ),
        ];
        for (record, (prompt, extra)) in records.iter().zip(singles) {
            let mut args = vec!["--json", "--model", &model_arg];
            args.extend(flags);
            args.extend(extra);
            args.push(prompt);
            let single: serde_json::Value = serde_json::from_str(&run(&args, &[])).unwrap();
            assert_eq!(record, &single, "{family}: {prompt}");
        }
        let errors: Vec<(u64, &str)> = records[3..]
            .iter()
            .map(|r| (r["line"].as_u64().unwrap(), r["error"].as_str().unwrap()))
            .collect();
        assert_eq!(errors.iter().map(|e| e.0).collect::<Vec<_>>(), [5, 6, 7]);
        assert!(errors[0]
            .1
            .contains("\"target\" is not used with this model"));
        assert!(errors[1].1.contains("not a JSON object"));
        assert!(errors[2].1.contains("the prompt is empty"));
    }
    // Options of an encoder, or of one prompt's outputs, are refused before the model loads.
    let (model, input) = (tiny().display().to_string(), input.display().to_string());
    fails(
        &["--model", &model, "--input", &input, "--target", "2"],
        2,
        &["--target applies to encoders"],
    );
    fails(
        &["--model", &model, "--input", &input, "--json"],
        2,
        &["--json is not used in batch mode"],
    );
}
