//! A quick single-thread throughput measurement (thread CPU time) of the native engine against the HF engine on
//! the shared corpora (not a test: ignored, prints MB/s). Run with
//! `cargo test --release -p lopt --lib bpe::bench -- --ignored --nocapture`;
//! `LOPT_BENCH_TOKENIZERS=qwen3,gpt2` and `LOPT_BENCH_MB=8` narrow it down; `LOPT_BENCH_REPEAT=5` keeps
//! the best of five runs. The native rate is for fresh documents: before each run the pre-token
//! caches are emptied and warmed on the next `LOPT_BENCH_WARM_MB` (default 2) of the corpus; the
//! cold rate starts from empty caches.

use std::sync::Arc;
use std::time::Instant;

use super::BpeEngine;
use crate::engine::hf::HfEngine;
use crate::engine::Engine;
use crate::options::SeedCache;

use crate::testdata::shared;

/// Whole documents of `corpus`, in file order: the first `max_bytes` (the last one cut), then the
/// next `warm_bytes` (documents the measured ones do not contain, to warm the caches with).
fn docs(corpus: &str, max_bytes: usize, warm_bytes: usize) -> (Vec<String>, Vec<String>) {
    let Ok(content) = std::fs::read_to_string(shared().join("corpora").join(corpus)) else {
        return (Vec::new(), Vec::new());
    };
    let mut sets = [Vec::new(), Vec::new()];
    let limits = [max_bytes, warm_bytes];
    let (mut set, mut total) = (0, 0);
    for line in content.lines() {
        if set == 2 {
            break;
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let Some(text) = value["text"].as_str() else { continue };
        let mut text = text.to_string();
        let max = limits[set];
        if total + text.len() > max {
            let mut end = max - total;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        total += text.len();
        sets[set].push(text);
        if total >= max {
            set += 1;
            total = 0;
        }
    }
    let [measured, warm] = sets;
    (measured, warm)
}

/// CPU time of the calling thread in nanoseconds (the machine is shared: wall time is noisy).
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// The best of `LOPT_BENCH_REPEAT` (default 1) runs over `docs`, each after `reset` (the machine
/// is shared, and the best run is the least disturbed one).
fn throughput(engine: &dyn Engine, docs: &[String], reset: &dyn Fn()) -> (f64, usize) {
    let repeat: usize = std::env::var("LOPT_BENCH_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    (0..repeat.max(1))
        .map(|_| {
            reset();
            throughput_once(engine, docs)
        })
        .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a })
}

fn throughput_once(engine: &dyn Engine, docs: &[String]) -> (f64, usize) {
    let bytes: usize = docs.iter().map(String::len).sum();
    let start = Instant::now();
    let cpu = thread_cpu_ns();
    let mut tokens = 0;
    for doc in docs {
        tokens += engine.encode_segment(doc).map_or(0, |s| s.ids.len());
    }
    // The thread CPU time excludes time the thread was preempted, but this kernel counts it in
    // scheduler ticks (4 ms); the wall time is exact. The smaller of the two is the better
    // estimate of one undisturbed run.
    let wall = start.elapsed().as_secs_f64();
    let seconds = match (cpu, thread_cpu_ns()) {
        (Some(a), Some(b)) => wall.min((b - a) as f64 / 1e9 + 0.004),
        _ => wall,
    };
    (bytes as f64 / seconds / 1e6, tokens)
}

#[test]
#[ignore = "benchmark"]
fn single_thread_throughput() {
    let names =
        std::env::var("LOPT_BENCH_TOKENIZERS").unwrap_or_else(|_| "qwen3,llama3_1,gptoss,deepseek_v3,gpt2".into());
    let mb: usize = std::env::var("LOPT_BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let corpora = std::env::var("LOPT_BENCH_CORPORA").unwrap_or_else(|_| "en_verylong,zh_long,mixed_hard".into());
    let with_hf = std::env::var_os("LOPT_BENCH_NO_HF").is_none();
    let warm_mb: usize = std::env::var("LOPT_BENCH_WARM_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    type Docs = (Vec<String>, Vec<String>);
    let texts: Vec<(&str, Docs)> =
        corpora.split(',').map(|c| (c, docs(&format!("{c}.jsonl"), mb << 20, warm_mb << 20))).collect();
    for name in names.split(',') {
        let path = shared().join("tokenizers").join(name).join("tokenizer.json");
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("{name}: no tokenizer at {}", path.display());
            continue;
        };
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let hf = Arc::new(tokenizers::Tokenizer::from_bytes(&bytes).unwrap());
        let t = Instant::now();
        let native = BpeEngine::new(&json, SeedCache::Background).unwrap();
        let build = t.elapsed();
        let hf_engine = HfEngine::new(hf);
        for (corpus, (docs, warm)) in &texts {
            // Fresh documents in a warmed-up process: the pre-token caches hold what other
            // documents left there, never the measured text.
            let warm_up = || {
                native.clear_caches();
                for doc in warm {
                    let _ = native.encode_segment(doc);
                }
            };
            let (cold_mbs, _) = throughput(&native, docs, &|| native.clear_caches());
            let (native_mbs, n_tokens) = throughput(&native, docs, &warm_up);
            // HF is slow: a quarter of the text is enough for its rate.
            let quarter: Vec<String> = docs.iter().take(docs.len().div_ceil(4)).cloned().collect();
            let (hf_mbs, _) = if with_hf { throughput(&hf_engine, &quarter, &|| {}) } else { (f64::NAN, 0) };
            println!(
                "{name:12} {corpus:12} native {native_mbs:6.1} MB/s (cold cache {cold_mbs:6.1})   hf {hf_mbs:5.1} MB/s   x{:4.1}   ({n_tokens} tokens, build {build:?})",
                native_mbs / hf_mbs
            );
        }
    }
}

#[test]
#[ignore = "benchmark"]
fn pretoken_stats() {
    let name = std::env::var("LOPT_BENCH_TOKENIZERS").unwrap_or_else(|_| "qwen3".into());
    let path = shared().join("tokenizers").join(&name).join("tokenizer.json");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let engine = BpeEngine::new(&json, SeedCache::Background).unwrap();
    for corpus in ["en_verylong", "zh_long"] {
        let (docs, _) = docs(&format!("{corpus}.jsonl"), 8 << 20, 0);
        let mut hist = [0usize; 8];
        let mut n = 0usize;
        let mut bytes_by_bucket = [0usize; 8];
        let mut distinct = std::collections::HashSet::new();
        for doc in &docs {
            engine.pre_tokenizer.split(doc, &mut |s: usize, e: usize| {
                let len = e - s;
                let bucket = match len {
                    0..=4 => 0,
                    5..=8 => 1,
                    9..=16 => 2,
                    17..=24 => 3,
                    25..=48 => 4,
                    49..=96 => 5,
                    97..=256 => 6,
                    _ => 7,
                };
                hist[bucket] += 1;
                bytes_by_bucket[bucket] += len;
                n += 1;
                distinct.insert(&doc.as_bytes()[s..e]);
            });
        }
        println!("{name} {corpus}: {n} pre-tokens, {} distinct; count by len <=4,8,16,24,48,96,256,more: {hist:?}; bytes {bytes_by_bucket:?}", distinct.len());
    }
}

/// Thread CPU seconds of one call (the wall time when it is smaller: see [`throughput_once`]).
fn timed(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    let cpu = thread_cpu_ns();
    f();
    let wall = start.elapsed().as_secs_f64();
    match (cpu, thread_cpu_ns()) {
        (Some(a), Some(b)) => wall.min((b - a) as f64 / 1e9 + 0.004),
        _ => wall,
    }
}

/// A/B of the engine with and without the seeded pre-token cache, fresh documents, in one process:
/// both engines are warmed on the same documents, then every measured document is encoded once by
/// each, alternating which goes first. Prints MB/s per round. `LOPT_BENCH_ROUNDS` (default 3).
#[test]
#[ignore = "benchmark"]
fn seed_ab() {
    let names = std::env::var("LOPT_BENCH_TOKENIZERS").unwrap_or_else(|_| "qwen3,llama3_1".into());
    let mb: usize = std::env::var("LOPT_BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let rounds: usize = std::env::var("LOPT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let corpora = std::env::var("LOPT_BENCH_CORPORA").unwrap_or_else(|_| "en_verylong,zh_long".into());
    for name in names.split(',') {
        let path = shared().join("tokenizers").join(name).join("tokenizer.json");
        let Ok(bytes) = std::fs::read(&path) else { continue };
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let t = Instant::now();
        let _hf = tokenizers::Tokenizer::from_bytes(&bytes).unwrap();
        let hf_load = t.elapsed();
        let t = Instant::now();
        let seeded = BpeEngine::new(&json, SeedCache::Background).unwrap();
        let load = t.elapsed();
        let mut plain = BpeEngine::new(&json, SeedCache::Background).unwrap();
        plain.seed = Arc::new(std::sync::OnceLock::new());
        let seed = seeded.seed.wait();
        println!(
            "{name}: build {load:?} (HF from_bytes {hf_load:?}), seed {} entries-bytes {} KiB",
            seed.len(),
            seed.heap_bytes() >> 10
        );
        for corpus in corpora.split(',') {
            let (docs, warm) = docs(&format!("{corpus}.jsonl"), mb << 20, 1 << 20);
            let bytes: usize = docs.iter().map(String::len).sum();
            for round in 0..rounds {
                let engines = [&plain, &seeded];
                let mut secs = [0.0f64; 2];
                for e in engines {
                    e.clear_caches();
                    for doc in &warm {
                        let _ = e.encode_segment(doc);
                    }
                }
                for (k, doc) in docs.iter().enumerate() {
                    for j in 0..2 {
                        let which = (j + k + round) % 2;
                        secs[which] += timed(|| {
                            std::hint::black_box(engines[which].encode_segment(doc).map(|s| s.ids.len()).ok());
                        });
                    }
                }
                println!(
                    "{name:12} {corpus:12} round {round}: A (no seed) {:6.1} MB/s   B (seed) {:6.1} MB/s   B/A {:.3}",
                    bytes as f64 / secs[0] / 1e6,
                    bytes as f64 / secs[1] / 1e6,
                    secs[0] / secs[1]
                );
            }
        }
    }
}

/// The pre-tokenizer alone (pieces counted, nothing encoded) with the bulk mask kernel and with
/// its scalar twin, in one process, alternating which goes first. Prints MB/s per round.
/// `LOPT_BENCH_ROUNDS` (default 3).
#[test]
#[ignore = "benchmark"]
fn pretok_kernels() {
    use super::bits::Kernel;
    use super::pretok::PreTokenizer;
    let names =
        std::env::var("LOPT_BENCH_TOKENIZERS").unwrap_or_else(|_| "qwen3,llama3_1,gptoss,deepseek_v3,gpt2".into());
    let mb: usize = std::env::var("LOPT_BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let rounds: usize = std::env::var("LOPT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let corpora = std::env::var("LOPT_BENCH_CORPORA").unwrap_or_else(|_| "en_verylong,zh_long".into());
    for name in names.split(',') {
        let path = shared().join("tokenizers").join(name).join("tokenizer.json");
        let Ok(bytes) = std::fs::read(&path) else { continue };
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let mut engine = BpeEngine::new(&json, SeedCache::Background).unwrap();
        let pre = std::mem::replace(&mut engine.pre_tokenizer, PreTokenizer::new(Vec::new()));
        let bulk = pre.with_kernel(Kernel::Bulk);
        let scalar = BpeEngine::new(&json, SeedCache::Background).unwrap().pre_tokenizer.with_kernel(Kernel::Scalar);
        let pres = [&bulk, &scalar];
        for corpus in corpora.split(',') {
            let (docs, _) = docs(&format!("{corpus}.jsonl"), mb << 20, 0);
            let bytes: usize = docs.iter().map(String::len).sum();
            for round in 0..rounds {
                let mut secs = [0.0f64; 2];
                let mut pieces = [0usize; 2];
                for j in 0..2 {
                    let which = (j + round) % 2;
                    secs[which] = timed(|| {
                        for doc in &docs {
                            pres[which].split(doc, &mut |_: usize, _: usize| pieces[which] += 1);
                        }
                    });
                }
                assert_eq!(pieces[0], pieces[1]);
                println!(
                    "{name:12} {corpus:12} round {round}: bulk {:7.1} MB/s   scalar {:7.1} MB/s   bulk/scalar {:.3}",
                    bytes as f64 / secs[0] / 1e6,
                    bytes as f64 / secs[1] / 1e6,
                    secs[1] / secs[0]
                );
            }
        }
    }
}
