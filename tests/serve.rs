//! `bert-explain serve`: its API against the command line's JSON for the same input (encoder,
//! classifier and causal models), its errors (the command line's messages, 4xx), concurrent
//! requests, the head view's arrays, Ctrl-C, and the explorer page in headless Chromium
//! (tests/browser/check-explorer.mjs) against the command line's reports.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::repo;
use serde_json::{json, Value};

const SENTENCE: &str = "The author talked to Sara about [MASK] book";

/// A running server and its address (`127.0.0.1:port`).
struct Served {
    child: Child,
    address: String,
}

impl Served {
    fn start(model: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bert-explain"))
            .arg("serve")
            .arg("--model")
            .arg(model)
            .args(["--port", "0"])
            .args(extra)
            .env("HF_HUB_OFFLINE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Self { child, address }
    }

    /// `(status, body)` of one request.
    fn call(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let (status, _, body) = self.exchange("1.1", method, path, body);
        (status, body)
    }

    /// `(status, head, body)` of one request in HTTP/`version`.
    fn exchange(
        &self,
        version: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> (u16, String, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        write!(
            stream,
            "{method} {path} HTTP/{version}\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.address,
            body.len()
        )
        .unwrap();
        stream.write_all(body).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a complete response");
        let head = String::from_utf8_lossy(&response[..split]).to_string();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, head, response[split + 4..].to_vec())
    }

    /// The JSON lines of `/api/explain?{query}` for `body`, its chunks joined.
    fn stream(&self, query: &str, body: &Value) -> Vec<Value> {
        let bytes = body.to_string();
        let path = format!("/api/explain?{query}");
        let (status, head, mut chunked) = self.exchange("1.1", "POST", &path, bytes.as_bytes());
        assert_eq!(status, 200, "{head}");
        assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
        assert!(
            head.contains("Content-Type: application/x-ndjson"),
            "{head}"
        );
        let mut joined = Vec::new();
        loop {
            let end = chunked.windows(2).position(|w| w == b"\r\n").unwrap();
            let size = usize::from_str_radix(std::str::from_utf8(&chunked[..end]).unwrap(), 16);
            let size = size.unwrap();
            if size == 0 {
                assert_eq!(&chunked[end..], b"\r\n\r\n", "the last chunk ends the body");
                break;
            }
            joined.extend_from_slice(&chunked[end + 2..end + 2 + size]);
            assert_eq!(&chunked[end + 2 + size..end + 4 + size], b"\r\n");
            chunked.drain(..end + 4 + size);
        }
        let text = String::from_utf8(joined).unwrap();
        assert!(text.ends_with('\n'), "{text}");
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, bytes) = self.call("POST", path, body.to_string().as_bytes());
        (status, serde_json::from_slice(&bytes).unwrap())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn model(name: &str) -> PathBuf {
    repo().join("models").join(name)
}

/// The command line's JSON report.
fn cli(model: &Path, args: &[&str]) -> Value {
    common::report_of(
        common::bin()
            .arg("--json")
            .arg("--model")
            .arg(model)
            .args(args),
    )
}

/// The command line's message for a usage error (exit status 2).
fn cli_error(model: &Path, args: &[&str]) -> String {
    let output = common::bin()
        .arg("--model")
        .arg(model)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let line = stderr.lines().find(|l| l.starts_with("Error: ")).unwrap();
    line["Error: ".len()..].to_string()
}

#[test]
fn reports_equal_the_command_lines() {
    let modern = model("tiny-bert-modern");
    let served = Served::start(&modern, &[]);
    let cases: [(Value, &[&str]); 4] = [
        (json!({"text": SENTENCE}), &[]),
        (
            json!({"text": SENTENCE, "mixing": ["norm", "alti"], "top_k": 2, "candidates": ["his", "the"]}),
            &[
                "--mixing",
                "norm,alti",
                "--top-k",
                "2",
                "--candidates",
                "his,the",
            ],
        ),
        (
            json!({"text": SENTENCE, "target": 2, "all_positions": true, "fusion": "max"}),
            &["--target", "2", "--all-positions", "--fusion", "max"],
        ),
        (
            json!({"text": SENTENCE, "hide_special": true, "residual": 0.3}),
            &["--hide-special", "--residual", "0.3"],
        ),
    ];
    for (body, flags) in cases {
        let (status, got) = served.post("/api/explain", &body);
        assert_eq!(status, 200, "{got}");
        let mut args = flags.to_vec();
        args.push(SENTENCE);
        assert_eq!(got, cli(&modern, &args), "{body}");
    }
    let (status, info) = served.call("GET", "/api/info", b"");
    assert_eq!(status, 200);
    let info: Value = serde_json::from_slice(&info).unwrap();
    assert_eq!(
        (info["family"].as_str(), info["task"].as_str()),
        (Some("bert"), Some("masked-lm"))
    );
    assert_eq!(info["predicts"], "words");
    // The page offers every method the command line takes.
    let offered: Vec<&str> = info["mixings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(Value::as_str)
        .collect();
    assert_eq!(
        offered.join(","),
        "attention,norm,alti,value-zeroing,grad-attention"
    );

    // The figure is the command line's --figure file, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("f.svg");
    let svg_arg = svg.display().to_string();
    cli(&modern, &["--figure", &svg_arg, SENTENCE]);
    let (status, bytes) = served.call(
        "POST",
        "/api/figure?format=svg",
        json!({"text": SENTENCE}).to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    assert_eq!(bytes, std::fs::read(&svg).unwrap());

    // A classifier with a pair; a causal model's prompt.
    let classifier = model("tiny-bert-cls");
    let served = Served::start(&classifier, &[]);
    let (_, got) = served.post(
        "/api/explain",
        &json!({"text": "a good film", "pair": "a film"}),
    );
    assert_eq!(got, cli(&classifier, &["--pair", "a film", "a good film"]));
    let gpt2 = model("tiny-gpt2");
    let served = Served::start(&gpt2, &[]);
    let body =
        json!({"text": "The author talked to", "generate": 3, "flow": true, "mixing": "norm"});
    let (_, got) = served.post("/api/explain", &body);
    let args = [
        "--generate",
        "3",
        "--flow",
        "--mixing",
        "norm",
        "The author talked to",
    ];
    assert_eq!(got, cli(&gpt2, &args));
    // Its figures at a generated token, drawn from the report just explained, are the
    // command line's; a token past those asked for is refused.
    for token in [None, Some("0"), Some("2")] {
        let figure = dir.path().join(format!("g{token:?}.svg"));
        let mut args = args.to_vec();
        let path = figure.display().to_string();
        args.splice(0..0, ["--figure", &path]);
        let mut body = body.clone();
        if let Some(token) = token {
            args.splice(0..0, ["--figure-token", token]);
            body["figure_token"] = json!(token.parse::<u64>().unwrap());
        }
        cli(&gpt2, &args);
        let (status, bytes) = served.call("POST", "/api/figure", body.to_string().as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
        assert_eq!(
            bytes,
            std::fs::read(&figure).unwrap(),
            "figure token {token:?}"
        );
    }
    let mut body = body.clone();
    body["figure_token"] = json!(3);
    assert_eq!(served.post("/api/figure", &body).0, 400);
}

#[test]
fn progress_streams_each_flows_count_then_the_report() {
    let served = Served::start(&model("tiny-bert-modern"), &[]);
    for (query, body) in [
        ("progress", json!({"text": SENTENCE, "mixing": ["norm"]})),
        (
            "progress=1",
            json!({"text": SENTENCE, "all_positions": true}),
        ),
        ("progress=true", json!({"text": SENTENCE})),
    ] {
        let mut lines = served.stream(query, &body);
        let last = lines.pop().unwrap();
        assert_eq!(
            last["report"],
            served.post("/api/explain", &body).1,
            "{body}"
        );
        // The flows' counts (attention's and norm's, or every position's), each to its end.
        assert!(!lines.is_empty(), "{body}: no progress line");
        let counts: Vec<(u64, u64)> = lines
            .iter()
            .map(|line| {
                let progress = &line["progress"];
                (
                    progress["done"].as_u64().unwrap(),
                    progress["total"].as_u64().unwrap(),
                )
            })
            .collect();
        assert!(
            counts
                .iter()
                .all(|&(done, total)| 1 <= done && done <= total),
            "{counts:?}"
        );
        assert_eq!(
            counts.last().map(|&(d, t)| d == t),
            Some(true),
            "{counts:?}"
        );
        let ends = counts.iter().filter(|&&(d, t)| d == t).count();
        let begins = counts.iter().filter(|&&(d, _)| d == 1).count();
        assert!(ends == begins && ends >= 1, "{counts:?}");
    }
    // The same request again is answered from the report remembered: no flow, no count.
    let body = json!({"text": SENTENCE});
    let again = served.stream("progress", &body);
    assert_eq!(again.len(), 1, "{:?}", again.first());
    assert_eq!(again[0]["report"], served.post("/api/explain", &body).1);
    // A mistake: the 400's message, as the last line.
    let body = json!({"text": "no mask here"});
    let (status, plain) = served.post("/api/explain", &body);
    assert_eq!(status, 400);
    let lines = served.stream("progress", &body);
    assert_eq!(lines, [json!({"error": plain["error"], "status": 400})]);
    // Progress declined: the plain report.
    let body = json!({"text": SENTENCE});
    for query in ["progress=0", "progress=false"] {
        let (status, got) = served.post(&format!("/api/explain?{query}"), &body);
        assert_eq!((status, &got), (200, &served.post("/api/explain", &body).1));
    }
    // Chunks need HTTP/1.1.
    let bytes = body.to_string();
    let (status, _, answer) =
        served.exchange("1.0", "POST", "/api/explain?progress", bytes.as_bytes());
    assert_eq!(status, 505, "{}", String::from_utf8_lossy(&answer));
}

#[test]
fn mistakes_get_the_command_lines_messages_and_4xx() {
    let modern = model("tiny-bert-modern");
    let served = Served::start(&modern, &[]);
    let cases: [(Value, Vec<&str>); 4] = [
        (json!({"text": "no mask here"}), vec!["no mask here"]),
        (
            json!({"text": SENTENCE, "target": 40}),
            vec!["--target", "40", SENTENCE],
        ),
        (
            json!({"text": SENTENCE, "generate": 3}),
            vec!["--generate", "3", SENTENCE],
        ),
        (
            json!({"text": SENTENCE, "mixing": "magic"}),
            vec!["--mixing", "magic", SENTENCE],
        ),
    ];
    for (body, args) in cases {
        let (status, got) = served.post("/api/explain", &body);
        assert_eq!(status, 400, "{body}");
        assert_eq!(
            got["error"].as_str().unwrap(),
            cli_error(&modern, &args),
            "{body}"
        );
    }
    let long = format!("{} [MASK]", "word ".repeat(600));
    let (status, got) = served.post("/api/explain", &json!({"text": long}));
    assert_eq!(status, 400);
    assert!(
        got["error"].as_str().unwrap().contains("positions"),
        "{got}"
    );
    for (body, needle) in [
        (
            json!({"text": SENTENCE, "output": "x.jsonl"}),
            "\"output\" is not an option here",
        ),
        (json!({"target": 3}), "\"text\" is missing"),
        (json!([SENTENCE]), "not a JSON object"),
        (
            json!({"text": SENTENCE, "residual": 3}),
            "not a number between 0 and 1",
        ),
    ] {
        let (status, got) = served.post("/api/explain", &body);
        assert_eq!(status, 400, "{body}");
        assert!(got["error"].as_str().unwrap().contains(needle), "{got}");
    }
    let (status, _) = served.call("POST", "/api/explain", b"{not json");
    assert_eq!(status, 400);
    let (status, _) = served.call("POST", "/api/explain", &vec![b' '; (1 << 20) + 10]);
    assert_eq!(status, 413);
    assert_eq!(served.call("GET", "/api/explain", b"").0, 405);
    assert_eq!(served.call("GET", "/nothing", b"").0, 404);
    // A query the endpoint does not take is refused, not passed over.
    for (path, needle) in [
        (
            "/api/figure?format=gif",
            "format=gif is not svg, png or html",
        ),
        (
            "/api/figure?format=svg&scale=2",
            "/api/figure takes ?format, not ?scale",
        ),
        (
            "/api/explain?progres",
            "/api/explain takes ?progress, not ?progres",
        ),
        (
            "/api/explain?progress=yes",
            "progress=yes is not 1, true, 0 or false",
        ),
    ] {
        let (status, got) = served.post(path, &json!({"text": SENTENCE}));
        assert_eq!(status, 400, "{path}");
        assert!(got["error"].as_str().unwrap().contains(needle), "{got}");
    }
    // Still answering after all that.
    assert_eq!(
        served.post("/api/explain", &json!({"text": SENTENCE})).0,
        200
    );
}

#[test]
fn concurrent_requests_all_get_their_reports() {
    let modern = model("tiny-bert-modern");
    let served = Served::start(&modern, &[]);
    let want = cli(&modern, &["--all-positions", SENTENCE]);
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    served.post(
                        "/api/explain",
                        &json!({"text": SENTENCE, "all_positions": true}),
                    )
                })
            })
            .collect();
        for call in calls {
            let (status, got) = call.join().unwrap();
            assert_eq!(status, 200);
            assert_eq!(got, want);
        }
    });
}

