//! `bert-explain serve`: one model loaded once behind a local page (the explorer) and a JSON
//! API that scripts can call too.
//!
//! A request's options are the command line's, as JSON keys (`top_k` for `--top-k`): they
//! are turned back into the command line's arguments and parsed and checked by the same code,
//! so a request is refused exactly where the command would be, with its message.
//!
//! - `GET /`: the explorer (one self-contained page: no CDN, no network).
//! - `GET /api/info`: the model, its family and task, the mixing methods, the headline
//!   importance scores (name, label, signed) and the ends of their colour scale.
//! - `POST /api/explain` `{"text": …, options…}`: the report of `bert-explain --json` (SPEC §4;
//!   a causal model's for a prompt). An image model takes `{"image": BASE64, options…}`: the
//!   file's bytes in base64 (PNG, JPEG, WebP, GIF), in a body of at most 48 MiB.
//! - `POST /api/explain?progress` (or `=1`, `=true`), same body: JSON lines as the work goes,
//!   each flow's `{"progress": {"done": d, "total": t}}` (ten a second at most) and last
//!   `{"report": …}` or `{"error": …, "status": s}` (the status `/api/explain` would answer);
//!   the explorer draws its bar from them.
//! - `POST /api/figure?format=svg|png|html`, same body: the figure or the `--html` page.
//! - `POST /api/heads` `{"text": …, "layer": l, options…}`: every head's attention in layer l,
//!   `{"tokens": [...], "heads": [H][n][n]}`; for a causal model, over the prompt and the
//!   tokens generated from it but the last (its options as for `/api/explain`).
//!
//! A mistake in the request is a 400 with the command line's message (`{"error": …}`), as is a
//! query parameter that `/api/explain` or `/api/figure` does not take; anything else is a 500;
//! bodies over a mebibyte are refused. A few threads answer, each request explained on one of
//! them, so concurrent requests queue rather than pile up.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::ControlFlow;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bert_explain::causal::CausalOptions;
use bert_explain::explain::Input;
use bert_explain::faithfulness::headline_scores;
use bert_explain::image::{decode_keyed, Decoded};
use bert_explain::input::base64_decode;
use bert_explain::methods::Mixing;
use bert_explain::relevance::Progress;
use bert_explain::report::colour::DIVERGING;
use bert_explain::report::{Explained, Format, GeneratedView, Json};
use bert_explain::{device, Error, Loaded, ModelSource, Renderer};
use clap::{CommandFactory, FromArgMatches, Parser};
use serde_json::Value;
use tiny_http::{HTTPVersion, Header, Method, Request, Response, Server};

use super::args::{Args, DeviceArg};
use super::options::{
    given, refuse_for_task, refuse_unused, Mode, CAUSAL_OPTIONS, ENCODER_OPTIONS,
};
use super::{explain_options, mixing_for, view};

/// The page, with its script and styles inline.
const PAGE: &str = include_str!("serve/page.html");
const SCRIPT: &str = include_str!("serve/page.js");
/// An image model's part of the page's script.
const IMAGE_SCRIPT: &str = include_str!("serve/image.js");
const STYLE: &str = include_str!("serve/page.css");
/// The largest request body read.
const BODY_LIMIT: u64 = 1 << 20;
/// The largest request body read where the model reads images: a photograph's bytes in
/// base64.
const IMAGE_BODY_LIMIT: u64 = 48 << 20;
/// How many requests are explained at once.
const WORKERS: usize = 2;
/// How many of the last reports are kept, so that a figure of one is not explained again
/// (two: the explorer compares two texts).
const REMEMBERED: usize = 2;
/// The least time between two progress lines of a count (its first and last always go).
const TICK: Duration = Duration::from_millis(100);

/// Explore a model in the browser: loads it once and serves a local page and a JSON API.
#[derive(Parser, Debug)]
#[command(name = "bert-explain serve", version)]
pub struct ServeArgs {
    /// Hugging Face Hub id or a local checkpoint folder.
    #[arg(long, default_value = "bert-base-uncased")]
    pub model: String,

