//! `defaults`: the measurements behind lopt's default settings, on real documents.
//!
//! 1. *Parallel threshold*: for prefixes of 1 KiB to 256 KiB of each document, the time of one
//!    whole-text encode on one thread against the parallel encode on `--threads` threads (texts
//!    below the crossover are better encoded whole).
//! 2. *Chunks per thread*: on whole documents, chunk length = text length / (threads × k) for
//!    k = 1, 2, 4, 8 (more chunks balance uneven chunks, at some cost per chunk).
//!
//! Interleaved per document, each configuration its own tokenizer instance, medians of
//! per-document times over `--repeat` runs.
//!
//! ```text
//! cargo run --release -p lopt-bench --bin defaults -- --corpus ../shared/corpora/en_verylong.jsonl \
//!     --tokenizer qwen3 --engine native
//! ```

use std::path::PathBuf;

use anyhow::bail;
use clap::Parser;
use lopt::{EngineKind, Tokenizer, TokenizerBuilder};
use lopt_bench::{load_docs, median, timed};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    corpus: PathBuf,
    #[arg(long)]
    tokenizer: String,
    #[arg(long, default_value = "native")]
    engine: String,
    #[arg(long, default_value_t = 2)]
    threads: usize,
    #[arg(long, default_value_t = 6)]
    docs: usize,
    #[arg(long, default_value_t = 5)]
    repeat: usize,
}

fn build(path: &PathBuf, engine: EngineKind, threads: usize, min: usize) -> anyhow::Result<Tokenizer> {
    Ok(TokenizerBuilder::new().threads(threads).engine(engine).min_parallel_bytes(min).build_from_file(path)?)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let engine = match args.engine.as_str() {
        "hf" => EngineKind::Hf,
        "native" => EngineKind::Native,
        other => bail!("unknown engine {other}"),
    };
    let path = lopt_tests::fixture(&args.tokenizer).unwrap_or_else(|| PathBuf::from(&args.tokenizer));
    let docs = load_docs(&args.corpus, args.docs, usize::MAX)?;
    let whole = build(&path, engine, 1, usize::MAX)?;
    let split = build(&path, engine, args.threads, 0)?;
    whole.encode(&docs[0], true)?;
    split.encode(&docs[0], true)?;

    println!("## parallel threshold ({}, {} engine, {} threads)\n", args.tokenizer, args.engine, args.threads);
    println!("| prefix | whole, 1 thread (µs) | split, {} threads (µs) | ratio |", args.threads);
    println!("|---|---|---|---|");
    for kib in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..args.repeat {
            for doc in &docs {
                let text = lopt_tests::truncate(doc, kib * 1024);
                a.push(timed(|| whole.encode(text, true)).1.as_secs_f64() * 1e6);
                b.push(timed(|| split.encode(text, true)).1.as_secs_f64() * 1e6);
            }
        }
        let (a, b) = (median(&mut a), median(&mut b));
        println!("| {kib} KiB | {a:.0} | {b:.0} | {:.2} |", a / b);
    }

    println!("\n## chunks per thread (whole documents)\n");
    println!("| chunks per thread | median ms per document | MB/s |");
    println!("|---|---|---|");
    let bytes: usize = docs.iter().map(String::len).sum();
    for k in [1, 2, 4, 8] {
        let mut per_doc = Vec::new();
        let mut total = 0.0;
        for doc in &docs {
            let chunk = doc.len().div_ceil(args.threads * k).max(1);
            let tokenizer = TokenizerBuilder::new()
                .threads(args.threads)
                .engine(engine)
                .chunk_size(chunk)
                .min_parallel_bytes(0)
                .build_from_file(&path)?;
            tokenizer.encode(&docs[0], true)?;
            let mut runs: Vec<f64> =
                (0..args.repeat).map(|_| timed(|| tokenizer.encode(doc, true)).1.as_secs_f64()).collect();
            let m = median(&mut runs);
            total += m;
            per_doc.push(m * 1e3);
        }
        println!("| {k} | {:.2} | {:.1} |", median(&mut per_doc), bytes as f64 / 1e6 / total);
    }
    Ok(())
}