#[test]
fn the_head_view_has_every_heads_rows() {
    let modern = model("tiny-bert-modern");
    let served = Served::start(&modern, &[]);
    let report = cli(&modern, &[SENTENCE]);
    let (layers, heads, n) = (
        report["layers"].as_u64().unwrap(),
        report["heads"].as_u64().unwrap() as usize,
        report["tokens"].as_array().unwrap().len(),
    );
    let (status, got) = served.post("/api/heads", &json!({"text": SENTENCE, "layer": layers}));
    assert_eq!(status, 200);
    assert_eq!(got["tokens"], report["tokens"]);
    let got: Vec<Vec<Vec<f64>>> = serde_json::from_value(got["heads"].clone()).unwrap();
    assert_eq!((got.len(), got[0].len(), got[0][0].len()), (heads, n, n));
    for row in got.iter().flatten() {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-5);
    }
    // The heads fused by their mean are the raw attention the report shows.
    let raw = &report["relevance"]["raw"][layers as usize - 1];
    let target = report["target"]["index"].as_u64().unwrap() as usize;
    for j in 0..n {
        let mean = got.iter().map(|h| h[target][j]).sum::<f64>() / heads as f64;
        assert!((mean - raw[j].as_f64().unwrap()).abs() < 1e-6);
    }
    for layer in [0, layers + 1] {
        let (status, got) = served.post("/api/heads", &json!({"text": SENTENCE, "layer": layer}));
        assert_eq!(status, 400, "{got}");
    }
    // An option of another task is refused here as /api/explain refuses it.
    let body = json!({"text": SENTENCE, "layer": 1, "evaluate": true, "label": "0"});
    let (status, got) = served.post("/api/heads", &body);
    assert_eq!(status, 400, "{got}");
    assert!(got["error"].as_str().unwrap().contains("--label"), "{got}");
}