    /// Hub revision (branch, tag or commit).
    #[arg(long, default_value = "main")]
    pub revision: String,

    /// The port to listen on (0: any free one).
    #[arg(long, default_value_t = 8765)]
    pub port: u16,

    /// The address to listen on. The default answers this machine only; any other lets
    /// whoever reaches it run the model.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,

    /// Where the model runs.
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
}

/// Runs `bert-explain serve` on its arguments (after the word `serve`) until interrupted.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let device = device(args.device.into())?;
    let source = ModelSource::parse(&args.model, &args.revision);
    eprintln!("Loading {source}");
    let loaded = Loaded::load(&source, &device)?;
    let address = SocketAddr::new(args.host, args.port);
    let server = Server::http(address)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot listen on {address}; choose another --port"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .context("the server listens on an IP address")?;
    if !args.host.is_loopback() {
        eprintln!("Note: listening on {}, not only this machine: anyone who reaches it can run the model.", args.host);
    }
    println!(
        "Serving {source} ({} {}) at http://{bound}/ (Ctrl-C stops it)",
        loaded.family(),
        loaded.task_name()
    );
    let state = Arc::new(State {
        loaded,
        model: source.to_string(),
        server,
        recent: Mutex::default(),
    });
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            let state = Arc::clone(&state);
            scope.spawn(move || state.answer_all());
        }
    });
    Ok(())
}

/// What every request reads.
struct State {
    loaded: Loaded,
    /// The model as reports name it.
    model: String,
    server: Server,
    /// The last reports explained, newest first, each under its request's body less
    /// `figure_token`: a figure of the report just explained, or the same request again,
    /// is drawn from it instead of explained again.
    recent: Mutex<VecDeque<(String, Arc<Explained>)>>,
}

