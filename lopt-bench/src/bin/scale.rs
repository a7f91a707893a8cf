//! `scale`: 1 thread against N threads on the same fresh documents, in one process, with the CPU
//! time of every thread of the process and the time its threads waited for a core, per call.
//!
//! Two tokenizers of the same file are loaded (one with 1 thread, one with `--threads`), both
//! with the seeded cache built before loading returns, then each document is encoded once by
//! each, in alternating order. Per call the process's threads are read from
//! `/proc/self/task/*/schedstat` (nanoseconds on a core, nanoseconds runnable but waiting), so
//! that a shared, loaded machine can still be read: `wait` is time lost to other processes,
//! `cpu / wall` is how many cores the call kept busy. Linux only.
//!
//! ```text
//! cargo run --release -p lopt-bench --bin scale -- --corpus /tmp/en30.jsonl \
//!     --tokenizer qwen3 --threads 2 --docs 30
//! ```

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Parser;
use lopt::{SeedCache, TokenizerBuilder};
use lopt_bench::{load_docs, median};

#[derive(Parser)]
struct Args {
    /// JSONL corpus with a `text` field.
    #[arg(long)]
    corpus: PathBuf,
    /// Fixture name or path to tokenizer.json.
    #[arg(long)]
    tokenizer: String,
    /// Threads of the parallel tokenizer.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Documents to time (after one warm-up document).
    #[arg(long, default_value_t = 30)]
    docs: usize,
    /// Cut each document to this many bytes.
    #[arg(long, default_value_t = usize::MAX)]
    max_bytes: usize,
    /// Time `encode_ids` instead of `encode`.
    #[arg(long)]
    ids_only: bool,
    /// Milliseconds to wait after loading (the threads that free the parsed files finish; a
    /// profiler started with a delay skips the load).
    #[arg(long, default_value_t = 300)]
    settle_ms: u64,
}

/// (on-CPU ns, runnable-waiting ns) summed over the threads of this process.
fn schedstat() -> (u64, u64) {
    let (mut cpu, mut wait) = (0, 0);
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return (0, 0) };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else { continue };
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().unwrap_or(0));
        cpu += fields.next().unwrap_or(0);
        wait += fields.next().unwrap_or(0);
    }
    (cpu, wait)
}

/// Minor page faults of this process so far (`/proc/self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace().nth(7).and_then(|f| f.parse().ok()).unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    lopt_bench::keep_freed_memory();
    let begun = Instant::now();
    let args = Args::parse();
    let docs = load_docs(&args.corpus, args.docs + 1, args.max_bytes)?;
    if docs.len() < 2 {
        bail!("{} has fewer than 2 documents", args.corpus.display());
    }
    let path = lopt_tests::fixture(&args.tokenizer).unwrap_or_else(|| PathBuf::from(&args.tokenizer));
    let load = |threads| {
        TokenizerBuilder::new()
            .threads(threads)
            .seed_cache(SeedCache::Sync)
            .build_from_file(&path)
            .with_context(|| format!("loading {}", path.display()))
    };
    let tokenizers = [load(1)?, load(args.threads)?];
    eprintln!("loaded {:.2} s after start", begun.elapsed().as_secs_f64());
    std::thread::sleep(std::time::Duration::from_millis(args.settle_ms));
    let encode = |k: usize, text: &str| -> anyhow::Result<usize> {
        let t = &tokenizers[k];
        Ok(if args.ids_only {
            std::hint::black_box(t.encode_ids(text, t.options())?).len()
        } else {
            std::hint::black_box(t.encode(text, true)?).len()
        })
    };
    for k in 0..2 {
        encode(k, &docs[0])?;
    }
    // Per method: wall, cpu, wait (seconds) and minor faults per document.
    let mut rows: [Vec<(f64, f64, f64, f64)>; 2] = Default::default();
    let mut bytes = 0;
    for (i, doc) in docs[1..].iter().enumerate() {
        bytes += doc.len();
        for j in 0..2 {
            let k = (i + j) % 2;
            let (cpu0, wait0) = schedstat();
            let faults0 = minor_faults();
            let start = Instant::now();
            encode(k, doc)?;
            let wall = start.elapsed().as_secs_f64();
            let faults1 = minor_faults();
            let (cpu1, wait1) = schedstat();
            rows[k].push((
                wall,
                (cpu1 - cpu0) as f64 * 1e-9,
                (wait1 - wait0) as f64 * 1e-9,
                (faults1 - faults0) as f64,
            ));
        }
    }
    println!("| threads | MB/s (total wall) | median ms | median cpu ms | median wait ms | cpu/wall | faults/MB |");
    println!("|---|---|---|---|---|---|---|");
    let mut medians = [0.0; 2];
    for k in 0..2 {
        let wall_total: f64 = rows[k].iter().map(|r| r.0).sum();
        let mut walls: Vec<f64> = rows[k].iter().map(|r| r.0).collect();
        let mut cpus: Vec<f64> = rows[k].iter().map(|r| r.1).collect();
        let mut waits: Vec<f64> = rows[k].iter().map(|r| r.2).collect();
        let ratio: f64 = rows[k].iter().map(|r| r.1).sum::<f64>() / wall_total;
        let faults: f64 = rows[k].iter().map(|r| r.3).sum::<f64>() / (bytes as f64 / 1e6);
        medians[k] = median(&mut walls);
        println!(
            "| {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} |",
            tokenizers[k].threads(),
            bytes as f64 / 1e6 / wall_total,
            medians[k] * 1e3,
            median(&mut cpus) * 1e3,
            median(&mut waits) * 1e3,
            ratio,
            faults
        );
    }
    let mut per_doc: Vec<f64> = rows[0].iter().zip(&rows[1]).map(|(a, b)| a.0 / b.0).collect();
    println!("speedup: median per document {:.2}x", median(&mut per_doc));
    Ok(())
}