/// A causal model's heads cover the positions fed while generating: the prompt and every
/// generated token but the last, each row over the positions up to its own.
#[test]
fn a_causal_models_head_view_covers_the_generated_text() {
    let gpt2 = model("tiny-gpt2");
    let served = Served::start(&gpt2, &[]);
    let prompt = "The author talked to";
    let report = cli(&gpt2, &["--generate", "3", prompt]);
    let strings =
        |key: &str| -> Vec<String> { serde_json::from_value(report[key].clone()).unwrap() };
    let (prompt_tokens, generated) = (strings("prompt_tokens"), strings("generated_tokens"));
    let fed: Vec<String> = [&prompt_tokens[..], &generated[..generated.len() - 1]].concat();
    let (layers, heads) = (
        report["layers"].as_u64().unwrap(),
        report["heads"].as_u64().unwrap(),
    );
    let body = json!({"text": prompt, "generate": 3, "layer": layers});
    let (status, got) = served.post("/api/heads", &body);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["tokens"], json!(fed));
    let got: Vec<Vec<Vec<f64>>> = serde_json::from_value(got["heads"].clone()).unwrap();
    let n = fed.len();
    assert_eq!(
        (got.len(), got[0].len(), got[0][0].len()),
        (heads as usize, n, n)
    );
    for (i, row) in got.iter().flat_map(|head| head.iter().enumerate()) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-5);
        assert!(
            row[i + 1..].iter().all(|&v| v == 0.0),
            "row {i} attends ahead"
        );
    }
    // The heads' mean at each generated token's position is the report's raw attention
    // over the prompt, `[g][m][L]`.
    let m = prompt_tokens.len();
    let raw = &report["relevance"]["raw"];
    for k in 0..generated.len() {
        for j in 0..m {
            let mean = got.iter().map(|h| h[m - 1 + k][j]).sum::<f64>() / heads as f64;
            let want = raw[k][j][layers as usize - 1].as_f64().unwrap();
            assert!(
                (mean - want).abs() < 1e-6,
                "token {k}, prompt {j}: {mean} vs {want}"
            );
        }
    }
}