/// A response's body and content type, or an error's status and message.
type Answer = Result<(Vec<u8>, &'static str), (u16, String)>;

impl State {
    /// Answers requests until the server stops.
    fn answer_all(&self) {
        for mut request in self.server.incoming_requests() {
            let (path, query) = request.url().split_once('?').unwrap_or((request.url(), ""));
            let streams = *request.method() == Method::Post
                && path == "/api/explain"
                && progress_of(query) == Ok(true);
            if streams {
                self.stream(request);
                continue;
            }
            let answer = self.answer(&mut request);
            respond(request, answer);
        }
    }

    fn answer(&self, request: &mut Request) -> Answer {
        let (path, query) = request.url().split_once('?').unwrap_or((request.url(), ""));
        let (path, query) = (path.to_string(), query.to_string());
        match (request.method(), path.as_str()) {
            (Method::Get, "/") => Ok((page().into_bytes(), "text/html; charset=utf-8")),
            (Method::Get, "/api/info") => Ok((self.info().into_bytes(), "application/json")),
            (Method::Post, "/api/explain" | "/api/figure" | "/api/heads") => {
                let format = match path.as_str() {
                    "/api/explain" => progress_of(&query).map(|_| None),
                    "/api/figure" => format_of(&query).map(Some),
                    _ => Ok(None),
                }?;
                let body = read_body(request, self.body_limit())?;
                match path.as_str() {
                    "/api/heads" => self.heads(&body),
                    _ => self.explain(&body, format, None),
                }
                .map_err(|e| status_of(&e))
            }
            (_, "/" | "/api/info" | "/api/explain" | "/api/figure" | "/api/heads") => {
                Err((405, format!("{path} does not take this method")))
            }
            _ => Err((404, format!("{path} is not here; the page is at /"))),
        }
    }

    /// Whether the model reads images (and its requests give `"image"`, not `"text"`).
    fn reads_images(&self) -> bool {
        matches!(&self.loaded, Loaded::Encoder(explainer) if explainer.reads_images())
    }

    fn body_limit(&self) -> u64 {
        match self.reads_images() {
            true => IMAGE_BODY_LIMIT,
            false => BODY_LIMIT,
        }
    }

    fn info(&self) -> String {
        serde_json::json!({
            "model": self.model,
            "family": self.loaded.family(),
            "task": self.loaded.task_name(),
            "predicts": self.loaded.predicts(),
            "reads": if self.reads_images() { "image" } else { "text" },
            "mixings": Mixing::all().map(Mixing::name).collect::<Vec<_>>(),
            "scores": headline_scores().collect::<Vec<_>>(),
            "diverging": DIVERGING,
        })
        .to_string()
    }

    /// `/api/explain?progress`: the report of the request, its flows' progress streamed as
    /// JSON lines before it, each line a chunk of its own sent at once. The answer's status is
    /// 200 whatever comes; a mistake is the last line's. A client that goes away stops the
    /// flow under way.
    fn stream(&self, mut request: Request) {
        let body = read_body(&mut request, self.body_limit());
        if *request.http_version() < HTTPVersion(1, 1) {
            let message = "?progress streams its lines in chunks: ask with HTTP/1.1";
            return respond(request, Err((505, message.into())));
        }
        let mut out = request.into_writer();
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\
                    Cache-Control: no-store\r\nTransfer-Encoding: chunked\r\n\r\n";
        let (sender, receiver) = channel::<Vec<u8>>();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let line = match body.and_then(|body| {
                    let progress = Some(progress_lines(sender.clone()));
                    self.explain(&body, None, progress)
                        .map_err(|e| status_of(&e))
                }) {
                    Ok((report, _)) => {
                        let report = report.strip_suffix(b"\n").unwrap_or(&report);
                        [b"{\"report\":", report, b"}\n"].concat()
                    }
                    Err((status, message)) => {
                        let line = serde_json::json!({ "error": message, "status": status });
                        format!("{line}\n").into_bytes()
                    }
                };
                let _ = sender.send(line);
            });
            let mut sent = out.write_all(head.as_bytes()).and_then(|()| out.flush());
            while sent.is_ok() {
                let Ok(line) = receiver.recv() else { break };
                sent = write!(out, "{:x}\r\n", line.len())
                    .and_then(|()| out.write_all(&line))
                    .and_then(|()| out.write_all(b"\r\n"))
                    .and_then(|()| out.flush());
            }
            // A client gone: its flow's next tick finds nobody listening and stops.
            drop(receiver);
            if sent.is_ok() {
                let _ = out.write_all(b"0\r\n\r\n").and_then(|()| out.flush());
            }
        });
    }

    /// The report of the request (its JSON), or with `format` its figure or page (of a
    /// causal model's generated token `figure_token`, default the last); its flows tell
    /// `progress`.
    fn explain(
        &self,
        body: &Value,
        format: Option<Format>,
        progress: Option<Progress>,
    ) -> anyhow::Result<(Vec<u8>, &'static str)> {
        // A figure's generated token is the endpoint's to read: only a causal model has one.
        let skip: &[&str] = match format {
            Some(_) => &["figure_token"],
            None => &[],
        };
        let encoder = matches!(self.loaded, Loaded::Encoder(_));
        if encoder && format.is_some() && body.get("figure_token").is_some() {
            let (option, model) = ("--figure-token".into(), self.model.clone());
            return Err(Error::CausalOptionForBert { option, model }.into());
        }
        let image = self.image_of(body)?;
        let skip = [skip, &["image"]].concat();
        let (args, matches) = self.arguments(body, &skip)?;
        let text = args.text.clone().unwrap_or_default();
        let mut options = explain_options(&args)?;
        match &self.loaded {
            Loaded::Encoder(explainer) => {
                refuse_unused(&matches, Mode::Masked, &self.model)?;
                refuse_for_task(|id| given(&matches, id), explainer.task(), &self.model)?;
            }
            Loaded::Causal(_) => refuse_unused(&matches, Mode::Causal, &self.model)?,
        }
        // The report is the same whichever generated token a figure shows.
        let mut key = body.clone();
        if let Some(fields) = key.as_object_mut() {
            fields.remove("figure_token");
        }
        let key = key.to_string();
        let remembered = self.remembered(&key);
        let explained = match (remembered, &self.loaded) {
            (Some(explained), _) => explained,
            (None, Loaded::Encoder(explainer)) => {
                options.mixing = mixing_for(explainer, &args, options.mixing);
                options.progress = progress;
                // Decoded only here: a report remembered (a figure of the image just
                // explained) needs no second decoding.
                let decoded = image.map(decode_base64).transpose()?;
                let input = match &decoded {
                    Some(decoded) => Input::Image(decoded),
                    None => Input::Text(&text),
                };
                let report = explainer.explain_input(input, &options)?;
                self.remember(key, view(report, args.hide_special))
            }
            (None, Loaded::Causal(explainer)) => {
                let causal = CausalOptions {
                    progress,
                    ..args.causal.options(&options)
                };
                let report = explainer.explain(&text, &causal)?;
                self.remember(key, GeneratedView::new(report, None)?.into())
            }
        };
        let token = body.get("figure_token").and_then(Value::as_u64);
        let at_token;
        let shown = match (&*explained, token) {
            (Explained::Generated(generated), Some(token)) => {
                let report = generated.report.clone();
                at_token = Explained::from(GeneratedView::new(report, Some(token as usize))?);
                &at_token
            }
            _ => &*explained,
        };
        let mut bytes = Vec::new();
        match format {
            None => Json.render(shown, &mut bytes)?,
            Some(format) => format.renderer().render(shown, &mut bytes)?,
        }
        Ok((bytes, content_type(format)))
    }

    /// An image model's request's picture (`"image"`: the file's bytes in base64, not yet
    /// decoded), checked against the model: an image model takes an image and no text,
    /// another model no image.
    fn image_of<'a>(&self, body: &'a Value) -> anyhow::Result<Option<&'a str>> {
        let (image, text) = (body.get("image"), body.get("text"));
        match (self.reads_images(), image, text) {
            (true, Some(Value::String(base64)), None) => Ok(Some(base64)),
            (true, Some(_), None) => Err(Error::Request(
                "\"image\" is not a string: give the file's bytes in base64".into(),
            )
            .into()),
            (true, _, _) => Err(Error::Request(
                "this model reads images: give \"image\" (the file's bytes in base64) and no \"text\""
                    .into(),
            )
            .into()),
            (false, Some(_), _) => Err(Error::Request(
                "this model reads text: give \"text\", not \"image\"".into(),
            )
            .into()),
            (false, None, _) => Ok(None),
        }
    }

    /// The report remembered under `key`, if it is among the last few explained.
    fn remembered(&self, key: &str) -> Option<Arc<Explained>> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let found = recent.iter().find(|(known, _)| known == key);
        found.map(|(_, explained)| Arc::clone(explained))
    }

    /// Remembers `explained` under `key`, forgetting the oldest beyond [`REMEMBERED`].
    fn remember(&self, key: String, explained: Explained) -> Arc<Explained> {
        let explained = Arc::new(explained);
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|(known, _)| *known != key);
        recent.push_front((key, Arc::clone(&explained)));
        recent.truncate(REMEMBERED);
        explained
    }

    /// Every head's attention in the request's layer: over the text, or for a causal model
    /// over the positions fed while generating from the prompt as the request says.
    fn heads(&self, body: &Value) -> anyhow::Result<(Vec<u8>, &'static str)> {
        let layer = body.get("layer").and_then(Value::as_u64).ok_or_else(|| {
            Error::Request(
                "\"layer\" (1 to the model's layers) is missing or not a whole number".into(),
            )
        })?;
        let (args, matches) = self.arguments(body, &["layer"])?;
        let text = args.text.clone().unwrap_or_default();
        let options = explain_options(&args)?;
        let found = match &self.loaded {
            Loaded::Encoder(explainer) => {
                refuse_unused(&matches, Mode::Masked, &self.model)?;
                refuse_for_task(|id| given(&matches, id), explainer.task(), &self.model)?;
                explainer.layer_heads(&text, &options, layer as usize)?
            }
            Loaded::Causal(explainer) => {
                refuse_unused(&matches, Mode::Causal, &self.model)?;
                let causal = args.causal.options(&options);
                explainer.layer_heads(&text, &causal, layer as usize)?
            }
        };
        let json =
            serde_json::json!({ "layer": layer, "tokens": found.tokens, "heads": found.heads });
        Ok((json.to_string().into_bytes(), "application/json"))
    }

    /// The request as the command line's arguments, parsed and checked by its parser: each
    /// key an option (`top_k` is `--top-k`; `true` a flag, a list comma-separated), `text`
    /// the text; keys in `skip` are the endpoint's own.
    fn arguments(&self, body: &Value, skip: &[&str]) -> anyhow::Result<(Args, clap::ArgMatches)> {
        let Some(fields) = body.as_object() else {
            return Err(
                Error::Request("the body is not a JSON object with \"text\"".into()).into(),
            );
        };
        let mut argv = vec![
            "bert-explain".to_string(),
            "--model".into(),
            self.model.clone(),
        ];
        let mut text = None;
        for (key, value) in fields {
            if skip.contains(&key.as_str()) {
                continue;
            }
            if key == "text" {
                text = Some(
                    value
                        .as_str()
                        .ok_or_else(|| Error::Request("\"text\" is not a string".into()))?,
                );
                continue;
            }
            if !request_options().contains(&key.as_str()) {
                return Err(Error::Request(format!(
                    "\"{key}\" is not an option here; the options are {}",
                    request_options().join(", ")
                ))
                .into());
            }
            let flag = format!("--{}", key.replace('_', "-"));
            match value {
                Value::Null | Value::Bool(false) => {}
                Value::Bool(true) => argv.push(flag),
                Value::Number(n) => argv.extend([flag, n.to_string()]),
                Value::String(s) => argv.extend([flag, s.clone()]),
                Value::Array(items) => {
                    let items: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
                    let items = items.ok_or_else(|| {
                        Error::Request(format!("\"{key}\" is not a list of strings"))
                    })?;
                    argv.extend([flag, items.join(",")]);
                }
                Value::Object(_) => {
                    return Err(Error::Request(format!("\"{key}\" is not a value")).into())
                }
            }
        }
        // An image's request has no text: its picture is read apart ([`State::image_of`]).
        let text = match (text, self.reads_images()) {
            (Some(text), _) => text,
            (None, true) => "image",
            (None, false) => return Err(Error::Request("\"text\" is missing".into()).into()),
        };
        // After "--", a text starting with "-" is still the text.
        argv.extend(["--".to_string(), text.to_string()]);
        let matches = Args::command()
            .try_get_matches_from(argv)
            .map_err(|e| Error::Request(clap_message(&e)))?;
        let args =
            Args::from_arg_matches(&matches).map_err(|e| Error::Request(clap_message(&e)))?;
        Ok((args, matches))
    }
}

