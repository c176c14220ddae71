//! Hostile input (issue 9), one test per class: nothing the user owns is lost, nothing
//! hangs or grows without bound, no NaN passes for a result, nothing from a checkpoint acts
//! on a terminal or breaks XML, no option is silently ignored, and valid files are read.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use common::{bin, fails, repo};

const TEXT: &str = "The author talked to Sara about [MASK] book";
/// Long enough for any of these runs; a hang fails the test instead of stalling it.
const LIMIT: Duration = Duration::from_secs(60);

fn arg(path: &Path) -> String {
    path.display().to_string()
}

fn model(name: &str) -> String {
    arg(&repo().join("models").join(name))
}

/// A scratch copy of a tiny checkpoint, to break.
fn copy_of(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo().join("models").join(name)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    dir
}

/// The names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn lines_file(dir: &Path, name: &str, lines: usize) -> PathBuf {
    let path = dir.join(name);
    let line = format!("{{\"text\": \"{TEXT}\"}}\n");
    std::fs::write(&path, line.repeat(lines)).unwrap();
    path
}

// ---- Data safety -------------------------------------------------------------------

#[test]
fn output_that_is_the_input_is_refused_by_any_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let input = lines_file(dir.path(), "in.jsonl", 2);
    let before = std::fs::read(&input).unwrap();
    std::os::unix::fs::symlink(&input, dir.path().join("link.jsonl")).unwrap();
    std::fs::hard_link(&input, dir.path().join("hard.jsonl")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let spellings = [
        arg(&input),
        arg(&dir.path().join("link.jsonl")),
        arg(&dir.path().join("hard.jsonl")),
        arg(&dir.path().join("sub/../in.jsonl")),
    ];
    for output in spellings {
        let args = [
            "--model",
            &model("tiny-bert-modern"),
            "--input",
            &arg(&input),
            "--output",
            &output,
        ];
        fails(&args, 1, &["is the input file", "would be lost"]);
        assert_eq!(std::fs::read(&input).unwrap(), before, "{output}");
    }
    // The same for a figure over the attention file it is drawn from.
    let attention = dir.path().join("att.npy");
    let uniform = Tensor::full(0.25f32, (2, 4, 4), &Device::Cpu).unwrap();
    uniform.write_npy(&attention).unwrap();
    let attention_bytes = std::fs::read(&attention).unwrap();
    std::os::unix::fs::symlink(&attention, dir.path().join("fig.svg")).unwrap();
    let args = [
        "--attention",
        &arg(&attention),
        "--target",
        "1",
        "--figure",
        &arg(&dir.path().join("fig.svg")),
    ];
    fails(&args, 1, &["is the input file"]);
    assert_eq!(std::fs::read(&attention).unwrap(), attention_bytes);
}

#[test]
fn a_failed_batch_keeps_the_existing_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = lines_file(dir.path(), "in.jsonl", 2);
    let output = dir.path().join("out.jsonl");
    std::fs::write(&output, "precious\n").unwrap();
    let args = [
        "--model",
        "/no/such/model",
        "--input",
        &arg(&input),
        "--output",
        &arg(&output),
    ];
    fails(&args, 1, &["/no/such/model"]);
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "precious\n");
    assert_eq!(listing(dir.path()), ["in.jsonl", "out.jsonl"]);

    // A run that succeeds replaces it, through a link too.
    std::os::unix::fs::symlink(&output, dir.path().join("link.jsonl")).unwrap();
    let done = bin()
        .args([
            "--model",
            &model("tiny-bert-modern"),
            "--input",
            &arg(&input),
        ])
        .args(["--output", &arg(&dir.path().join("link.jsonl"))])
        .timeout(LIMIT)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(std::fs::read_to_string(&output).unwrap().lines().count(), 2);
    assert!(dir.path().join("link.jsonl").is_symlink());
}

