//! Criterion benches: per-engine encode throughput on a corpus sample (1 thread and all threads),
//! and the cost of planning cuts. Fixtures and corpora are read from `../shared`; absent ones are
//! skipped.
//!
//! `cargo bench -p lopt-bench` (set `LOPT_BENCH_TOKENIZERS=qwen3,bert-base-cased` to narrow).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lopt::{EngineKind, TokenizerBuilder};

fn sample() -> String {
    let docs = lopt_tests::corpus_samples(2, 256 * 1024);
    docs.into_iter().map(|s| s.text).collect::<Vec<_>>().join("\n")
}

fn encode(c: &mut Criterion) {
    let text = sample();
    let wanted = std::env::var("LOPT_BENCH_TOKENIZERS").unwrap_or_else(|_| "qwen3,bert-base-cased".into());
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    for (name, path) in lopt_tests::available_fixtures() {
        if !wanted.split(',').any(|w| w == name) {
            continue;
        }
        for (engine, kind) in [("hf", EngineKind::Hf), ("native", EngineKind::Native)] {
            for threads in [1, 2] {
                let Ok(tokenizer) = TokenizerBuilder::new().threads(threads).engine(kind).build_from_file(&path) else {
                    continue;
                };
                group.bench_with_input(BenchmarkId::new(format!("{name}/{engine}"), threads), &text, |b, text| {
                    b.iter(|| tokenizer.encode(text, true).map(|e| e.len()))
                });
            }
        }
        let planner = TokenizerBuilder::new().threads(2).chunk_size(4096).build_from_file(&path).ok();
        if let Some(planner) = planner {
            group.bench_with_input(BenchmarkId::new(format!("{name}/plan-4k"), 1), &text, |b, text| {
                b.iter(|| planner.cut_points(text).len())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, encode);
criterion_main!(benches);