/// Sends `answer`: its body, or an error's status with `{"error": message}`.
fn respond(request: Request, answer: Answer) {
    let response = match answer {
        Ok((body, kind)) => Response::from_data(body).with_header(header(kind)),
        Err((status, message)) => {
            let body = serde_json::json!({ "error": message }).to_string();
            Response::from_data(body.into_bytes())
                .with_status_code(status)
                .with_header(header("application/json"))
        }
    };
    // The client may have gone; nothing to do then.
    let _ = request.respond(response);
}

/// A progress that sends `{"progress": …}` lines to `sender`: each count's first and last,
/// and between them one per [`TICK`] at most. It stops the flow once nobody receives them.
fn progress_lines(sender: Sender<Vec<u8>>) -> Progress {
    let sent = Mutex::new(None::<Instant>);
    Progress(Arc::new(move |done, total| {
        let mut sent = sent.lock().unwrap_or_else(|e| e.into_inner());
        let due = sent.is_none_or(|at| at.elapsed() >= TICK);
        if !(due || done == total) {
            return ControlFlow::Continue(());
        }
        *sent = (done < total).then(Instant::now);
        let line = serde_json::json!({ "progress": { "done": done, "total": total } });
        match sender.send(format!("{line}\n").into_bytes()) {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        }
    }))
}