#[test]
fn ctrl_c_stops_it_and_another_host_is_announced() {
    let served = Served::start(&model("tiny-bert-modern"), &["--host", "0.0.0.0"]);
    let mut served = served;
    assert_eq!(
        served.post("/api/explain", &json!({"text": SENTENCE})).0,
        200
    );
    let pid = served.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = served.child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let mut stderr = String::new();
    served
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("not only this machine"), "{stderr}");
    assert!(
        TcpStream::connect(&served.address).is_err(),
        "still listening"
    );
}

#[test]
fn the_explorer_in_a_browser_shows_the_command_lines_numbers() {
    if !common::browser_available() {
        return;
    }
    let modern = model("tiny-bert-modern");
    let served = Served::start(&modern, &[]);
    let click = 2;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer");
    std::fs::create_dir_all(&dir).unwrap();
    let figure = dir.join("expected.svg");
    let figure_arg = figure.display().to_string();
    cli(
        &modern,
        &["--mixing", "norm", "--figure", &figure_arg, SENTENCE],
    );
    let expected = json!({
        "text": SENTENCE,
        "second": "The author talked to Sara about [MASK] books",
        "click": click,
        "layers": cli(&modern, &[SENTENCE])["layers"],
        "heads": cli(&modern, &[SENTENCE])["heads"],
        "both": cli(&modern, &["--mixing", "norm", SENTENCE]),
        "clicked": cli(&modern, &["--target", &click.to_string(), SENTENCE]),
        "figure": std::fs::read_to_string(&figure).unwrap(),
        "lrp": cli(&modern, &["--lrp", SENTENCE]),
    });
    let expected_path = dir.join("expected.json");
    std::fs::write(&expected_path, expected.to_string()).unwrap();
    let url = format!("http://{}/", served.address);
    let screenshot = dir.join("explorer.png");
    let args = [
        url.as_ref(),
        expected_path.as_os_str(),
        screenshot.as_os_str(),
    ];
    common::run_browser_check("check-explorer.mjs", &args);
}

