//! Criterion benches for short prompts: the per-call time of `encode` at 256 B, 1 KB, 4 KB and
//! 16 KB (1 and 2 threads), and `encode_batch` of 1,000 texts of 1 KB. Each bench cycles through
//! at least 1,000 distinct texts cut from the corpora: one repeated input would measure only the
//! caches.
//!
//! `cargo bench -p lopt-bench --bench short` (set `LOPT_BENCH_TOKENIZERS=qwen3,bert-base-uncased`
//! to choose the fixtures).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lopt::TokenizerBuilder;

const SIZES: [usize; 4] = [256, 1024, 4096, 16384];
const DISTINCT: usize = 1000;

/// `count` distinct texts of about `size` bytes, cut from the corpora (generated text without
/// them), each ending at a char boundary.
fn texts(size: usize, count: usize) -> Vec<String> {
    let docs = lopt_tests::corpus_samples(64, usize::MAX);
    let mut texts = Vec::with_capacity(count);
    let mut seed = 0;
    'fill: loop {
        for doc in &docs {
            let mut rest = doc.text.as_str();
            while rest.len() >= size {
                let piece = lopt_tests::truncate(rest, size);
                rest = &rest[piece.len().max(1)..];
                texts.push(piece.to_owned());
                if texts.len() == count {
                    break 'fill;
                }
            }
        }
        // Too little corpus text: top up with generated text.
        texts.push(lopt_tests::generated_text(seed, size));
        seed += 1;
        if texts.len() == count {
            break;
        }
    }
    texts
}

fn fixtures() -> Vec<(&'static str, std::path::PathBuf)> {
    let wanted = std::env::var("LOPT_BENCH_TOKENIZERS").unwrap_or_else(|_| "qwen3,bert-base-uncased".into());
    lopt_tests::available_fixtures().into_iter().filter(|(name, _)| wanted.split(',').any(|w| w == *name)).collect()
}

fn encode_one(c: &mut Criterion) {
    let mut group = c.benchmark_group("short");
    for size in SIZES {
        let texts = texts(size, DISTINCT);
        group.throughput(Throughput::Bytes(size as u64));
        for (name, path) in fixtures() {
            for threads in [1, 2] {
                let Ok(tokenizer) = TokenizerBuilder::new().threads(threads).build_from_file(&path) else { continue };
                let mut next = 0;
                group.bench_function(BenchmarkId::new(format!("{name}/{size}B"), threads), |b| {
                    b.iter(|| {
                        next = (next + 1) % texts.len();
                        tokenizer.encode(&texts[next], true).map(|e| e.len())
                    })
                });
            }
        }
    }
    group.finish();
}

fn encode_batch(c: &mut Criterion) {
    let texts = texts(1024, DISTINCT);
    let mut group = c.benchmark_group("batch-1000x1KB");
    group.throughput(Throughput::Bytes(texts.iter().map(|t| t.len() as u64).sum()));
    group.sample_size(20);
    for (name, path) in fixtures() {
        for threads in [1, 2] {
            let Ok(tokenizer) = TokenizerBuilder::new().threads(threads).build_from_file(&path) else { continue };
            group.bench_function(BenchmarkId::new(name, threads), |b| {
                b.iter(|| tokenizer.encode_batch(&texts, true).map(|e| e.len()))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, encode_one, encode_batch);
criterion_main!(benches);