/// The command line's options a request may give: a text's or a prompt's, and the two
/// outputs' choices (the other options name files or the terminal).
fn request_options() -> Vec<&'static str> {
    let mut options: Vec<&str> = ENCODER_OPTIONS.to_vec();
    let causal = CAUSAL_OPTIONS
        .iter()
        .filter(|o| !ENCODER_OPTIONS.contains(o));
    options.extend(causal);
    options.extend(["hide_special", "figure_token"]);
    options
}

/// Clap's message on one line, without its usage lines and "error: " prefix.
fn clap_message(err: &clap::Error) -> String {
    let text = err.to_string();
    let lines = text.lines().take_while(|line| !line.trim().is_empty());
    let message = lines.map(str::trim).collect::<Vec<_>>().join(" ");
    message
        .strip_prefix("error: ")
        .unwrap_or(&message)
        .to_string()
}

/// The page with its script and styles.
fn page() -> String {
    PAGE.replace("/*STYLE*/", STYLE)
        .replace("/*SCRIPT*/", &[SCRIPT, IMAGE_SCRIPT].concat())
}

fn header(kind: &str) -> Header {
    Header::from_bytes("Content-Type", kind).expect("the content types are valid headers")
}

/// The content type of a report (`None`) or of a file format.
fn content_type(format: Option<Format>) -> &'static str {
    match format {
        None => "application/json",
        Some(Format::Svg) => "image/svg+xml",
        Some(Format::Png) => "image/png",
        Some(Format::Html) => "text/html; charset=utf-8",
    }
}