/// Starts the binary, waits until a temporary output file appears in `dir`, sends `signal`,
/// and returns the exit status.
fn interrupt(args: &[String], dir: &Path, signal: &str) -> Option<i32> {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_bert-explain"))
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !listing(dir).iter().any(|n| n.ends_with(".tmp")) {
        assert!(start.elapsed() < LIMIT, "no temporary file appeared");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended too soon"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Let it write into the temporary file for a moment.
    std::thread::sleep(Duration::from_millis(300));
    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap().code()
}

#[test]
fn an_interrupted_run_leaves_nothing_partial() {
    let dir = tempfile::tempdir().unwrap();
    let input = lines_file(dir.path(), "in.jsonl", 5000);
    let output = dir.path().join("out.jsonl");
    std::fs::write(&output, "precious\n").unwrap();
    let args: Vec<String> = [
        "--model",
        &model("tiny-bert-modern"),
        "--input",
        &arg(&input),
        "--output",
        &arg(&output),
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(interrupt(&args, dir.path(), "-TERM"), Some(130));
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "precious\n");
    assert_eq!(listing(dir.path()), ["in.jsonl", "out.jsonl"]);

    // A figure of a long attention stack with every position: Ctrl-C (SIGINT).
    let attention = dir.path().join("att.npy");
    let n = 192;
    let stack =
        (Tensor::ones((12, 1, n, n), DType::F32, &Device::Cpu).unwrap() / n as f64).unwrap();
    stack.write_npy(&attention).unwrap();
    let args: Vec<String> = [
        "--attention",
        &arg(&attention),
        "--target",
        "0",
        "--all-positions",
        "--figure",
        &arg(&dir.path().join("fig.svg")),
        "--html",
        &arg(&dir.path().join("page.html")),
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(interrupt(&args, dir.path(), "-INT"), Some(130));
    assert_eq!(listing(dir.path()), ["att.npy", "in.jsonl", "out.jsonl"]);
}

// ---- Bounded reading ---------------------------------------------------------------

#[test]
fn npy_headers_that_overflow_or_lie_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let npy = |shape: &str, data: usize| {
        let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((header.len() as u16).to_le_bytes());
        bytes.extend(header.as_bytes());
        bytes.extend(vec![0u8; data]);
        let path = dir.path().join("a.npy");
        std::fs::write(&path, bytes).unwrap();
        arg(&path)
    };
    let huge = "(18446744073709551615, 18446744073709551615, 2, 2)";
    fails(
        &["--attention", &npy(huge, 16), "--target", "0"],
        1,
        &["more than the 16 bytes of data"],
    );
    let product_overflows = "(4294967296, 4294967296, 4294967296, 1)";
    fails(
        &["--attention", &npy(product_overflows, 0), "--target", "0"],
        1,
        &["truncated or its header is wrong"],
    );
    fails(
        &["--attention", &npy("(2, 3, 4, 4)", 10), "--target", "0"],
        1,
        &["truncated"],
    );
}

#[test]
fn files_that_never_end_or_block_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let tiny = model("tiny-bert-modern");
    fails(
        &["--model", &tiny, "--input", "/dev/zero"],
        1,
        &["cannot read /dev/zero", "not a regular file"],
    );
    // config.json as a link to /dev/zero, and as a FIFO nobody writes to.
    let zero = copy_of("tiny-bert-modern");
    std::fs::remove_file(zero.path().join("config.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.path().join("config.json")).unwrap();
    fails(
        &["--model", &arg(zero.path()), TEXT],
        1,
        &["not a regular file"],
    );
    let fifo = copy_of("tiny-bert-modern");
    std::fs::remove_file(fifo.path().join("config.json")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(fifo.path().join("config.json"))
        .status()
        .unwrap();
    assert!(made.success());
    fails(
        &["--model", &arg(fifo.path()), TEXT],
        1,
        &["not a regular file"],
    );
    // Weights and tokenizer as devices.
    for file in ["model.safetensors", "tokenizer.json"] {
        let broken = copy_of("tiny-bert-modern");
        std::fs::remove_file(broken.path().join(file)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", broken.path().join(file)).unwrap();
        fails(
            &["--model", &arg(broken.path()), TEXT],
            1,
            &["not a regular file"],
        );
    }
    assert!(start.elapsed() < LIMIT);
    drop(dir);
}

#[test]
fn a_huge_batch_line_is_one_error_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.jsonl");
    let huge = format!("{{\"text\": \"{}\"}}\n", "word ".repeat(1 << 19));
    let good = format!("{{\"text\": \"{TEXT}\"}}\n");
    std::fs::write(&path, format!("{good}{huge}{good}")).unwrap();
    let output = bin()
        .args([
            "--model",
            &model("tiny-bert-modern"),
            "--input",
            &arg(&path),
        ])
        .timeout(LIMIT)
        .output()
        .unwrap();
    assert!(output.status.success());
    let records: Vec<serde_json::Value> = output
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3);
    assert!(records[0]["tokens"].is_array());
    assert_eq!(records[1]["line"], 2);
    let error = records[1]["error"].as_str().unwrap();
    assert!(error.contains("longer than 1048576 bytes"), "{error}");
    assert!(records[2]["tokens"].is_array());
}

// ---- No NaN as a result ------------------------------------------------------------

/// A copy of the modern tiny checkpoint with one tensor changed.
fn with_tensor(name: &str, change: impl Fn(&Tensor) -> Tensor) -> tempfile::TempDir {
    let dir = copy_of("tiny-bert-modern");
    let path = dir.path().join("model.safetensors");
    let mut tensors: HashMap<String, Tensor> =
        candle_core::safetensors::load(&path, &Device::Cpu).unwrap();
    let tensor = tensors.get(name).unwrap_or_else(|| panic!("no {name}"));
    tensors.insert(name.to_string(), change(tensor));
    candle_core::safetensors::save(&tensors, &path).unwrap();
    dir
}

#[test]
fn nan_or_overflowing_weights_are_errors_naming_the_layer() {
    let nan = |t: &Tensor| (t.ones_like().unwrap() * f64::NAN).unwrap();
    let query = "bert.encoder.layer.1.attention.self.query.weight";
    let dir = with_tensor(query, nan);
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["attention of layer 2 head 0 is not finite"],
    );
    let dir = with_tensor(query, |t| (t * 1e38).unwrap());
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["attention of layer 2", "is not finite"],
    );
    let dir = with_tensor("cls.predictions.decoder.weight", nan);
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["prediction head's output is not finite"],
    );
    let dir = copy_of("tiny-bert-modern");
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("1e-12", "-1.0")).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        1,
        &["layer_norm_eps -1 is not a positive number"],
    );
}

