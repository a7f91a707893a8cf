//! `lopt bench`: times lopt on every document of a JSONL file and prints one JSON object.
//!
//! Method: load the tokenizer (not timed), encode the first document once as a warm-up, then
//! encode each other document once ("fresh" documents, as a server sees prompts) and sum the
//! per-document encode times. A file of one document times that document after its warm-up.
//! Besides the totals it reports the median and 90th percentile of the per-call times, which is
//! what a server sees for short prompts. With `--batch N` a call is one `encode_batch` of `N`
//! documents. With `--ids-only` the calls are `encode_ids` / `encode_batch_ids` (the ids of the
//! same encodings, nothing else computed). `cpu_seconds` is the CPU time of the process's
//! threads over the same calls, each thread alive at the end of a call counted from its start (on
//! a shared machine it does not count waiting for a core).

use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Result};

use crate::args::BenchArgs;
use crate::input::Input;
use crate::source;

#[derive(serde::Serialize)]
struct BenchResult<'a> {
    docs: usize,
    bytes: usize,
    tokens: usize,
    seconds: f64,
    mb_per_s: f64,
    /// CPU time of all the process's threads during the timed calls (Linux only): on a shared
    /// machine wall time includes waiting for a core, CPU time does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_seconds: Option<f64>,
    /// Timed calls (documents, or batches with `--batch`).
    calls: usize,
    /// Median time of one call, in microseconds.
    median_us: f64,
    /// 90th percentile of the time of one call, in microseconds.
    p90_us: f64,
    engine: &'a str,
    threads: usize,
    /// Whether the ids-only mode was timed.
    ids_only: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    ids: Option<Vec<Vec<u32>>>,
    /// The prefix cache's counters (`--prefix-cache`), warm-up included.
    #[serde(skip_serializing_if = "Option::is_none")]
    prefix_cache: Option<CacheStats>,
}

#[derive(serde::Serialize)]
struct CacheStats {
    hits: u64,
    misses: u64,
    bytes_reused: u64,
    bytes_encoded: u64,
    bytes_held: usize,
    entries: usize,
    capacity: usize,
}

/// Runs `lopt bench`.
///
/// # Errors
/// A bad tokenizer, an unreadable, malformed or empty input, an encoding failure.
pub fn run(args: &BenchArgs) -> Result<()> {
    let input = Input::new(Some(&args.input));
    let documents = input.documents()?.read_all()?;
    let Some(first) = documents.first() else { bail!("input {} holds no documents", input.name()) };
    let loaded = source::load(&args.tokenizer)?;
    let tokenizer = &loaded.tokenizer;
    source::note_sequential(tokenizer);
    let special = !args.no_special_tokens;
    let options = tokenizer.options().clone().add_special_tokens(special);
    if args.ids_only {
        std::hint::black_box(tokenizer.encode_ids(&first.text, &options)?);
    } else {
        std::hint::black_box(tokenizer.encode(&first.text, special)?);
    }
    let timed = if documents.len() > 1 { &documents[1..] } else { &documents[..] };
    let (mut bytes, mut tokens) = (0, 0);
    let mut calls = Vec::with_capacity(timed.len());
    let mut cpu = Some(0.0);
    let mut ids = args.print_ids.then(Vec::new);
    let mut record = |encoded: &[u32], text: &str| {
        if let Some(ids) = &mut ids {
            ids.push(encoded.to_vec());
        }
        bytes += text.len();
        tokens += encoded.len();
    };
    for batch in timed.chunks(args.batch.unwrap_or(1)) {
        if args.batch.is_some() {
            let texts: Vec<&str> = batch.iter().map(|d| d.text.as_str()).collect();
            let cpu_start = process_cpu_ns();
            let start = Instant::now();
            if args.ids_only {
                let all = std::hint::black_box(tokenizer.encode_batch_ids(&texts, &options)?);
                calls.push(start.elapsed().as_secs_f64());
                add_cpu(&mut cpu, cpu_start);
                for (encoded, text) in all.iter().zip(&texts) {
                    record(encoded, text);
                }
            } else {
                let encodings = std::hint::black_box(tokenizer.encode_batch(&texts, special)?);
                calls.push(start.elapsed().as_secs_f64());
                add_cpu(&mut cpu, cpu_start);
                for (encoding, text) in encodings.iter().zip(&texts) {
                    record(encoding.ids(), text);
                }
            }
        } else {
            for doc in batch {
                let cpu_start = process_cpu_ns();
                let start = Instant::now();
                if args.ids_only {
                    let encoded = std::hint::black_box(tokenizer.encode_ids(&doc.text, &options)?);
                    calls.push(start.elapsed().as_secs_f64());
                    add_cpu(&mut cpu, cpu_start);
                    record(&encoded, &doc.text);
                } else {
                    let encoding = std::hint::black_box(tokenizer.encode(&doc.text, special)?);
                    calls.push(start.elapsed().as_secs_f64());
                    add_cpu(&mut cpu, cpu_start);
                    record(encoding.ids(), &doc.text);
                }
            }
        }
    }
    let seconds: f64 = calls.iter().sum();
    calls.sort_by(f64::total_cmp);
    let quantile = |q: f64| calls.get(((calls.len() as f64 - 1.0) * q).round() as usize).map_or(0.0, |s| s * 1e6);
    let result = BenchResult {
        docs: timed.len(),
        bytes,
        tokens,
        seconds,
        mb_per_s: if seconds > 0.0 { bytes as f64 / 1e6 / seconds } else { 0.0 },
        cpu_seconds: cpu,
        calls: calls.len(),
        median_us: quantile(0.5),
        p90_us: quantile(0.9),
        engine: tokenizer.engine_name(),
        threads: tokenizer.threads(),
        ids_only: args.ids_only,
        ids,
        prefix_cache: tokenizer.prefix_cache_stats().map(|s| CacheStats {
            hits: s.hits,
            misses: s.misses,
            bytes_reused: s.bytes_reused,
            bytes_encoded: s.bytes_encoded,
            bytes_held: s.bytes_held,
            entries: s.entries,
            capacity: s.capacity,
        }),
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &result)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// CPU time of each of the process's threads so far, `(thread id, nanoseconds)`, from each
/// thread's `/proc/self/task/*/schedstat` (nanosecond resolution); `None` where that is not
/// readable.
fn process_cpu_ns() -> Option<Vec<(u64, u64)>> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let task = task.ok()?;
        let tid = task.file_name().to_str()?.parse::<u64>().ok()?;
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        threads.push((tid, stat.split_whitespace().next()?.parse::<u64>().ok()?));
    }
    Some(threads)
}

/// Adds the CPU time since `start` to `total` (which becomes `None` once a reading fails): per
/// thread, so that a thread that ends during the call (the loader's `lopt-free-json`, freeing a
/// large parsed file) does not take its earlier time out of the sum.
fn add_cpu(total: &mut Option<f64>, start: Option<Vec<(u64, u64)>>) {
    *total = match (*total, start, process_cpu_ns()) {
        (Some(sum), Some(start), Some(end)) => {
            let spent: u64 = end
                .iter()
                .map(|&(tid, ns)| {
                    let before = start.iter().find(|&&(t, _)| t == tid).map_or(0, |&(_, b)| b);
                    ns.saturating_sub(before)
                })
                .sum();
            Some(sum + spent as f64 * 1e-9)
        }
        _ => None,
    };
}
