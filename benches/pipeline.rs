//! The whole pipeline through the library API (tokens, forward pass, attention, raw,
//! rollout, flow, report) on the tiny checkpoint and on the real MiniLM:
//! `cargo bench --bench pipeline`. MiniLM is skipped with a message if
//! models/downloaded/all-MiniLM-L6-v2 is missing (scripts/fetch-minilm.sh fetches it).

use std::path::Path;
use std::time::Duration;

use bert_explain::{device, DeviceChoice, ExplainOptions, Explainer, ModelSource};
use criterion::{criterion_group, criterion_main, Criterion};

fn pipeline(c: &mut Criterion) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cpu = device(DeviceChoice::Cpu).unwrap();
    let cases = [
        (
            "tiny-bert-modern",
            repo.join("models/tiny-bert-modern"),
            "the author talked to sara about [MASK] book",
        ),
        (
            "all-MiniLM-L6-v2",
            repo.join("models/downloaded/all-MiniLM-L6-v2"),
            "the author talked to sara about [MASK] book",
        ),
    ];
    let mut group = c.benchmark_group("pipeline");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for (name, dir, text) in cases {
        if !dir.join("config.json").exists() {
            eprintln!(
                "pipeline/{name} skipped: {} is missing (scripts/fetch-minilm.sh)",
                dir.display()
            );
            continue;
        }
        let source = ModelSource::parse(&dir.to_string_lossy(), "main");
        let explainer = Explainer::load(&source, &cpu).unwrap();
        let options = ExplainOptions::default();
        group.bench_function(name, |b| {
            b.iter(|| explainer.explain(text, &options).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