#[test]
fn min_fusion_that_empties_a_row_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("att.npy");
    // Two heads on two tokens that never attend to the same token from row 1.
    let data = vec![0.5f32, 0.5, 1.0, 0.0, 0.5, 0.5, 0.0, 1.0];
    Tensor::from_vec(data, (1, 2, 2, 2), &Device::Cpu)
        .unwrap()
        .write_npy(&path)
        .unwrap();
    let args = [
        "--attention",
        &arg(&path),
        "--target",
        "0",
        "--fusion",
        "min",
    ];
    fails(
        &args,
        1,
        &["--fusion min leaves layer 1 row 1 with no attention"],
    );
}

// ---- Escaping ----------------------------------------------------------------------

/// The modern tiny checkpoint with the vocabulary entry "it" (its top prediction for
/// TEXT) renamed to `token`.
fn with_token(token: &str) -> tempfile::TempDir {
    let dir = copy_of("tiny-bert-modern");
    let path = dir.path().join("tokenizer.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vocab = json["model"]["vocab"].as_object_mut().unwrap();
    let id = vocab.remove("it").unwrap();
    vocab.insert(token.to_string(), id);
    std::fs::write(&path, json.to_string()).unwrap();
    dir
}

#[test]
fn checkpoint_tokens_cannot_act_on_the_terminal() {
    let dir = with_token("\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}it");
    let output = bin()
        .args([
            "--model",
            &arg(dir.path()),
            TEXT,
            "--layers",
            "--color",
            "always",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{202e}it"),
        "{stdout}"
    );
    for bad in ["\u{1b}]", "\u{1b}[2J", "\u{7}", "\u{202e}"] {
        assert!(!stdout.contains(bad), "{bad:?} reached the terminal");
    }
}

#[test]
fn tokens_xml_forbids_keep_the_svg_well_formed() {
    let dir = with_token("\u{fffe}it\u{1}");
    let out = tempfile::tempdir().unwrap();
    let (svg, png) = (out.path().join("f.svg"), out.path().join("f.png"));
    let output = bin()
        .args(["--model", &arg(dir.path()), TEXT, "--figure", &arg(&svg)])
        .args(["--figure", &arg(&png)])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("\u{fffd}it\u{fffd}"));
    assert!(!text.contains('\u{fffe}') && !text.contains('\u{1}'));
    // The PNG is the SVG parsed by a strict XML parser and drawn.
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    assert!(decoder.read_info().is_ok());
}

// ---- Options: used or refused ------------------------------------------------------

#[test]
fn options_a_mode_does_not_use_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let attention = dir.path().join("att.npy");
    Tensor::full(0.5f32, (1, 2, 2), &Device::Cpu)
        .unwrap()
        .write_npy(&attention)
        .unwrap();
    let att = arg(&attention);
    let input = arg(&lines_file(dir.path(), "in.jsonl", 1));
    let (tiny, gpt2) = (model("tiny-bert-modern"), model("tiny-gpt2"));
    let refused: &[&[&str]] = &[
        &["--model", &tiny, "--attention", &att, "--target", "0"],
        &["--candidates", "a,b", "--attention", &att, "--target", "0"],
        &["--top-k", "3", "--attention", &att, "--target", "0"],
        &["--evaluate", "--attention", &att, "--target", "0"],
        &["--model", &tiny, "--input", &input, "--json"],
        &["--model", &tiny, "--input", &input, "--layers"],
        &["--model", &tiny, "--input", &input, "--color", "never"],
        &["--model", &gpt2, "--candidates", "a", "hello"],
        &["--model", &gpt2, "--top-k", "2", "hello"],
        &["--model", &gpt2, "--color", "always", "hello"],
        &["--model", &gpt2, "--figure-token", "0", "hello"],
        &["--model", &tiny, "--generate", "3", TEXT],
    ];
    for args in refused {
        fails(args, 2, &["leave"]);
    }
    // clap's own checks: options that need another.
    fails(
        &["--tokens", "a b", "--model", &tiny, TEXT],
        2,
        &["--attention"],
    );
    fails(
        &["--output", "o.jsonl", "--model", &tiny, TEXT],
        2,
        &["--input"],
    );
}

