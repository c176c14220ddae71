//! The Hub code path without the Hub: a standard cache laid out as huggingface_hub writes
//! it (HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE=1), and real downloads through hf-hub from a
//! stand-in Hub served on loopback (HF_ENDPOINT).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;

use common::{assert_matches, bin, fixture, repo, report_of};

const TEXT: &str = "The author talked to Sara about [MASK] book";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// Lays `model` out as `<cache>/models--<org>--<name>` with refs/main and a snapshot.
fn fill_cache(cache: &Path, id: &str, model: &str) {
    let repo_dir = cache.join(format!("models--{}", id.replace('/', "--")));
    let snapshot = repo_dir.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo_dir.join("refs")).unwrap();
    std::fs::write(repo_dir.join("refs/main"), COMMIT).unwrap();
    for entry in std::fs::read_dir(repo().join("models").join(model)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, snapshot.join(path.file_name().unwrap())).unwrap();
    }
}

fn explain_json(cmd: &mut assert_cmd::Command) -> bert_explain::Report {
    report_of(cmd.args(["--json", TEXT]))
}

#[test]
fn offline_from_hf_home() {
    let home = tempfile::tempdir().unwrap();
    fill_cache(
        &home.path().join("hub"),
        "test-org/tiny-bert",
        "tiny-bert-modern",
    );
    let report = explain_json(
        bin()
            .env("HF_HOME", home.path())
            .env_remove("HF_HUB_CACHE")
            .args(["--model", "test-org/tiny-bert"]),
    );
    assert_eq!(report.model, "test-org/tiny-bert");
    assert_matches("hub-offline", &report, &fixture("modern-author"), 1e-5);
}

#[test]
fn offline_from_hf_hub_cache_at_a_commit() {
    let cache = tempfile::tempdir().unwrap();
    fill_cache(cache.path(), "test-org/tiny-legacy", "tiny-bert-legacy");
    let report = explain_json(
        bin()
            .env("HF_HUB_CACHE", cache.path())
            .env("HF_HOME", "/nonexistent")
            .args(["--model", "test-org/tiny-legacy", "--revision", COMMIT]),
    );
    assert_matches("hub-commit", &report, &fixture("legacy-author"), 1e-5);
}

/// Serves `model`'s files as the Hub's `resolve` endpoint does (with the headers hf-hub
/// reads and byte ranges), 404 for anything else, until `requests` have been answered or
/// 60 seconds have passed. Returns how many requests were answered with a file.
fn serve_like_the_hub(model: &str, requests: usize) -> (String, std::thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let folder = repo().join("models").join(model);
    let handle = std::thread::spawn(move || {
        let mut served = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        listener.set_nonblocking(true).unwrap();
        let mut answered = 0;
        while answered < requests && std::time::Instant::now() < deadline {
            let Ok((mut stream, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            answered += 1;
            stream.set_nonblocking(false).unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut start = 0usize;
            let mut end = None;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(range) = lower.strip_prefix("range: bytes=") {
                    let (a, b) = range.trim().split_once('-').unwrap();
                    start = a.parse().unwrap();
                    end = b.parse::<usize>().ok();
                }
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or("");
            let file = path.rsplit('/').next().unwrap_or("");
            let bytes = std::fs::read(folder.join(file))
                .ok()
                .filter(|_| !file.is_empty());
            let response = match bytes {
                None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_vec(),
                Some(bytes) => {
                    served += 1;
                    let last = end.unwrap_or(bytes.len() - 1).min(bytes.len() - 1);
                    let body = &bytes[start..=last];
                    let mut head = format!(
                        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{last}/{}\r\nETag: \"etag-{file}-{}\"\r\nX-Repo-Commit: {COMMIT}\r\nConnection: close\r\n\r\n",
                        body.len(),
                        bytes.len(),
                        bytes.len()
                    )
                    .into_bytes();
                    head.extend_from_slice(body);
                    head
                }
            };
            stream.write_all(&response).unwrap();
        }
        served
    });
    (endpoint, handle)
}

#[test]
fn downloads_into_the_cache_then_runs_offline() {
    // The legacy checkpoint has vocab.txt and pytorch_model.bin only, so the download also
    // falls back from tokenizer.json, model.safetensors and a sharded checkpoint's index.
    // hf-hub asks for each file's metadata, then its bytes: config.json (2), tokenizer.json
    // (404), vocab.txt (2), model.safetensors (404), model.safetensors.index.json (404),
    // pytorch_model.bin (2), tokenizer_config.json (2).
    let (endpoint, server) = serve_like_the_hub("tiny-bert-legacy", 11);
    let home = tempfile::tempdir().unwrap();
    let online = explain_json(
        bin()
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("HF_HUB_CACHE")
            .env("HF_HOME", home.path())
            .env("HF_ENDPOINT", &endpoint)
            .args(["--model", "test-org/downloaded"]),
    );
    assert_matches("hub-download", &online, &fixture("legacy-author"), 1e-5);
    assert_eq!(
        server.join().unwrap(),
        8,
        "four files, each asked for twice"
    );
    let snapshot = home
        .path()
        .join("hub/models--test-org--downloaded/snapshots")
        .join(COMMIT);
    assert!(snapshot.join("pytorch_model.bin").is_file());

    // The server is gone: a second run must be served from the cache it filled.
    let offline = explain_json(
        bin()
            .env("HF_HOME", home.path())
            .env_remove("HF_HUB_CACHE")
            .args(["--model", "test-org/downloaded"]),
    );
    assert_eq!(offline, online);
}

#[test]
fn unreachable_hub_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    // Nothing listens there: bind a port, then close it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let output = bin()
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_HOME", home.path())
        .env("HF_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .args(["--model", "test-org/absent", TEXT])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot fetch config.json of test-org/absent"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn downloads_a_sharded_causal_checkpoint() {
    // tiny-llama is sharded: hf-hub fetches config.json, tokenizer.json, finds no
    // model.safetensors (404), then model.safetensors.index.json and the three shards it
    // lists, each file asked for twice (metadata, then bytes).
    let (endpoint, server) = serve_like_the_hub("tiny-llama", 13);
    let home = tempfile::tempdir().unwrap();
    let output = bin()
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("HF_HUB_CACHE")
        .env("HF_HOME", home.path())
        .env("HF_ENDPOINT", &endpoint)
        .args([
            "--model",
            "test-org/sharded-llama",
            "--json",
            "--generate",
            "8",
        ])
        .arg("The author talked to Sara about")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: bert_explain::causal::CausalReport =
        serde_json::from_slice(&output.stdout).unwrap();
    let path = repo().join("tests/fixtures/causal/llm/llama-author.json");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let want: Vec<u32> = serde_json::from_value(fixture["generated_ids"].clone()).unwrap();
    assert_eq!(report.generated_ids, want);
    assert_eq!(
        server.join().unwrap(),
        12,
        "six files, each asked for twice"
    );
}
