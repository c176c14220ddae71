//! `--hide-special`: [CLS], [SEP] and punctuation leave every output, JSON included, and
//! each layer is renormalised over the tokens that remain.

mod common;

use bert_explain::Report;
use common::{bin, repo};
use serde_json::Value;

const SENTENCE: &str = "The author, talked to Sara about [MASK] book.";

fn run(args: &[&str]) -> Value {
    common::report_of(
        bin()
            .arg("--model")
            .arg(repo().join("models/tiny-bert-modern"))
            .args(["--json", "--all-positions", SENTENCE])
            .args(args),
    )
}

#[test]
fn json_lists_kept_tokens_and_the_hidden_positions() {
    let full = run(&[]);
    let shown = run(&["--hide-special"]);
    assert!(
        full.get("hidden").is_none(),
        "additive: absent without the flag"
    );
    let hidden: Vec<(u64, &str)> = shown["hidden"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["index"].as_u64().unwrap(), h["token"].as_str().unwrap()))
        .collect();
    assert_eq!(hidden, [(0, "[CLS]"), (3, ","), (10, "."), (11, "[SEP]")]);

    let full: Report = serde_json::from_value(full).unwrap();
    let shown: Report = serde_json::from_value(shown).unwrap();
    let kept: Vec<usize> = [1, 2, 4, 5, 6, 7, 8, 9].into();
    let tokens: Vec<&String> = kept.iter().map(|&j| &full.tokens[j]).collect();
    assert_eq!(shown.tokens.iter().collect::<Vec<_>>(), tokens);
    assert_eq!(shown.tokens[shown.target.index], "[MASK]");
    assert_eq!(shown.target.token, "[MASK]");
    assert_eq!(shown.prediction, full.prediction);

    let methods = |r: &Report| {
        [
            r.relevance.raw.clone(),
            r.relevance.rollout.clone(),
            r.relevance.flow.clone().unwrap(),
        ]
    };
    for (got, all) in methods(&shown).iter().zip(methods(&full)) {
        assert_eq!(got.len(), full.layers);
        for (row, all_row) in got.iter().zip(&all) {
            let sum: f64 = kept.iter().map(|&j| all_row[j]).sum();
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{row:?}");
            for (value, &j) in row.iter().zip(&kept) {
                assert!((value - all_row[j] / sum).abs() < 1e-12);
            }
        }
    }
    let all = shown.all_positions.unwrap();
    for maps in [&all.raw, all.flow.as_ref().unwrap()] {
        assert_eq!(maps.len(), full.layers);
        assert!(maps
            .iter()
            .all(|layer| layer.len() == kept.len()
                && layer.iter().all(|row| row.len() == kept.len())));
    }
}

#[test]
fn a_special_target_stays() {
    let shown: Report = serde_json::from_value(run(&["--hide-special", "--target", "0"])).unwrap();
    assert_eq!(shown.target.index, 0);
    assert_eq!(shown.tokens[0], "[CLS]");
    assert_eq!(shown.tokens.len(), 9);
}

/// `--evaluate`: importance scores are filtered (not renormalised) and the correlations
/// are taken over the kept tokens.
#[test]
fn importance_follows_the_kept_tokens() {
    let full: Report = serde_json::from_value(run(&["--evaluate"])).unwrap();
    let shown: Report = serde_json::from_value(run(&["--evaluate", "--hide-special"])).unwrap();
    let kept = [1, 2, 4, 5, 6, 7, 8, 9];
    let (all, some) = (full.importance.unwrap(), shown.importance.unwrap());
    for (score, values) in all.scores() {
        let picked: Vec<f64> = kept.iter().map(|&j| values[j]).collect();
        assert_eq!(some.score(score).unwrap(), picked, "{score}");
    }
    assert_eq!(some.scores().len(), all.scores().len());
    let want = bert_explain::faithfulness::correlations::Evaluation::compute(
        &shown.relevance,
        None,
        &some,
        None,
    );
    let numbers = |e: &bert_explain::faithfulness::correlations::Evaluation| -> Vec<Option<f64>> {
        let every = bert_explain::faithfulness::scores().count();
        assert_eq!(e.scores.len(), every, "every score correlated");
        e.scores
            .values()
            .flat_map(|k| {
                k.raw
                    .iter()
                    .chain(&k.rollout)
                    .chain(k.flow.iter().flatten())
            })
            .copied()
            .collect()
    };
    let got = numbers(&shown.evaluation.unwrap());
    let want = numbers(&want);
    assert_eq!(got.len(), want.len());
    // JSON's decimal floats may differ from the binary's in the last bit; a score that is
    // constant (gradient_sum_abs, 0 behind a LayerNorm) has no correlation on either side.
    for (g, w) in got.iter().zip(&want) {
        let close = match (g, w) {
            (Some(g), Some(w)) => (g - w).abs() < 1e-9,
            (g, w) => g == w,
        };
        assert!(close, "{got:?} vs {want:?}");
    }
}

/// A view read back from its JSON (what the Python package renders in a notebook) is the
/// view that wrote it: the same JSON, and the shown tokens' positions in the model's input.
#[test]
fn a_view_comes_back_from_its_json() {
    use bert_explain::report::View;
    let report: Report = serde_json::from_value(run(&[])).unwrap();
    for view in [View::full(report.clone()), View::hide_special(report)] {
        let json = serde_json::to_string(&view).unwrap();
        let back = View::from_json(&json).unwrap();
        assert_eq!(back, view);
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
    }
}
