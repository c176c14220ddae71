//! SPEC §2's anchor on the real bert-base-uncased, when it is in the local Hub cache
//! (it cannot be downloaded in CI). Fill the cache once with
//! `bert-explain "The author talked to Sara about [MASK] book"` on a machine with network.

mod common;

use bert_explain::checkpoint::HubRepo;

#[test]
fn bert_base_uncased_reproduces_the_papers_notebook() {
    let hub = HubRepo::from_env("bert-base-uncased", "main");
    if hub.cached("config.json").is_none() {
        // Written past the test harness's capture, so that `cargo test` shows it.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: bert-base-uncased is not in the local Hugging Face cache. To run this test, \
             fetch it once on a machine with network access (`cargo run --release -- \
             \"The author talked to Sara about [MASK] book\"`), then `cargo test --test anchor`."
        );
        return;
    }
    let output = common::bin()
        .args(["--json", "The author talked to Sara about [MASK] book"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: bert_explain::Report = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report.tokens.len(), 10);
    assert_eq!(report.target.index, 7);
    let Some(bert_explain::report::Prediction::Words { candidates, top }) = report.prediction
    else {
        panic!("bert-base-uncased has an MLM head");
    };
    let p = |word: &str| {
        candidates
            .iter()
            .find(|c| c.word == word)
            .unwrap()
            .probability
    };
    // The notebook prints four decimals.
    assert!((p("his") - 0.0700).abs() < 5e-5, "p(his) = {}", p("his"));
    assert!((p("her") - 0.1019).abs() < 5e-5, "p(her) = {}", p("her"));
    assert_eq!(top[0].word, "the");
}