#[test]
fn messages_blame_the_right_thing() {
    // A vocabulary without [MASK]: the model's fault, fixed with --target.
    let dir = copy_of("tiny-bert-legacy");
    let vocab = dir.path().join("vocab.txt");
    let text = std::fs::read_to_string(&vocab).unwrap();
    std::fs::write(&vocab, text.replace("[MASK]\n", "[XMASK]\n")).unwrap();
    fails(
        &["--model", &arg(dir.path()), TEXT],
        2,
        &["vocabulary has no mask token", "--target"],
    );
    // A vocabulary larger than the embedding table: said once, naming the token.
    let dir = copy_of("tiny-bert-legacy");
    let vocab = dir.path().join("vocab.txt");
    let text = std::fs::read_to_string(&vocab).unwrap();
    std::fs::write(&vocab, text + "zebra\n").unwrap();
    let output = bin()
        .args(["--model", &arg(dir.path()), "The zebra [MASK]"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("\"zebra\" has id 321"), "{stderr}");
    assert!(stderr.contains("only 321 rows"), "{stderr}");
    assert_eq!(stderr.matches("zebra").count(), 1, "{stderr}");
}

// ---- Valid files are read ----------------------------------------------------------

/// The report of `--attention FILE --json`.
fn attention_report(path: &Path) -> serde_json::Value {
    let output = bin()
        .args(["--attention", &arg(path), "--target", "1", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn numpy_layouts_and_bf16_attention_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // One layer, one head, three tokens, rows summing to 1.
    let rows = [[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.25, 0.25, 0.5]];
    let c_order = dir.path().join("c.npy");
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    Tensor::from_vec(flat, (1, 1, 3, 3), &Device::Cpu)
        .unwrap()
        .write_npy(&c_order)
        .unwrap();
    let want = attention_report(&c_order);

    // What numpy.save writes for np.asfortranarray(a).astype('>f8').
    let header = "{'descr': '>f8', 'fortran_order': True, 'shape': (1, 1, 3, 3), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for j in 0..3 {
        for row in &rows {
            bytes.extend(row[j].to_be_bytes());
        }
    }
    let fortran = dir.path().join("fortran.npy");
    std::fs::write(&fortran, bytes).unwrap();
    assert_eq!(attention_report(&fortran)["relevance"], want["relevance"]);

    // bf16 rows miss 1 by more than 1e-3 through rounding alone.
    let n = 7;
    let row: Vec<f32> = (0..n).map(|_| 1.0 / n as f32).collect();
    let bf16 = Tensor::from_vec(row.repeat(n), (1, n, n), &Device::Cpu)
        .unwrap()
        .to_dtype(DType::BF16)
        .unwrap();
    let sum: f32 = bf16
        .to_dtype(DType::F32)
        .unwrap()
        .get(0)
        .unwrap()
        .get(0)
        .unwrap()
        .sum_all()
        .unwrap()
        .to_scalar()
        .unwrap();
    assert!((sum - 1.0).abs() > 1e-3, "bf16 rounding should show: {sum}");
    let path = dir.path().join("bf16.safetensors");
    candle_core::safetensors::save(&HashMap::from([("attention", bf16)]), &path).unwrap();
    attention_report(&path);
}

#[test]
fn a_bom_or_a_bad_line_spoils_only_its_own_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("in.jsonl");
    let good = format!("{{\"text\": \"{TEXT}\"}}\n");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(good.as_bytes());
    bytes.extend(b"{\"text\": \"caf\xE9 [MASK]\"}\n");
    bytes.extend(good.replace('\n', "\r\n").as_bytes());
    std::fs::write(&path, bytes).unwrap();
    let output = bin()
        .args([
            "--model",
            &model("tiny-bert-modern"),
            "--input",
            &arg(&path),
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let records: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3);
    assert!(records[0]["tokens"].is_array(), "{}", records[0]);
    assert_eq!(records[1]["line"], 2);
    assert!(records[1]["error"].as_str().unwrap().contains("not UTF-8"));
    assert!(records[2]["tokens"].is_array(), "{}", records[2]);
}
