//! `load`: load time of every fixture tokenizer, lopt against HF's `Tokenizer::from_file`, in one
//! process, interleaved in rotating order, medians of `--rounds` rounds.
//!
//! lopt is timed with its seeded pre-token cache built before `build_from_file` returns
//! (`SeedCache::Sync`: the load a server waits for before its first seeded encode) and without
//! it (`SeedCache::Off`: what loading waits for with the default background seed, less the
//! thread start). The background mode itself is not timed here: its thread would still be running
//! into the next measurement.
//!
//! ```text
//! cargo run --release -p lopt-bench --bin load -- --rounds 5
//! ```
//!
//! With `--first-encode CORPUS` it times instead what a server's first request meets: each
//! round loads the tokenizer in each seed mode and encodes a document of the corpus it has not
//! seen right away (the background seed then still being built), and reports the load and that
//! first encode's latency, medians per mode. After a background load it waits `--settle-ms` so
//! that the seed's threads are done before the next measurement starts.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use lopt::{SeedCache, TokenizerBuilder};
use lopt_bench::{load_docs, median, timed};

#[derive(Parser)]
struct Args {
    /// Rounds per tokenizer (each times every method once).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Only these fixtures (comma-separated names; default: every fixture present).
    #[arg(long)]
    only: Option<String>,
    /// Time the first encode right after loading, on documents of this JSONL corpus.
    #[arg(long)]
    first_encode: Option<PathBuf>,
    /// Cut each first-encode document to this many bytes.
    #[arg(long, default_value_t = 200_000)]
    first_bytes: usize,
    /// Milliseconds to wait after a background-seed load before the next measurement.
    #[arg(long, default_value_t = 1500)]
    settle_ms: u64,
    /// Threads of the tokenizer in `--first-encode` (default: every core).
    #[arg(long)]
    threads: Option<usize>,
}

const METHODS: [&str; 3] = ["HF from_file", "lopt (seed sync)", "lopt (seed off)"];

fn main() -> anyhow::Result<()> {
    lopt_bench::keep_freed_memory();
    let args = Args::parse();
    if let Some(corpus) = &args.first_encode {
        return first_encode(&args, corpus);
    }
    println!(
        "| tokenizer | engine | HF from_file (s) | lopt, seed sync (s) | lopt, seed off (s) | sync / HF | off / HF |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, path) in lopt_tests::available_fixtures() {
        if args.only.as_ref().is_some_and(|only| !only.split(',').any(|n| n == name)) {
            continue;
        }
        let mut times: [Vec<f64>; 3] = Default::default();
        let mut engine = "";
        for round in 0..args.rounds {
            for k in 0..METHODS.len() {
                let method = (round + k) % METHODS.len();
                let seconds = match method {
                    0 => {
                        let (hf, t) = timed(|| lopt::hf::Tokenizer::from_file(&path));
                        hf.map_err(|e| anyhow::anyhow!("{e}")).with_context(|| format!("HF loads {name}"))?;
                        t
                    }
                    _ => {
                        let seed = if method == 1 { SeedCache::Sync } else { SeedCache::Off };
                        let (tokenizer, t) = timed(|| TokenizerBuilder::new().seed_cache(seed).build_from_file(&path));
                        engine = tokenizer.with_context(|| format!("lopt loads {name}"))?.engine_name();
                        t
                    }
                };
                times[method].push(seconds.as_secs_f64());
            }
        }
        let [hf, sync, off] = times.map(|mut t| median(&mut t));
        println!("| {name} | {engine} | {hf:.3} | {sync:.3} | {off:.3} | {:.2} | {:.2} |", sync / hf, off / hf);
    }
    Ok(())
}

const FIRST_MODES: [(&str, SeedCache); 3] =
    [("background", SeedCache::Background), ("sync", SeedCache::Sync), ("off", SeedCache::Off)];

/// `--first-encode`: per fixture and seed mode, the load and the first encode of a fresh document
/// right after it (milliseconds, medians), modes in rotating order.
fn first_encode(args: &Args, corpus: &std::path::Path) -> anyhow::Result<()> {
    let docs = load_docs(corpus, args.rounds * FIRST_MODES.len(), args.first_bytes)?;
    anyhow::ensure!(docs.len() >= args.rounds * FIRST_MODES.len(), "{} has too few documents", corpus.display());
    println!("| tokenizer | mode | load (ms) | first encode (ms) | load + first encode (ms) |");
    println!("|---|---|---|---|---|");
    for (name, path) in lopt_tests::available_fixtures() {
        if args.only.as_ref().is_some_and(|only| !only.split(',').any(|n| n == name)) {
            continue;
        }
        let mut times: [(Vec<f64>, Vec<f64>); 3] = Default::default();
        for round in 0..args.rounds {
            for k in 0..FIRST_MODES.len() {
                let method = (round + k) % FIRST_MODES.len();
                let mut builder = TokenizerBuilder::new().seed_cache(FIRST_MODES[method].1);
                if let Some(threads) = args.threads {
                    builder = builder.threads(threads);
                }
                let (tokenizer, load) = timed(|| builder.build_from_file(&path));
                let tokenizer = tokenizer.with_context(|| format!("lopt loads {name}"))?;
                let doc = &docs[round * FIRST_MODES.len() + k];
                let (encoding, encode) = timed(|| tokenizer.encode(doc, true));
                std::hint::black_box(encoding?);
                drop(tokenizer);
                times[method].0.push(load.as_secs_f64() * 1e3);
                times[method].1.push(encode.as_secs_f64() * 1e3);
                if FIRST_MODES[method].1 == SeedCache::Background {
                    std::thread::sleep(std::time::Duration::from_millis(args.settle_ms));
                }
            }
        }
        for (method, (load, encode)) in times.iter_mut().enumerate() {
            let mut total: Vec<f64> = load.iter().zip(encode.iter()).map(|(l, e)| l + e).collect();
            println!(
                "| {name} | {} | {:.1} | {:.1} | {:.1} |",
                FIRST_MODES[method].0,
                median(load),
                median(encode),
                median(&mut total)
            );
        }
    }
    Ok(())
}
