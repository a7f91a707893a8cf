//! `speedup`: HF sequential `encode` vs lopt with N threads (HF engine and/or native engine) on
//! the documents of a corpus, interleaved per document, fresh documents, medians.
//!
//! ```text
//! cargo run --release -p lopt-bench --bin speedup -- --corpus ../shared/corpora/en_verylong.jsonl \
//!     --tokenizer qwen3 --threads 2 --docs 8
//! ```
//! Prints one Markdown table row per tokenizer and engine.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;
use lopt::{EngineKind, TokenizerBuilder};
use lopt_bench::{load_docs, median, timed};

#[derive(Parser)]
struct Args {
    /// JSONL corpus with a `text` field.
    #[arg(long)]
    corpus: PathBuf,
    /// Fixture names or paths to tokenizer.json (repeatable).
    #[arg(long, required = true)]
    tokenizer: Vec<String>,
    /// Threads of lopt's pool.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Documents to time (after one warm-up document).
    #[arg(long, default_value_t = 8)]
    docs: usize,
    /// Cut each document to this many bytes.
    #[arg(long, default_value_t = usize::MAX)]
    max_bytes: usize,
    /// Chunk length in bytes for lopt (default: text length / threads).
    #[arg(long)]
    chunk_size: Option<usize>,
    /// Engines to compare with HF sequential: hf, native.
    #[arg(long, default_value = "hf")]
    engines: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let docs = load_docs(&args.corpus, args.docs + 1, args.max_bytes)?;
    if docs.len() < 2 {
        bail!("{} has fewer than 2 documents", args.corpus.display());
    }
    let (warm, docs) = docs.split_at(1);
    let bytes: usize = docs.iter().map(String::len).sum();
    println!(
        "| tokenizer | engine | docs | MB | HF seq MB/s | lopt {}t MB/s | speedup (median per doc) |",
        args.threads
    );
    println!("|---|---|---|---|---|---|---|");
    for name in &args.tokenizer {
        let path = lopt_tests::fixture(name).unwrap_or_else(|| PathBuf::from(name));
        let reference = TokenizerBuilder::new().threads(1).engine(EngineKind::Hf).build_from_file(&path)?;
        for engine in &args.engines {
            let kind = match engine.as_str() {
                "hf" => EngineKind::Hf,
                "native" => EngineKind::Native,
                other => bail!("unknown engine {other}"),
            };
            let mut builder = TokenizerBuilder::new().threads(args.threads).engine(kind);
            if let Some(chunk) = args.chunk_size {
                builder = builder.chunk_size(chunk);
            }
            let lopt = builder.build_from_file(&path)?;
            reference.encode_sequential(&warm[0], true)?;
            lopt.encode(&warm[0], true)?;
            let (mut ratios, mut hf_total, mut lopt_total) = (Vec::new(), 0.0, 0.0);
            for doc in docs {
                let (want, hf_time) = timed(|| reference.encode_sequential(doc, true));
                let (got, lopt_time) = timed(|| lopt.encode(doc, true));
                if got.context("lopt")? != want.context("hf")? {
                    bail!("{name}: lopt output differs from HF");
                }
                hf_total += hf_time.as_secs_f64();
                lopt_total += lopt_time.as_secs_f64();
                ratios.push(hf_time.as_secs_f64() / lopt_time.as_secs_f64());
            }
            let mb = bytes as f64 / 1e6;
            println!(
                "| {name} | {} | {} | {mb:.1} | {:.2} | {:.2} | {:.2}x |",
                lopt.engine_name(),
                docs.len(),
                mb / hf_total,
                mb / lopt_total,
                median(&mut ratios)
            );
        }
    }
    Ok(())
}