/// A classifier's labels and a causal model's head view in the browser
/// (tests/browser/check-explorer-tasks.mjs): picking a label explains it as
/// `--evaluate --label` does; the head view covers the generated text.
#[test]
fn the_explorer_in_a_browser_picks_labels_and_shows_a_causal_models_heads() {
    if !common::browser_available() {
        return;
    }
    let classifier = model("tiny-bert-cls");
    let gpt2 = model("tiny-gpt2");
    let (labelled_server, causal_server) =
        (Served::start(&classifier, &[]), Served::start(&gpt2, &[]));
    let text = "a good film";
    let top = cli(&classifier, &[text])["prediction"]["labels"][0]["id"].clone();
    let label = 1 - top.as_u64().unwrap();
    let labelled = cli(
        &classifier,
        &[
            "--evaluate",
            "--label",
            &label.to_string(),
            "--mixing",
            "grad-attention",
            text,
        ],
    );
    let (prompt, generate) = ("The author talked to", 3);
    let generated = cli(&gpt2, &["--generate", &generate.to_string(), prompt]);
    let strings =
        |key: &str| -> Vec<String> { serde_json::from_value(generated[key].clone()).unwrap() };
    let made = strings("generated_tokens");
    let fed = [&strings("prompt_tokens")[..], &made[..made.len() - 1]].concat();
    let expected = json!({
        "classifier": {
            "text": text,
            "label": label,
            "name": labelled["importance"]["word"],
            "layers": labelled["layers"],
            "labelled": labelled,
        },
        "causal": {"prompt": prompt, "generate": generate, "heads": generated["heads"], "fed": fed},
    });
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer-tasks");
    std::fs::create_dir_all(&dir).unwrap();
    let expected_path = dir.join("expected.json");
    std::fs::write(&expected_path, expected.to_string()).unwrap();
    let urls = [&labelled_server, &causal_server].map(|s| format!("http://{}/", s.address));
    let args = [
        urls[0].as_ref(),
        urls[1].as_ref(),
        expected_path.as_os_str(),
    ];
    common::run_browser_check("check-explorer-tasks.mjs", &args);
}