/// `format=svg|png|html` from the query.
fn format_of(query: &str) -> Result<Format, (u16, String)> {
    match parameter(query, "format", "/api/figure")?.unwrap_or("svg") {
        "svg" => Ok(Format::Svg),
        "png" => Ok(Format::Png),
        "html" => Ok(Format::Html),
        other => Err((400, format!("format={other} is not svg, png or html"))),
    }
}

/// Whether `/api/explain`'s query asks for its progress: `progress`, `progress=1` or
/// `progress=true` do, none or `progress=0` or `progress=false` do not.
fn progress_of(query: &str) -> Result<bool, (u16, String)> {
    match parameter(query, "progress", "/api/explain")? {
        None | Some("0" | "false") => Ok(false),
        Some("" | "1" | "true") => Ok(true),
        Some(other) => Err((400, format!("progress={other} is not 1, true, 0 or false"))),
    }
}

/// The value of `name` in `query` (`""` where it has none), the one parameter `path` takes:
/// any other is refused rather than passed over.
fn parameter<'a>(query: &'a str, name: &str, path: &str) -> Result<Option<&'a str>, (u16, String)> {
    let mut value = None;
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, given) = pair.split_once('=').unwrap_or((pair, ""));
        if key != name {
            return Err((400, format!("{path} takes ?{name}, not ?{key}")));
        }
        value = Some(given);
    }
    Ok(value)
}

/// The request's body as JSON, at most [`BODY_LIMIT`] bytes.
fn read_body(request: &mut Request, limit: u64) -> Result<Value, (u16, String)> {
    let mut bytes = Vec::new();
    let reader = request.as_reader();
    reader
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| (400, format!("cannot read the request: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err((413, format!("the request is over {limit} bytes")));
    }
    serde_json::from_slice(&bytes).map_err(|e| (400, format!("the body is not JSON: {e}")))
}

/// The picture whose file's bytes `base64` spells.
fn decode_base64(base64: &str) -> anyhow::Result<Decoded> {
    let bytes = base64_decode(base64)
        .map_err(|e| Error::Request(format!("\"image\" is not a file's bytes in base64: {e}")))?;
    Ok(decode_keyed(&bytes)?)
}

/// 400 for a mistake in the request (the command line's exit status 2), else 500.
fn status_of(err: &anyhow::Error) -> (u16, String) {
    let usage = err.downcast_ref::<Error>().is_some_and(Error::is_usage);
    (if usage { 400 } else { 500 }, format!("{err:#}"))
}