/// An image model in the explorer (tests/browser/check-explorer-image.mjs): a file chosen
/// and sent as base64 comes back as the report's page in a frame, with the command line's
/// numbers (LRP's too); the API takes `"image"`, refuses a text, and says what the model
/// reads.
#[test]
fn the_explorer_explains_an_uploaded_image() {
    let vit = model("tiny-vit-cls");
    let image = common::repo().join("tests/fixtures/vision/images/tall.png");
    let served = Served::start(&vit, &[]);
    let (_, info) = served.call("GET", "/api/info", b"");
    let info: Value = serde_json::from_slice(&info).unwrap();
    assert_eq!(info["reads"], "image");
    let base64 = bert_explain::input::base64_encode(&std::fs::read(&image).unwrap());
    let (status, report) = served.post("/api/explain", &json!({"image": base64}));
    assert_eq!(status, 200, "{report}");
    let want = cli(&vit, &[image.to_str().unwrap()]);
    assert_eq!(report["relevance"], want["relevance"]);
    assert_eq!(report["image"], want["image"]);
    let (status, scored) = served.post("/api/explain", &json!({"image": base64, "lrp": true}));
    assert_eq!(status, 200, "{scored}");
    let want = cli(&vit, &["--lrp", image.to_str().unwrap()]);
    assert_eq!(scored["importance"], want["importance"]);
    let (status, error) = served.post("/api/explain", &json!({"text": "a text"}));
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"].as_str().unwrap().contains("reads images"),
        "{error}"
    );
    let (status, error) = served.post("/api/explain", &json!({"image": "not base64!"}));
    assert_eq!(status, 400, "{error}");
    if !common::browser_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let expected = dir.path().join("expected.json");
    std::fs::write(&expected, want.to_string()).unwrap();
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer-image.png");
    let url = format!("http://{}/", served.address);
    let args = [
        url.as_ref(),
        image.as_os_str(),
        expected.as_os_str(),
        screenshot.as_os_str(),
    ];
    common::run_browser_check("check-explorer-image.mjs", &args);
}
